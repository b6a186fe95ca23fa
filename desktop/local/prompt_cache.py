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

from dataclasses import dataclass

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
