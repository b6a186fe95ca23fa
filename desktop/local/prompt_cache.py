"""Evaluated prompt states kept for reuse (in the worker process, per loaded model).

* ``PromptStateCache`` (memory): after a reply, the live context's KV cells of sequence 0
  (``llama_state_seq_get_data``: the KV only; llama-cpp-python's ``save_state`` copies the
  same KV through Python objects and takes ~6x as long) are kept, keyed by their tokens, in an
  LRU bounded by bytes. A request whose prompt shares a longer prefix with a kept state than
  with the live context restores that state first (``llama_state_seq_set_data``), so returning
  to a conversation after visiting another evaluates only the new tokens.
* ``SavedStates`` (disk): the evaluated system prompt of a long system prompt (>=
  ``SAVE_MIN_TOKENS``), saved once under the user cache folder, keyed by everything that makes
  it valid (model file identity, n_ctx, KV type, flash attention, llama.cpp build, the exact
  tokens), size-bounded (oldest out first), with the agent it belongs to so it is deleted with
  the agent. A mismatched, truncated or corrupt file is ignored and removed with a log line.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import struct
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("simi.local.cache")

PREF_PROMPT_CACHE_MB = "prompt_cache_mb"  # memory budget per loaded model (0: off)
PREF_SAVED_STATES_MB = "saved_prompt_states_mb"  # disk budget for saved system prompts (0: off)
DEFAULT_PROMPT_CACHE_MB = 1024
DEFAULT_SAVED_STATES_MB = 2048
MEMORY_MIN_TOKENS = 256  # shorter contexts re-evaluate faster than they are worth keeping
RESTORE_GAIN_TOKENS = 64  # restore only when it saves at least this many tokens of prefill
SAVE_MIN_TOKENS = 512  # a system prompt at least this long is saved to disk


@dataclass(frozen=True, slots=True)
class CacheSizes:
    memory_bytes: int  # every worker's prompt-state cache together
    memory_states: int
    saved_bytes: int  # the saved system-prompt states on disk
    saved_files: int


# KV state of sequence 0 ------------------------------------------------------------------------
# A state's bytes: a numpy array from ``capture``, ``bytes`` from a saved file.
State = Any


def state_size(llm: Any) -> int:
    """The bytes ``capture`` would take now (llama.cpp sizes it without copying anything)."""
    import llama_cpp

    return int(llama_cpp.llama_state_seq_get_size(llm._ctx.ctx, 0))


def capture(llm: Any, size: int | None = None) -> State:
    """The KV cells of sequence 0 (what ``restore`` puts back), without logits.

    Written by llama.cpp straight into memory nobody touched before: a zero-filled buffer
    copied into ``bytes`` touched it three times (for 1,700 tokens of the starter, 38 MB:
    23 ms to zero, 8 to fill, 30 to copy; now the 8 and the first touch)."""
    import llama_cpp
    import numpy as np

    size = state_size(llm) if size is None else size
    buf = np.empty(size, dtype=np.uint8)  # not zeroed: llama.cpp writes every byte it counts
    written = int(llama_cpp.llama_state_seq_get_data(llm._ctx.ctx, _pointer(buf), size, 0))
    return buf[:written]


def restore(llm: Any, tokens: Sequence[int], data: State) -> bool:
    """Replace the live context by ``data`` (the state of ``tokens``). False, with the context
    emptied, when llama.cpp refuses it (another model's or a damaged state)."""
    import llama_cpp
    import numpy as np

    llm._ctx.kv_cache_clear()
    llm.n_tokens = 0
    src = np.frombuffer(data, dtype=np.uint8)  # read in place, not copied first
    read = int(llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, _pointer(src), len(src), 0))
    if read == 0:
        llm._ctx.kv_cache_clear()
        return False
    n = len(tokens)
    llm.input_ids[:n] = tokens
    llm.n_tokens = n
    return True


def _pointer(buf: Any) -> Any:
    return buf.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


