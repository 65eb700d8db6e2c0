"""A minimal streaming reader of WebDataset tar shards, several times faster than tarfile.

`webdataset` reads shards through `tarfile`, which builds a `TarInfo` object per member and
reads each payload through a file-like wrapper. This reader parses the 512-byte headers itself
out of large reads into one reused buffer and copies each payload out once. On shards of small
documents as `corpusclean pack` writes them (a `txt` and a `json` member each) it reads
several times the docs/s of webdataset on one core (`corpusclean bench` measures both on any
shard set), so a loader process is bounded by storage rather than by parsing.

It understands what tar writers put into shards: POSIX ustar (with the 155-byte name prefix),
GNU long names (`L` members), PAX extended headers (`path` and `size` records) and GNU
base-256 sizes; directories, links and other non-regular members are skipped, as webdataset
skips them. Header checksums are verified, so a corrupt or truncated shard is an error, never
silently misread. Members are grouped into samples exactly as `webdataset.group_by_keys` does:
the key is the path up to the first dot of the file name, the rest (lower-cased) is the
extension, consecutive members with the same key form one sample, and a sample never spans
two shards.
"""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

BLOCK = 512
DEFAULT_CHUNK = 4 << 20
FIRST_READ = 64 << 10
_ZERO_BLOCK = bytes(BLOCK)
# Type flags (as ints, the header byte): regular files are `0`, NUL (pre-POSIX) and `7`.
_REGULAR = frozenset(b"0\x007")
_PAX = ord("x")
_GNU_LONGNAME = ord("L")
_GNU_SPARSE = ord("S")
# Headers that describe the member after them rather than being members.
_META_TYPES = frozenset(b"xgLK")
# webdataset's key rule and metadata filter, kept identical so both readers agree sample for
# sample on any shard.
_KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
_META = re.compile(r"__[^/]*__($|/)")


class TarFormatError(ValueError):
    """A shard that is not a well-formed tar archive (bad checksum, truncated member, ...)."""


def _nts(field: bytes) -> str:
    """A NUL-terminated header string field."""
    end = field.find(b"\0")
    if end >= 0:
        field = field[:end]
    return field.decode("utf-8", "surrogateescape")


def _number(field: bytes) -> int:
    """An octal header number, or a GNU base-256 one (high bit of the first byte set)."""
    if field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        if field[0] & 0x40:  # negative: never valid for a size
            raise TarFormatError("negative number in a tar header")
        return value
    digits = field.strip(b" \0")
    if not digits:
        return 0
    try:
        return int(digits, 8)
    except ValueError:
        raise TarFormatError(f"bad number {field!r} in a tar header") from None


def _pax_records(data: bytes) -> dict[str, str]:
    """The `key=value` records of a PAX extended header payload."""
    records: dict[str, str] = {}
    pos = 0
    n = len(data)
    while pos < n:
        if data[pos] == 0:
            break
        space = data.find(b" ", pos)
        if space < 0:
            raise TarFormatError("malformed PAX header record")
        try:
            length = int(data[pos:space])
        except ValueError:
            raise TarFormatError("malformed PAX header record length") from None
        if length <= 0 or pos + length > n:
            raise TarFormatError("PAX header record runs past its member")
        record = data[space + 1 : pos + length - 1]  # drop the trailing newline
        key, sep, value = record.partition(b"=")
        if not sep:
            raise TarFormatError("PAX header record without '='")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


class _Window:
    """A reused read buffer over a stream, compacted and refilled in place.

    Reading into one buffer instead of allocating a fresh `bytes` per chunk and joining it to
    the remainder makes the reader several times faster, the more so the larger the members
    (`corpusclean bench` measures the reader): each new multi-megabyte object costs a page
    fault per 4 KiB and a second copy.
    """

    def __init__(self, stream: IO[bytes], chunk_size: int) -> None:
        self._readinto = getattr(stream, "readinto", None)
        self._read = stream.read
        self.buf = bytearray(max(chunk_size, BLOCK))
        self.view = memoryview(self.buf)
        self.length = 0
        self.dropped = 0  # stream bytes before buf[0], for error messages
        self._first = True

    def fill(self, pos: int, want: int) -> None:
        """Keep `buf[pos:length]`, moved to the front, and read until `want` bytes are held."""
        remaining = self.length - pos
        if pos:
            # bytes(): the source and target ranges may overlap.
            self.buf[:remaining] = bytes(self.view[pos : self.length])
            self.dropped += pos
        self.length = remaining
        if want > len(self.buf):  # a member larger than the buffer: grow it
            grown = bytearray(want + len(self.buf))
            grown[:remaining] = self.view[:remaining]
            self.view.release()
            self.buf = grown
            self.view = memoryview(grown)
        while self.length < want:
            limit = len(self.buf)
            if self._first:
                # A small first read: the first sample is out after one short device read,
                # not a whole chunk (time to first sample is part of a loader's record).
                limit = min(limit, max(want, FIRST_READ))
                self._first = False
            if self._readinto is not None:
                n = self._readinto(self.view[self.length : limit])
            else:
                data = self._read(limit - self.length)
                n = len(data)
                self.buf[self.length : self.length + n] = data
            if not n:
                return
            self.length += n


