"""A small, defensive reader for GGUF headers (v2 and v3), so the app can describe a model file
without loading its weights and without the ``gguf`` package.

Layout (llama.cpp ``docs/gguf.md``; little-endian throughout)::

    magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
    kv_count x  (string key, u32 value_type, value)
    tensor_count x (string name, u32 n_dims, n_dims x u64 dim, u32 ggml_type, u64 offset)
    padding to general.alignment (default 32) | tensor data

    string = u64 length + UTF-8 bytes;  array = u32 item_type + u64 count + items

Every count and length is checked against sanity limits and against what is left in the file
before anything is allocated, so a damaged or hostile file gives a ``GGUFError`` that says what
is wrong, never a MemoryError or a hang. Of a file on disk, a few small samples of the tensor
data are read too: data that is all zeros (a header intact over weights that were never
written) would load and produce garbage without a word.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32

# Sanity limits: far above any real model (the largest have a few thousand tensors, a few
# dozen keys, ~260k-entry vocab arrays), far below what would exhaust memory.
MAX_TENSORS = 1_000_000
MAX_KV = 100_000
MAX_STRING_BYTES = 64 * 1024 * 1024  # chat templates are tens of KiB
MAX_ARRAY_ITEMS = 50_000_000
MAX_DIMS = 8  # GGML_MAX_DIMS is 4
MAX_HEADER_BYTES = 2 * 1024**3  # the metadata section itself; weights are never read
KEEP_ARRAY_ITEMS = 1024  # longer arrays (vocab, merges) are skipped, only their length kept
# All-zero tensor data: at most this many reads of this many bytes, spread evenly over the
# tensor data; the first that holds a non-zero byte ends the check (a real model's first).
ZERO_SAMPLES = 16
ZERO_SAMPLE_BYTES = 4096

# GGUF metadata value types.
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = range(10)
UINT64, INT64, FLOAT64 = 10, 11, 12
_SCALAR = {
    UINT8: "<B",
    INT8: "<b",
    UINT16: "<H",
    INT16: "<h",
    UINT32: "<I",
    INT32: "<i",
    FLOAT32: "<f",
    BOOL: "<?",
    UINT64: "<Q",
    INT64: "<q",
    FLOAT64: "<d",
}

# ggml_type id -> (name, elements per block, bytes per block)  (ggml.c type_traits).
# Ids 4, 5, 31-33 and 36-38 are retired types that llama.cpp no longer loads.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

# llama_ftype (llama.h) -> the name people know the file by ("general.file_type").
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}


class GGUFError(ValueError):
    """The file is not a readable GGUF model; the text says what is wrong (no path)."""


@dataclass(frozen=True, slots=True)
class ArraySummary:
    """A long array (vocabulary, merges) that was stepped over: its item type and length."""

    item_type: int
    count: int


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the tensor data

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, (f"type {self.ggml_type}", 1, 0))[0]

    @property
    def n_bytes(self) -> int:
        _name, block, size = GGML_TYPES[self.ggml_type]
        return self.n_elements // block * size


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # where tensor data starts in the file
    file_size: int
    alignment: int = DEFAULT_ALIGNMENT
    warnings: tuple[str, ...] = field(default=())

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def arch_value(self, key: str) -> Any:
        """``{architecture}.{key}``, e.g. ``arch_value("block_count")``."""
        return self.metadata.get(f"{self.architecture}.{key}")


_U64 = struct.Struct("<Q")


class _Reader:
    """Bounded reads from an open file: never past its end, never more than asked."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self.fh = fh
        self.size = size
        self.pos = 0
        # Buffer the header in chunks: millions of tiny reads are what makes readers slow.
        self._buf = b""
        self._buf_start = 0

    def _fill(self, n: int) -> bytes:
        if self.pos + n > self.size:
            raise GGUFError(
                f"the header is truncated (needs {self.pos + n:,} bytes, the file has "
                f"{self.size:,})"
            )
        if self.pos + n > MAX_HEADER_BYTES:
            raise GGUFError("the metadata section is implausibly large (over 2 GiB)")
        end = self._buf_start + len(self._buf)
        if self.pos < self._buf_start or self.pos + n > end:
            self.fh.seek(self.pos)
            self._buf = self.fh.read(max(n, 1 << 20))
            self._buf_start = self.pos
            if len(self._buf) < n:
                raise GGUFError("the file ended while reading its header (truncated)")
        i = self.pos - self._buf_start
        self.pos += n
        return self._buf[i : i + n]

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self._fill(struct.calcsize(fmt)))[0]

    def u32(self) -> int:
        return int(self.scalar("<I"))

    def u64(self) -> int:
        return int(self.scalar("<Q"))

    def string(self, what: str) -> str:
        n = self.u64()
        if n > MAX_STRING_BYTES or self.pos + n > self.size:
            raise GGUFError(
                f"{what} claims a length of {n:,} bytes, more than the rest of the file "
                "holds (truncated?)"
            )
        return self._fill(n).decode("utf-8", "replace")

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            raise GGUFError("the header is truncated (an array runs past the end of the file)")
        self.pos += n

    def skip_strings(self, count: int, what: str) -> None:
        """Skip ``count`` length-prefixed strings (a vocabulary) without decoding them, reading
        each length straight from the buffer: through ``u64`` a 49k-token vocabulary cost
        ~250 ms of every model load (bench: tests/local/test_gguf.py has the correctness)."""
        unpack = _U64.unpack_from
        for _ in range(count):
            i = self.pos - self._buf_start
            if i < 0 or i + 8 > len(self._buf):
                self._fill(8)  # bring the length into the buffer (bounds checked there)
                self.pos -= 8
                i = self.pos - self._buf_start
            (n,) = unpack(self._buf, i)
            if n > MAX_STRING_BYTES:
                raise GGUFError(f"an item of {what} claims a length of {n:,} bytes")
            self.pos += 8 + n
            if self.pos > self.size:
                raise GGUFError("the header is truncated (an array runs past the end of the file)")


