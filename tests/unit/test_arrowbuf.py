"""`value_buffers`: the offsets and bytes of string and binary Arrow arrays, without a copy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from corpusclean.pipelines.arrowbuf import as_binary, binary_array, value_buffers

KINDS = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]
VALUES = ["alpha", "", "ünï", "x" * 70, "b"]


def _elements(offsets: np.ndarray, data: np.ndarray) -> list[bytes]:
    return [data[offsets[i] : offsets[i + 1]].tobytes() for i in range(len(offsets) - 1)]


def _array(kind: pa.DataType, values: list[str | None]) -> pa.Array:
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pa.array([None if v is None else v.encode() for v in values], kind)
    return pa.array(values, kind)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_offsets_and_bytes_of_every_kind(kind: pa.DataType) -> None:
    arr = _array(kind, VALUES)
    offsets, data = value_buffers(arr)
    assert offsets.dtype == np.int64 and data.dtype == np.uint8 and len(offsets) == len(arr) + 1
    assert _elements(offsets, data) == [v.encode() for v in VALUES]
    # no copy: the view is over the array's own data buffer
    assert data.ctypes.data == arr.buffers()[2].address


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_slice_gives_absolute_or_relative_offsets(kind: pa.DataType) -> None:
    arr = _array(kind, VALUES).slice(2, 2)
    offsets, data = value_buffers(arr)
    assert offsets[0] == len(b"alpha") and len(data) == sum(len(v.encode()) for v in VALUES)
    assert _elements(offsets, data) == [v.encode() for v in VALUES[2:4]]
    rel, exact = value_buffers(arr, relative=True)
    assert rel[0] == 0 and rel[-1] == len(exact)
    assert exact.tobytes() == b"".join(v.encode() for v in VALUES[2:4])
    assert _elements(rel, exact) == _elements(offsets, data)


def test_chunked_arrays_are_combined() -> None:
    chunked = pa.chunked_array([pa.array(["a", "bc"]), pa.array(["", "def"])])
    offsets, data = value_buffers(chunked)
    assert _elements(offsets, data) == [b"a", b"bc", b"", b"def"]
    one = pa.chunked_array([pa.array(["x", "yz"]).slice(1)])
    assert _elements(*value_buffers(one)) == [b"yz"]
    assert _elements(*value_buffers(pa.chunked_array([], pa.string()))) == []


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_empty_arrays_and_absent_data_buffers(kind: pa.DataType) -> None:
    for arr in (pa.array([], kind), _array(kind, VALUES).slice(5), _array(kind, ["a"]).slice(1)):
        offsets, data = value_buffers(arr)
        assert offsets.tolist() == [0] and data.size == 0
        assert value_buffers(arr, relative=True)[0].tolist() == [0]
    # only empty strings and nulls: a data buffer of no bytes, or none at all (Arrow's
    # validation refuses to build that, but arrays from other producers may come so)
    assert _elements(*value_buffers(_array(kind, [None, "", None]))) == [b"", b"", b""]
    real = _array(kind, ["", ""])

    class NoData:
        type, offset = real.type, 0

        def __len__(self) -> int:
            return 2

        def buffers(self) -> list[pa.Buffer | None]:
            return [None, real.buffers()[1], None]

    offsets, data = value_buffers(NoData())  # type: ignore[arg-type]
    assert offsets.tolist() == [0, 0, 0] and data.size == 0


def test_view_types_and_other_types() -> None:
    views = pa.array(["a", "long enough to be out of line", ""], pa.string_view())
    assert _elements(*value_buffers(views)) == [b"a", b"long enough to be out of line", b""]
    with pytest.raises(TypeError, match="string or binary"):
        value_buffers(pa.array([1, 2]))


def test_binary_array_inverts_value_buffers() -> None:
    arr = pa.array(["ab", "c", "", "def"]).slice(1)
    offsets, data = value_buffers(arr)
    rebuilt = binary_array(pa.binary(), offsets, data)
    assert rebuilt.to_pylist() == [b"c", b"", b"def"]
    assert binary_array(pa.large_binary(), offsets[::3], data).to_pylist() == [b"cdef"]
    assert as_binary(arr).type == pa.binary()
    assert as_binary(pa.array(["x"], pa.large_string())).type == pa.large_binary()