def _header_name(header: bytes) -> str:
    """A member's name from its own header: the name field under any ustar prefix."""
    end_name = header.find(b"\0", 0, 100)
    name = header[: end_name if end_name >= 0 else 100].decode("utf-8", "surrogateescape")
    if header[257:263] == b"ustar\0" and header[345] != 0:
        name = _nts(header[345:500]) + "/" + name
    return name


def _bad_size(field: bytes, offset: int) -> int:
    """A size field that is not plain octal: GNU base-256, or an error at `offset`."""
    if field[0] & 0x80:
        return _number(field)
    raise TarFormatError(f"bad size field at offset {offset}")


def _pax_overrides(
    data: bytes, name_next: str | None, size_next: int | None
) -> tuple[str | None, int | None]:
    """The next member's name and size after a PAX header whose payload is `data`."""
    records = _pax_records(data)
    if "path" in records:
        name_next = records["path"]
    if "size" in records:
        try:
            size_next = int(records["size"])
        except ValueError:
            raise TarFormatError("bad PAX size record") from None
    return name_next, size_next


def _other_member(
    typeflag: int, payload: memoryview, name_next: str | None, size_next: int | None
) -> tuple[str | None, int | None]:
    """The next member's name and size after a member neither regular nor PAX."""
    if typeflag == _GNU_LONGNAME:
        return _nts(bytes(payload)), size_next
    if typeflag in _META_TYPES:
        # Global PAX headers carry archive-wide defaults (mtime, charset) that change no
        # member's name or size; `K` is a long link target, used only by links.
        return name_next, size_next
    if typeflag == _GNU_SPARSE:
        raise TarFormatError("GNU sparse members are not supported in shards")
    # Directories, links, devices, FIFOs and vendor types: skipped with their payload, and
    # with any name or size meant for them.
    return None, None


def _check_clean_end(win: _Window) -> None:
    """Raise unless the bytes left (less than a header) are all zero padding."""
    # An end of stream without the two zero blocks is accepted, like tarfile.
    if bytes(win.view[: win.length]).strip(b"\0"):
        raise TarFormatError(f"truncated tar header at offset {win.dropped}")


def iter_members(
    stream: IO[bytes], *, chunk_size: int = DEFAULT_CHUNK
) -> Iterator[tuple[str, bytes]]:
    """(name, payload) of each regular-file member of an uncompressed tar stream, in order.

    Reads `stream` in blocks of `chunk_size` bytes; memory stays at about one chunk plus the
    largest member. Raises `TarFormatError` on a bad checksum or a truncated archive.
    """
    # This loop is the reader's whole cost: the checksum and size of every header are parsed
    # inline; only the name (one call per member) and rare cases go through helpers.
    win = _Window(stream, chunk_size)
    view, length = win.view, 0
    adler = zlib.adler32
    pos = 0
    name_next: str | None = None  # from a GNU `L` member or a PAX `path` record
    size_next: int | None = None  # from a PAX `size` record
    while True:
        if length - pos < BLOCK:
            win.fill(pos, BLOCK)
            view, length, pos = win.view, win.length, 0
            if length < BLOCK:
                _check_clean_end(win)
                return
        header = bytes(view[pos : pos + BLOCK])
        if header[0] == 0 and header == _ZERO_BLOCK:
            return  # end-of-archive marker
        chk = header[148:156]
        try:
            expected = int(chk.strip(b" \0"), 8)
        except ValueError:
            expected = -1
        # The low half of Adler-32 is 1 + the byte sum mod 65521: a C-speed byte sum, 15x
        # cheaper than sum(header). A header sums to at most 130,560, so the comparison is
        # exact but for a 1-in-65,521 chance on an already corrupt header.
        if ((adler(header) & 0xFFFF) - 1 - sum(chk) + 256 - expected) % 65521 and not (
            _signed_checksum_ok(header, expected)
        ):
            raise TarFormatError(f"bad tar header checksum at offset {win.dropped + pos}")
        typeflag = header[156]
        field = header[124:136]
        try:
            size = int(field.strip(b" \0") or b"0", 8)
        except ValueError:
            size = _bad_size(field, win.dropped + pos)
        if size_next is not None and typeflag not in _META_TYPES:
            size = size_next
        start = pos + BLOCK
        end = start + size
        next_pos = start + (size + BLOCK - 1) // BLOCK * BLOCK
        if length < next_pos:
            # The payload runs past the buffered bytes: compact and read on.
            win.fill(pos, next_pos - pos)
            start, end, next_pos = start - pos, end - pos, next_pos - pos
            view, length, pos = win.view, win.length, 0
            if length < end:
                raise TarFormatError(f"truncated tar member at offset {win.dropped}")
        pos = next_pos
        if typeflag in _REGULAR:
            name = _header_name(header) if name_next is None else name_next
            name_next = size_next = None
            if typeflag == 0 and name.endswith("/"):
                continue  # a V7-style directory
            yield name, bytes(view[start:end])
        elif typeflag == _PAX:
            data = bytes(view[start:end])
            # Writers such as webdataset's put one before every member with only `mtime`:
            # that common case costs no call.
            if b"path=" in data or b"size=" in data:
                name_next, size_next = _pax_overrides(data, name_next, size_next)
        else:
            name_next, size_next = _other_member(typeflag, view[start:end], name_next, size_next)