def _value(r: _Reader, vtype: int, key: str, depth: int = 0) -> Any:
    if vtype in _SCALAR:
        return r.scalar(_SCALAR[vtype])
    if vtype == STRING:
        return r.string(f"the value of {key}")
    if vtype == ARRAY:
        if depth > 2:
            raise GGUFError(f"{key} nests arrays too deeply")
        item_type = r.u32()
        count = r.u64()
        if count > MAX_ARRAY_ITEMS:
            raise GGUFError(
                f"{key} claims {count:,} array items (the limit is {MAX_ARRAY_ITEMS:,})"
            )
        if item_type not in _SCALAR and item_type not in (STRING, ARRAY):
            raise GGUFError(f"{key} has an array of unknown value type {item_type}")
        keep = count <= KEEP_ARRAY_ITEMS
        if item_type in _SCALAR:
            width = struct.calcsize(_SCALAR[item_type])
            if count * width > r.size - r.pos:
                raise GGUFError(
                    f"{key} claims {count:,} items, more than the rest of the file holds "
                    "(truncated?)"
                )
            if not keep:
                r.skip(count * width)
                return ArraySummary(item_type, count)
            fmt = "<" + _SCALAR[item_type][1] * count
            return list(struct.unpack(fmt, r._fill(count * width)))
        if count * 8 > r.size - r.pos:  # each string or array item needs at least 8 bytes
            raise GGUFError(
                f"{key} claims {count:,} items, more than the rest of the file holds (truncated?)"
            )
        if item_type == STRING and not keep:
            r.skip_strings(count, key)
            return ArraySummary(item_type, count)
        items = [_value(r, item_type, key, depth + 1) for _ in range(count)]
        return items if keep else ArraySummary(item_type, count)
    raise GGUFError(f"{key} has an unknown value type {vtype}")


def read_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """Read the metadata and tensor table of a GGUF file; of the tensor data only a few small
    samples (``check_tensor_data_sampled``).

    Raises ``GGUFError`` for anything that is not a well-formed GGUF v2/v3 file whose tensors
    all lie within it and whose tensor data is not all zeros, and ``OSError`` when the file
    cannot be opened.
    """
    p = Path(path)
    with p.open("rb") as fh:
        header = read_header_from(fh, os.fstat(fh.fileno()).st_size)
        check_tensor_data_sampled(fh, header)
        return header