# memory ------------------------------------------------------------------------------------------
class PromptStateCache:
    """Evaluated contexts of one loaded model, newest last, at most ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._states: OrderedDict[tuple[int, ...], State] = OrderedDict()

    @property
    def size(self) -> int:
        return sum(len(d) for d in self._states.values())

    def __len__(self) -> int:
        return len(self._states)

    def clear(self) -> None:
        self._states.clear()

    def keep(self, llm: Any) -> None:
        """Keep the live context (after a reply). An earlier state of the same conversation
        (its tokens a prefix of these) is replaced; the oldest go when over budget."""
        n = int(llm.n_tokens)
        if self.budget <= 0 or n < MEMORY_MIN_TOKENS:
            return
        tokens = tuple(int(t) for t in llm.input_ids[:n])
        for old in [k for k in self._states if tokens[: len(k)] == k]:
            del self._states[old]
        size = state_size(llm)
        if size > self.budget:
            return  # never fits: not copied at all
        data = capture(llm, size)
        self._states[tokens] = data
        while self.size > self.budget:
            self._states.popitem(last=False)

    def best(self, tokens: Sequence[int]) -> tuple[int, tuple[int, ...] | None]:
        """The kept state sharing the longest prefix with ``tokens``: (prefix, its key)."""
        best_n, best_key = 0, None
        for key in self._states:
            n = common_prefix(key, tokens)
            if n > best_n:
                best_n, best_key = n, key
        return best_n, best_key

    def take(self, key: tuple[int, ...], llm: Any) -> bool:
        """Restore the state of ``key`` into ``llm`` (it becomes the newest)."""
        data = self._states.get(key)
        if data is None:
            return False
        self._states.move_to_end(key)
        if restore(llm, key, data):
            return True
        del self._states[key]
        return False


# disk --------------------------------------------------------------------------------------------
MAGIC = b"SIMIKV1\n"


def state_key(parts: dict[str, Any], tokens: Sequence[int]) -> str:
    """A file name from everything that makes a saved state valid."""
    blob = json.dumps(parts, sort_keys=True).encode() + array("i", tokens).tobytes()
    return hashlib.sha256(blob).hexdigest()[:40]


class SavedStates:
    """System-prompt states in one folder, ``budget`` bytes at most (oldest out first)."""

    def __init__(self, folder: Path, budget: int) -> None:
        self.folder = folder
        self.budget = budget

    def files(self) -> list[Path]:
        try:
            return sorted(self.folder.glob("*.kv"))
        except OSError:
            return []

    @property
    def size(self) -> int:
        total = 0
        for f in self.files():
            with contextlib.suppress(OSError):
                total += f.stat().st_size
        return total

    def clear(self) -> int:
        removed = 0
        for f in self.files():
            with contextlib.suppress(OSError):
                f.unlink()
                removed += 1
        return removed

    def path_for(self, parts: dict[str, Any], tokens: Sequence[int]) -> Path:
        return self.folder / f"{state_key(parts, tokens)}.kv"

    def load(self, parts: dict[str, Any], tokens: Sequence[int], llm: Any) -> bool:
        """Restore the saved state of ``tokens`` into ``llm``; a file that does not match or
        does not restore is removed (logged), never raised."""
        path = self.path_for(parts, tokens)
        if not path.exists():
            return False
        try:
            header, saved_tokens, data = _read(path)
            if header.get("parts") != parts or list(saved_tokens) != list(tokens):
                raise ValueError("it was saved for another model, setting or prompt")
            if not restore(llm, saved_tokens, data):
                raise ValueError("llama.cpp refused the state")
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            log.warning("removed the saved prompt state %s: %s", path.name, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            return False
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last to go
        return True

    def save(
        self, parts: dict[str, Any], tokens: Sequence[int], llm: Any, owner: str | None
    ) -> None:
        """Save the live context (exactly ``tokens``) atomically; keep within the budget."""
        if self.budget <= 0:
            return
        size = state_size(llm)
        if size > self.budget:
            return
        data = capture(llm, size)
        header = json.dumps(
            {"parts": parts, "owner": owner, "n_tokens": len(tokens), "state_bytes": len(data)}
        ).encode()
        if len(data) + len(header) > self.budget:
            return
        path = self.path_for(parts, tokens)
        tmp = path.with_suffix(".tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(MAGIC + struct.pack("<I", len(header)) + header)
                f.write(array("i", tokens).tobytes())
                f.write(data)
            os.replace(tmp, path)
        except OSError as exc:  # a full disk costs the cache, never the reply
            log.warning("could not save the prompt state: %s", exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        self._trim(keep=path)

    def _trim(self, keep: Path) -> None:
        files = []
        for f in self.files():
            with contextlib.suppress(OSError):
                st = f.stat()
                files.append((st.st_mtime, st.st_size, f))
        total = sum(s for _, s, _ in files)
        for _, size, f in sorted(files):
            if total <= self.budget:
                break
            if f == keep:
                continue
            with contextlib.suppress(OSError):
                f.unlink()
                total -= size

    def forget(self, owner: str) -> int:
        """Delete the states saved for ``owner`` (an agent id)."""
        removed = 0
        for f in self.files():
            try:
                header = _read_header(f)
            except (OSError, ValueError, json.JSONDecodeError):
                header = {}
            if header.get("owner") == owner:
                with contextlib.suppress(OSError):
                    f.unlink()
                    removed += 1
        return removed


def _read_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        return _header_from(f)


def _header_from(f: Any) -> dict[str, Any]:
    if f.read(len(MAGIC)) != MAGIC:
        raise ValueError("not a saved prompt state")
    (length,) = struct.unpack("<I", f.read(4))
    if length > 1 << 20:
        raise ValueError("damaged header")
    header = json.loads(f.read(length))
    if not isinstance(header, dict):
        raise ValueError("damaged header")
    return header


def _read(path: Path) -> tuple[dict[str, Any], list[int], bytes]:
    with open(path, "rb") as f:
        header = _header_from(f)
        n = int(header["n_tokens"])
        raw = f.read(4 * n)
        if len(raw) != 4 * n:
            raise ValueError("truncated")
        tokens = array("i")
        tokens.frombytes(raw)
        data = f.read()
    if len(data) != int(header["state_bytes"]):
        raise ValueError("truncated")
    return header, list(tokens), data
