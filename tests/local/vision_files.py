"""GGUF files for the vision tests, written from scratch: a fake projector (a header and a
few bytes: only its header is read) and a synthetic one that libmtmd really loads and runs.

``synthetic_projector`` is a LLaVA-1.5-style ("mlp") CLIP projector with one small layer of
generated weights, 576 wide on its output: the width of the starter model (SmolLM2-135M, the
text model of SmolVLM-256M). With it the starter "sees" an image through the real path
(llama-cpp-python's handler, libmtmd's encoder, the image's embeddings decoded by llama.cpp);
what it says about the image is noise, as the weights are. The writer follows the GGUF spec
(llama.cpp ``docs/gguf.md``) and shares no code with ``desktop.local.gguf``."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

ALIGN = 32
_UINT32, _FLOAT32, _BOOL, _STRING, _ARRAY = 4, 6, 7, 8, 9
_F32, _F16 = 0, 1  # ggml types


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(value: Any) -> bytes:
    if isinstance(value, bool):
        return struct.pack("<I?", _BOOL, value)
    if isinstance(value, int):
        return struct.pack("<II", _UINT32, value)
    if isinstance(value, float):
        return struct.pack("<If", _FLOAT32, value)
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        items = struct.pack(f"<{len(value)}f", *value)
        return struct.pack("<IIQ", _ARRAY, _FLOAT32, len(value)) + items
    raise TypeError(value)


def write_gguf(
    path: Path, metadata: dict[str, Any], tensors: dict[str, np.ndarray] | None = None
) -> Path:
    """A GGUF v3 file. ``tensors``: name -> array in ggml's order (the first dimension is the
    innermost), float32 or float16; none given: one 8-float tensor of made-up weights."""
    if tensors is None:
        tensors = {"v.weight": np.arange(0.5, 8.5, dtype=np.float32)}
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    head += b"".join(_string(k) + _value(v) for k, v in metadata.items())
    data = b""
    for name, array in tensors.items():
        dims = array.shape[::-1]  # numpy's last axis is ggml's first
        kind = _F16 if array.dtype == np.float16 else _F32
        head += _string(name) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, len(data))
        raw = array.tobytes()
        data += raw + b"\x00" * (-len(raw) % ALIGN)
    head += b"\x00" * (-len(head) % ALIGN)
    path.write_bytes(head + data)
    return path


def fake_projector(path: Path, projection_dim: int | None = 576) -> Path:
    """A vision projector's header (clip), for a model 576 wide (the starter, SmolLM2-135M,
    as SmolVLM-256M's projector is). llama.cpp cannot run it."""
    meta: dict[str, Any] = {
        "general.architecture": "clip",
        "general.name": "fake projector",
        "clip.has_vision_encoder": True,
        "clip.projector_type": "idefics3",
    }
    if projection_dim is not None:
        meta["clip.vision.projection_dim"] = projection_dim
    return write_gguf(path, meta)


def synthetic_projector(
    path: Path, width: int = 576, *, hidden: int = 64, blocks: int = 1, image: int = 64
) -> Path:
    """A projector libmtmd loads and runs (see the module's docstring): by default 64x64
    images in 16-pixel patches, so an image is 16 tokens of ``width``; ``hidden``, ``blocks``
    and ``image`` make its encoder bigger."""
    ff, patch = 2 * hidden, 16
    patches = (image // patch) ** 2
    rng = np.random.default_rng(7)

    def weights(*shape: int) -> np.ndarray:  # numpy order: (out, in)
        return (rng.standard_normal(shape) * 0.02).astype(np.float16)

    def vector(n: int, value: float) -> np.ndarray:
        return np.full(n, value, dtype=np.float32)

    meta: dict[str, Any] = {
        "general.architecture": "clip",
        "general.name": "synthetic LLaVA-1.5 projector",
        "clip.has_vision_encoder": True,
        "clip.has_text_encoder": False,
        "clip.projector_type": "mlp",
        "clip.use_gelu": True,
        "clip.vision.image_size": image,
        "clip.vision.patch_size": patch,
        "clip.vision.embedding_length": hidden,
        "clip.vision.feed_forward_length": ff,
        "clip.vision.projection_dim": width,
        "clip.vision.block_count": blocks,
        "clip.vision.attention.head_count": 2,
        "clip.vision.attention.layer_norm_epsilon": 1e-6,
        "clip.vision.image_mean": [0.5, 0.5, 0.5],
        "clip.vision.image_std": [0.5, 0.5, 0.5],
    }
    t: dict[str, np.ndarray] = {
        "v.class_embd": vector(hidden, 0.01),
        "v.patch_embd.weight": weights(hidden, 3, patch, patch),
        "v.position_embd.weight": (rng.standard_normal((patches + 1, hidden)) * 0.02).astype(
            np.float32
        ),
        "v.pre_ln.weight": vector(hidden, 1.0),
        "v.pre_ln.bias": vector(hidden, 0.0),
    }
    shapes = {
        "attn_q": (hidden, hidden),
        "attn_k": (hidden, hidden),
        "attn_v": (hidden, hidden),
        "attn_out": (hidden, hidden),
        "ffn_up": (ff, hidden),
        "ffn_down": (hidden, ff),
    }
    for block in range(blocks):
        for name, (out, inp) in shapes.items():
            t[f"v.blk.{block}.{name}.weight"] = weights(out, inp)
            t[f"v.blk.{block}.{name}.bias"] = vector(out, 0.001)
        for norm in ("ln1", "ln2"):
            t[f"v.blk.{block}.{norm}.weight"] = vector(hidden, 1.0)
            t[f"v.blk.{block}.{norm}.bias"] = vector(hidden, 0.0)
    t["mm.0.weight"] = weights(width, hidden)
    t["mm.0.bias"] = vector(width, 0.0)
    t["mm.2.weight"] = weights(width, width)
    t["mm.2.bias"] = vector(width, 0.0)
    return write_gguf(path, meta, t)
