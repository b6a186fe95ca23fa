"""A model file made from another's header: the same metadata, tokenizer, chat template and
tensor shapes and types, with generated weights (scripts/gpu-proof, issue 26 item 5).

    python bench/gguf_synth.py head MODEL.gguf HEAD.gguf    # the header alone (the starter: 1.8 MB)
    python bench/gguf_synth.py fill HEAD.gguf OUT.gguf      # HEAD + generated tensor data

The GPU machine takes at most 64 MiB of files per command; the starter (93 MB) does not fit
beside llama.cpp's source, its header does. llama.cpp's speed does not depend on the weights'
values, so the generated file decodes as fast as the starter; its text is noise. The rows of
the end-of-generation tokens (the ``tokenizer.ggml.*_token_id`` ids and the first 32 ids,
where SmolLM2 and most models keep their special tokens) are zero in the output matrix, so
their logit is 0 while thousands of others are positive: a reply never stops before its
``max_tokens``, and every run decodes the same number of tokens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from desktop.local.gguf import GGML_TYPES, GGUFHeader, TensorInfo, read_header, read_header_from

SPECIAL_ROWS = 32  # the first token ids, zeroed in the output matrix besides the named ones
_HALF = np.dtype("<f2")


def write_head(model: Path, dest: Path) -> int:
    """The bytes of ``model`` before its tensor data; returns their count."""
    header = read_header(model)
    with model.open("rb") as fh:
        dest.write_bytes(fh.read(header.data_offset))
    return header.data_offset


def read_head(head: Path) -> GGUFHeader:
    size = head.stat().st_size
    with head.open("rb") as fh:
        # the claimed size only bounds the header's reads; the tensor data is not there yet
        return read_header_from(fh, size + (1 << 40))


def _blocks(rng: np.random.Generator, count: int, scale: float, offset: float | None) -> bytes:
    """``count`` Q8_0 (offset None: d + 32 int8) or Q4_0/Q4_1 blocks with fixed scales."""
    if offset is None:  # Q8_0
        out = np.empty((count, 34), np.uint8)
        out[:, 2:] = rng.integers(0, 256, (count, 32), dtype=np.uint8)
        out[:, 0:2] = np.frombuffer(np.array(scale, _HALF).tobytes(), np.uint8)
        return out.tobytes()
    width = 20 if offset else 18  # Q4_1 (d, m, 16 bytes) or Q4_0 (d, 16 bytes)
    out = np.empty((count, width), np.uint8)
    out[:, width - 16 :] = rng.integers(0, 256, (count, 16), dtype=np.uint8)
    out[:, 0:2] = np.frombuffer(np.array(scale, _HALF).tobytes(), np.uint8)
    if offset:
        out[:, 2:4] = np.frombuffer(np.array(offset, _HALF).tobytes(), np.uint8)
    return out.tobytes()


def tensor_data(t: TensorInfo, rng: np.random.Generator, zero_rows: set[int]) -> bytes:
    """Generated weights for ``t``: norms 1, matrices small random values (|w| < 0.07)."""
    name = GGML_TYPES[t.ggml_type][0]
    n = t.n_elements
    if name == "F32":
        values = np.ones(n, "<f4") if len(t.shape) == 1 else rng.normal(0, 0.02, n).astype("<f4")
        return values.tobytes()
    if name == "F16":
        values = np.ones(n, _HALF) if len(t.shape) == 1 else rng.normal(0, 0.02, n).astype(_HALF)
        return values.tobytes()
    block = GGML_TYPES[t.ggml_type][1]
    params = {"Q8_0": (0.0005, None), "Q4_1": (0.004, -0.03), "Q4_0": (0.004, 0.0)}
    if name not in params:
        raise ValueError(f"cannot generate {name} data ({t.name}); only F32/F16/Q4_0/Q4_1/Q8_0")
    data = bytearray(_blocks(rng, n // block, *params[name]))
    if zero_rows and len(t.shape) == 2:
        row_bytes = t.shape[0] // block * GGML_TYPES[t.ggml_type][2]
        for row in zero_rows:
            if row < t.shape[1]:
                data[row * row_bytes : (row + 1) * row_bytes] = bytes(row_bytes)
    return bytes(data)


def _end_rows(header: GGUFHeader) -> set[int]:
    ids = {
        value
        for key, value in header.metadata.items()
        if key.startswith("tokenizer.ggml.")
        and key.endswith("_token_id")
        and isinstance(value, int)
    }
    return ids | set(range(SPECIAL_ROWS))


def fill(head: Path, dest: Path, seed: int = 26) -> int:
    """``dest``: ``head`` and generated tensor data; returns the file's size."""
    header = read_head(head)
    names = {t.name for t in header.tensors}
    output = "output.weight" if "output.weight" in names else "token_embd.weight"  # tied
    rng = np.random.default_rng(seed)
    rows = _end_rows(header)
    with dest.open("wb") as out:
        out.write(head.read_bytes()[: header.data_offset])
        for t in sorted(header.tensors, key=lambda t: t.offset):
            at = header.data_offset + t.offset
            if out.tell() < at:
                out.write(bytes(at - out.tell()))
            out.write(tensor_data(t, rng, rows if t.name == output else set()))
        size = out.tell()
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    for what in ("head", "fill"):
        p = sub.add_parser(what)
        p.add_argument("src", type=Path)
        p.add_argument("dest", type=Path)
    args = parser.parse_args()
    make = write_head if args.what == "head" else fill
    size = make(args.src, args.dest)
    print(f"{args.dest}: {size:,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