def _signed_checksum_ok(header: bytes, expected: int) -> bool:
    """Some old writers summed signed chars; tarfile accepts either."""
    signed = sum(header) - sum(header[148:156]) + 256 - 256 * sum(b > 127 for b in header)
    return signed == expected


def split_key(name: str) -> tuple[str | None, str | None]:
    """(key, extension) of a member name by webdataset's rule; (None, None) when it has none."""
    if "/" not in name:
        dot = name.find(".")
        if dot <= 0:
            return None, None
        return name[:dot], name[dot + 1 :]
    match = _KEY_EXT.match(name)
    if match is None:
        return None, None
    return match.group(1), match.group(2)


def group_samples(
    members: Iterable[tuple[str, bytes]],
    *,
    url: str | None = None,
    lcase: bool = True,
    suffixes: Container[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Samples `{"__key__", "__url__", ext: bytes, ...}` from members, as webdataset groups them.

    Members without an extension and webdataset metadata members (`__name__`) are skipped; a
    repeated extension within one sample raises `ValueError`, as in webdataset.
    """
    current: dict[str, Any] | None = None
    key_now: str | None = None
    for name, data in members:
        if name.startswith("__") and _META.match(name):
            continue
        key, ext = split_key(name)
        if key is None or ext is None:
            continue
        if lcase:
            ext = ext.lower()
        if key != key_now:
            if current is not None and len(current) > 2:
                yield current
            current = {"__key__": key, "__url__": url}
            key_now = key
        assert current is not None
        if ext in current:
            raise ValueError(f"{name}: duplicate file name in tar file {url}")
        if suffixes is None or ext in suffixes:
            current[ext] = data
    if current is not None and len(current) > 2:
        yield current


def iter_samples(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    chunk_size: int = DEFAULT_CHUNK,
    suffixes: Container[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """The samples of one shard (a path or a binary stream), grouped by key.

    A path is read in `chunk_size` blocks straight from the file descriptor.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        # Unbuffered: the reader does its own large reads, a second buffer only copies.
        with open(path, "rb", buffering=0) as f:
            with contextlib.suppress(AttributeError, OSError):
                # Doubles the kernel's readahead window. (A reading thread ahead of the parser
                # and WILLNEED hints for the next chunk were measured too: neither was faster.)
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            yield from group_samples(
                iter_members(f, chunk_size=chunk_size), url=str(path), suffixes=suffixes
            )
    else:
        url = getattr(source, "name", None)
        yield from group_samples(
            iter_members(source, chunk_size=chunk_size),
            url=str(url) if url is not None else None,
            suffixes=suffixes,
        )


def iter_shards(
    paths: Iterable[str | os.PathLike[str]],
    *,
    chunk_size: int = DEFAULT_CHUNK,
    suffixes: Container[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """The samples of several shards in order; a sample never spans two shards."""
    for path in paths:
        yield from iter_samples(path, chunk_size=chunk_size, suffixes=suffixes)