def check_tensor_data_sampled(fh: BinaryIO, header: GGUFHeader) -> None:
    """Refuse tensor data that is all zeros, from at most ``ZERO_SAMPLES`` reads of
    ``ZERO_SAMPLE_BYTES`` spread evenly from its first byte to its last (a real model's first
    read already holds non-zero bytes: one read, well under a millisecond). Weights are never
    all zeros; a file that is (a download preallocated and never filled, a disk fault) would
    load and write garbage."""
    start = header.data_offset
    end = max((start + t.offset + t.n_bytes for t in header.tensors), default=start)
    span = min(end, header.file_size) - start
    if span <= 0:
        return  # no tensors here (the first part of a split model may hold none)
    width = min(ZERO_SAMPLE_BYTES, span)
    count = max(1, min(ZERO_SAMPLES, span // width))
    zeros = bytes(width)
    for i in range(count):
        at = start + (span - width) * i // max(1, count - 1)
        fh.seek(at)
        chunk = fh.read(width)
        if chunk != zeros[: len(chunk)] or not chunk:
            return
    raise GGUFError(
        f"the tensor data is all zeros ({count} samples spread over its {span:,} bytes read "
        "only zero bytes): the weights were never written or have been wiped (the download "
        "may be incomplete or the file damaged)"
    )


def read_header_from(fh: BinaryIO, size: int) -> GGUFHeader:
    """``read_header`` over any seekable binary file-like whose whole length is ``size``
    (the hub's first bytes of a file read by Range requests, with the real size)."""
    if size == 0:
        raise GGUFError("the file is empty (0 bytes)")
    r = _Reader(fh, size)
    if size < 4:
        raise GGUFError(f"the file is empty or truncated (only {size} bytes)")
    magic = r._fill(4)
    if magic != MAGIC:
        if magic[::-1] == MAGIC:
            raise GGUFError("it is a big-endian GGUF file, which this app does not read")
        fh.seek(0)
        hint = " (it looks like a text file)" if _looks_like_text(fh.read(512)) else ""
        raise GGUFError(f"it is not a GGUF file: it does not start with 'GGUF'{hint}")
    version = r.u32()
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(
            f"GGUF version {version} is not supported (this app reads versions 2 and 3)"
        )
    n_tensors = r.u64()
    n_kv = r.u64()
    if n_tensors > MAX_TENSORS:
        raise GGUFError(f"the header claims {n_tensors:,} tensors, which is not plausible")
    if n_kv > MAX_KV:
        raise GGUFError(f"the header claims {n_kv:,} metadata keys, which is not plausible")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string("a metadata key")
        vtype = r.u32()
        metadata[key] = _value(r, vtype, key)
    tensors: list[TensorInfo] = []
    for _ in range(n_tensors):
        name = r.string("a tensor name")
        n_dims = r.u32()
        if n_dims == 0 or n_dims > MAX_DIMS:
            raise GGUFError(f"tensor {name!r} claims {n_dims} dimensions")
        shape = tuple(r.u64() for _ in range(n_dims))
        if any(d == 0 or d > 1 << 40 for d in shape):
            raise GGUFError(f"tensor {name!r} has an implausible shape {list(shape)}")
        ggml_type = r.u32()
        if ggml_type not in GGML_TYPES:
            raise GGUFError(f"tensor {name!r} has unknown data type {ggml_type}")
        offset = r.u64()
        info = TensorInfo(name, shape, ggml_type, offset)
        block = GGML_TYPES[ggml_type][1]
        if shape[0] % block:
            raise GGUFError(
                f"tensor {name!r} has {shape[0]} columns, not a multiple of the "
                f"{info.type_name} block size {block}"
            )
        tensors.append(info)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"general.alignment is {alignment!r}, not a power of two")
    data_offset = -(-r.pos // alignment) * alignment
    header = GGUFHeader(version, metadata, tuple(tensors), data_offset, size, alignment)
    _check_tensor_data(header)
    return header


def _check_tensor_data(header: GGUFHeader) -> None:
    end = header.data_offset
    for t in header.tensors:
        if t.offset % header.alignment:
            raise GGUFError(f"tensor {t.name!r} is not aligned to {header.alignment} bytes")
        end = max(end, header.data_offset + t.offset + t.n_bytes)
    if end > header.file_size:
        missing = end - header.file_size
        raise GGUFError(
            f"the tensor data is truncated: the file is {header.file_size:,} bytes but its "
            f"tensors need {end:,} ({missing:,} bytes missing; the download may be incomplete)"
        )


def _looks_like_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return len(head) >= 16 and all(c.isprintable() or c in "\t\r\n" for c in text)
