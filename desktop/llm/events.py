"""The one stream-event vocabulary every provider speaks.

A provider's ``stream()`` yields zero or more deltas (and optional Usage/Timing/RunInfo),
then exactly one ``Finished`` last. Failures are raised as typed errors (``desktop.llm.errors``),
never streamed as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error", "tool_calls"]
TokenSource = Literal["reported", "counted"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Reply text; ``tokens``: how many model tokens it carries (a local worker batches the
    tokens of ~25 ms into one delta, so a rate counts these, not deltas)."""

    text: str
    tokens: int = 1


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for one call; ``source``: reported by the backend, or counted by us.

    ``cost_usd``: what the backend itself says the call cost (OpenRouter's ``usage.cost``);
    ``None`` when it says nothing. Never estimated here.
    """

    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    source: TokenSource = "reported"
    cost_usd: float | None = None
    # Where a local call's cached tokens came from: the KV cache it found ("context"), the
    # worker's prompt-state cache ("memory", another conversation's state restored), or a
    # system-prompt state saved on disk ("saved"). None: not local, or nothing cached.
    cache_source: Literal["context", "memory", "saved"] | None = None
    # Of ``prompt_tokens``, those the images took, where the backend says (Gemini's counts by
    # modality); None: not reported (the stats row then holds an estimate, marked so).
    image_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Timing:
    """Times measured during the call: by the backend (llama.cpp perf counters, a server's
    ``timings``: ``reported_by`` says which) and by our own client (connect, headers, worker
    start). Several Timing events of one call merge: a later None keeps the earlier value.

    ``decode_tokens``: how many evaluations ``decode_ms`` covers (llama.cpp's ``n_eval``, the
    server's ``predicted_n``); the decode speed is that count over that time.
    ``connect_ms`` is TCP + TLS, of which ``tls_ms`` the handshake; ``reused``: the request
    went over a kept-alive connection. ``worker_start_ms``: a local call that had to start
    the worker process first.
    """

    prefill_ms: float | None = None
    decode_ms: float | None = None
    prompt_eval_tokens: int | None = None
    decode_tokens: int | None = None
    load_ms: float | None = None
    connect_ms: float | None = None
    headers_ms: float | None = None
    tls_ms: float | None = None
    reused: bool | None = None
    worker_start_ms: float | None = None
    reported_by: Literal["llama.cpp", "server"] | None = None
    cache_restore_ms: float | None = None  # restoring a memory-cached or saved prompt state
    image_encode_ms: float | None = None  # local: the projector encoding the images


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What actually ran: reported model, backend, context window and (local) load parameters.

    Not in the original event list of ARCHITECTURE.md: without it the stats row could not say
    which backend or n_ctx served the call, and provider data must not leak out any other way.
    """

    model_reported: str | None = None
    backend: str | None = None
    context_window: int | None = None
    load_params: dict[str, object] = field(default_factory=dict)
    model_file_size: int | None = None
    quantization: str | None = None
    kv_cache_bytes: int | None = None  # local: the KV cache llama.cpp allocated
    # local, as llama.cpp reported the load: the device holding the layers ("CPU", "Vulkan0 ·
    # llvmpipe (software)"), the layers offloaded of all ("0/31"), GPU memory in bytes
    device: str | None = None
    offloaded_layers: str | None = None
    vram_bytes: int | None = None
    # Something the person should know about how the call ran, in finished words: a model
    # loaded with fewer GPU layers than asked (out of GPU memory), a model file without a chat
    # template (ChatML used instead). None when there is nothing to say.
    notice: str | None = None


@dataclass(frozen=True, slots=True)
class Queued:
    """The request waits for a shared backend (one local model answers one chat at a time):
    ``waiting=True`` when the wait begins, with the reason in words; ``False`` when it ends."""

    waiting: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PrefillProgress:
    """Prompt evaluation under way (a long prompt takes a while before the first token):
    ``evaluated`` of ``total`` prompt tokens are done. Only backends that can tell send it."""

    evaluated: int
    total: int


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks for a tool: one whole call, after any text of the same reply. ``id``
    pairs it with its result (the provider's own id, or one made up when it has none);
    ``arguments`` is the model's raw JSON text, complete but not validated (a later step
    returns malformed arguments to the model as an error). A reply that asked for tools ends
    with ``Finished("tool_calls")``."""

    id: str
    name: str
    arguments: str
    # An opaque token the provider wants back with this call in the next request (Gemini's
    # ``thoughtSignature``; Gemini 3 refuses a history whose calls lack it). None: none sent.
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    reason: FinishReason


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | Usage
    | Timing
    | RunInfo
    | Queued
    | PrefillProgress
    | ToolCall
    | Finished
)
