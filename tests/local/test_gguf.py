"""Our GGUF header reader against the real starter file and the real llama.cpp build."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import llama_cpp
import pytest

from desktop.local.catalog import read_model_info
from desktop.local.gguf import FILE_TYPES, GGML_TYPES, ArraySummary, GGUFError, read_header
from tests.helpers import gguf_files


def test_starter_header_matches_what_llama_cpp_reads() -> None:
    path = gguf_files.starter()
    header = read_header(path)
    llm = llama_cpp.Llama(str(path), n_ctx=256, verbose=False, vocab_only=True)
    try:
        meta = llm.metadata  # llama.cpp's own view of the same keys, as strings
        assert header.architecture == meta["general.architecture"] == "llama"
        for key in ("llama.block_count", "llama.context_length", "llama.embedding_length"):
            assert str(header.metadata[key]) == meta[key]
        assert header.metadata["tokenizer.chat_template"] == meta["tokenizer.chat_template"]
        assert header.metadata["tokenizer.ggml.tokens"] == ArraySummary(8, llm.n_vocab())
    finally:
        llm.close()
    # Tensor data ends exactly at the end of the file: offsets and sizes are read right.
    assert max(header.data_offset + t.offset + t.n_bytes for t in header.tensors) == (
        path.stat().st_size
    )


def test_model_info_of_the_starter() -> None:
    info = read_model_info(gguf_files.starter())
    assert (info.architecture, info.quantization, info.block_count) == ("llama", "Q4_1", 30)
    assert (info.head_count, info.head_count_kv, info.embedding_length) == (9, 3, 576)
    assert info.context_length == 8192 and info.chat_template_present
    assert 130e6 < info.parameter_count < 140e6  # "135M"
    assert info.parameters_label == "134.5M"


def test_block_sizes_match_the_installed_ggml() -> None:
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_type_size.restype = ctypes.c_size_t
    lib.ggml_blck_size.restype = ctypes.c_int64
    lib.ggml_type_name.restype = ctypes.c_char_p
    for type_id, (name, block, size) in GGML_TYPES.items():
        got = (lib.ggml_type_name(type_id).decode().upper(), lib.ggml_blck_size(type_id))
        assert got == (name, block), type_id
        assert lib.ggml_type_size(type_id) == size, name


def test_file_type_names_match_llama_h() -> None:
    for ftype, name in FILE_TYPES.items():
        const = "LLAMA_FTYPE_ALL_F32" if name == "F32" else f"LLAMA_FTYPE_MOSTLY_{name}"
        if hasattr(llama_cpp, const):
            assert getattr(llama_cpp, const) == ftype, name


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (b"GGUF" + struct.pack("<I", 1), "version 1 is not supported"),
        (b"FUGG" + b"\x00" * 64, "big-endian"),
        (
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + b"\x63\0\0\0",
            "unknown value type 99",
        ),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 1)
            + struct.pack("<Q", 1)
            + b"k"
            + struct.pack("<IIQ", 9, 4, 2**40),
            "array items",
        ),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 1, 0)
            + struct.pack("<Q", 1)
            + b"t"
            + struct.pack("<I", 9),
            "claims 9 dimensions",
        ),
    ],
)
def test_malformed_headers_raise_clear_errors(tmp_path: Path, payload: bytes, words: str) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(payload + b"\x00" * 64)
    with pytest.raises(GGUFError, match=words):
        read_header(path)
