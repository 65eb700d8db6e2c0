"""The offsets and bytes of a string or binary Arrow array as numpy arrays, without a copy.

    from corpusclean.pipelines.arrowbuf import value_buffers

    offsets, data = value_buffers(arr)                 # absolute: into the whole data buffer
    first = data[offsets[0] : offsets[1]]              # the bytes of element 0
    rel, data = value_buffers(arr, relative=True)      # relative: rel[0] == 0, data exactly
    sizes = np.diff(rel)                               #   the array's bytes, rel[-1] == data.size

`value_buffers(arr)` returns `(offsets, data)`: `offsets` is int64 with `len(arr) + 1` entries
and `data` is uint8, so element i is `data[offsets[i] : offsets[i + 1]]`.

* Absolute (the default): `data` is the array's whole data buffer and `offsets` index into it
  as stored, so a slice (`arr.offset > 0`) gives offsets that need not start at 0. The view
  keeps the buffer alive; use it to rebuild an array over the same buffer (`binary_array`).
* `relative=True`: `offsets[0] == 0` and `data` is exactly the bytes of the array's elements
  (`offsets[-1] == len(data)`), a zero-copy slice of the data buffer.

It takes `string`, `large_string`, `binary` and `large_binary` arrays (32- and 64-bit offsets,
both returned as int64), `string_view`/`binary_view` (cast to large_binary first: a copy), and
a `ChunkedArray` of any of these (combined into one array first: a copy unless it has one
chunk). An empty array, or one whose data buffer is absent (all elements empty or null), gives
`offsets` of zeros and an empty `data`. Null elements are not masked: they usually span no
bytes, but check `arr.null_count` (or fill nulls first) when that matters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

_WIDE = (pa.types.is_large_string, pa.types.is_large_binary)
_NARROW = (pa.types.is_string, pa.types.is_binary)


def _one_array(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    kind = arr.type
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        return arr.cast(pa.large_binary())
    if not any(test(kind) for test in (*_WIDE, *_NARROW)):
        raise TypeError(f"expected a string or binary array, got {kind}")
    return arr


def value_buffers(
    arr: pa.Array | pa.ChunkedArray, relative: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a string or binary array, as numpy, without copying the bytes.

    `offsets`: int64, `len(arr) + 1` of them; `data`: uint8; element i is
    `data[offsets[i] : offsets[i + 1]]`. Absolute offsets into the whole data buffer by
    default; with `relative=True` they start at 0 and `data` holds exactly the array's bytes.
    See the module docstring for the types taken and the edge cases.
    """
    arr = _one_array(arr)
    n = len(arr)
    buffers = arr.buffers()
    if n == 0 or buffers[1] is None:
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    wide = any(test(arr.type) for test in _WIDE)
    width = 8 if wide else 4
    offsets = np.frombuffer(
        buffers[1], dtype=np.int64 if wide else np.int32, count=n + 1, offset=arr.offset * width
    ).astype(np.int64)
    data = buffers[2]
    values = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    if not relative:
        return offsets, values
    lo, hi = int(offsets[0]), int(offsets[-1])
    return offsets - lo, values[lo:hi]


def as_binary(arr: pa.Array) -> pa.Array:
    """`arr` as a binary or large_binary array; string arrays become zero-copy views."""
    kind = arr.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return arr
    if pa.types.is_string(kind):
        return arr.view(pa.binary())
    if pa.types.is_large_string(kind):
        return arr.view(pa.large_binary())
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        return arr.cast(pa.large_binary())
    raise TypeError(f"expected a string or binary array, got {kind}")


def binary_array(kind: pa.DataType, offsets: np.ndarray, data: Any) -> pa.Array:
    """A binary or large_binary (`kind`) array over `data` (a buffer or uint8 array) cut at
    `offsets` (absolute, as `value_buffers` gives them): the inverse of `value_buffers`."""
    wide = pa.types.is_large_binary(kind)
    cuts = pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int64 if wide else np.int32))
    return pa.Array.from_buffers(kind, len(offsets) - 1, [None, cuts, pa.py_buffer(data)])
