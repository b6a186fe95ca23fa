"""The facts beside a reply's timeline, in words: tokens, context, KV cache, speeds, cost.

Every figure says who measured it; a figure the row does not hold says "not reported by
<provider>" (or why it could not be measured), never a guess presented as a fact. Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from desktop.chat.format import cache_text, cost_text, date_text, where_text
from desktop.chat.kinds import find_kind, kind_label
from desktop.chat.pricing import is_hosted_api


@dataclass(frozen=True, slots=True)
class Fact:
    """One line of the facts list: ``label``: ``value``; ``known`` False when the value says
    why the figure is missing; ``description`` explains it in plain words."""

    key: str
    label: str
    value: str
    known: bool = True
    description: str = ""


@dataclass(frozen=True, slots=True)
class TokenSplit:
    """Prompt = cached + newly evaluated; output includes reasoning. None: not reported."""

    prompt: int | None
    cached: int | None
    new: int | None
    output: int | None
    reasoning: int | None


@dataclass(frozen=True, slots=True)
class Gauge:
    """How full the context window was: ``used`` of ``window`` tokens."""

    used: int
    window: int

    @property
    def fraction(self) -> float:
        return max(0.0, min(1.0, self.used / self.window)) if self.window > 0 else 0.0


@dataclass(frozen=True, slots=True)
class CostParts:
    """What the call cost and its parts (USD; None: not known) and where the price came
    from, in words."""

    total: float | None
    input: float | None
    cached: float | None
    output: float | None
    source: str


# words -------------------------------------------------------------------------------------------
def ms_text(ms: float) -> str:
    """ "0.4 ms", "140 ms", "1.25 s", "12.3 s", "2 min 5 s"."""
    if ms < 1:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{round(ms)} ms"
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def bytes_text(size: float) -> str:
    mib = size / (1024 * 1024)
    if mib >= 1024:
        return f"{mib / 1024:.1f} GiB"
    if mib >= 10:
        return f"{round(mib)} MiB"
    return f"{mib:.1f} MiB"


def money(usd: float) -> str:
    """ "$0.0004", and a part too small for four decimals in full ("$0.00002"), never "$0.0000"."""
    if 0 < usd < 0.0001:
        return f"${usd:.8f}".rstrip("0")
    return cost_text(usd)


def num(value: Any) -> str:
    return f"{round(float(value)):,}"


def rate_text(tok_s: float) -> str:
    return f"{tok_s:,.0f} tok/s" if tok_s >= 10 else f"{tok_s:,.1f} tok/s"


def as_float(value: Any) -> float | None:
    """A number from a row (None, or an absurd negative, is None)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def as_int(value: Any) -> int | None:
    number = as_float(value)
    return None if number is None else round(number)


def is_local(row: dict[str, Any]) -> bool:
    return row.get("provider_kind") == "local"


def provider_name(row: dict[str, Any]) -> str:
    """Who served the call, as a person would name it: "llama.cpp", "OpenAI", "OpenRouter",
    or for an OpenAI-compatible server its host ("localhost") or backend."""
    kind = row.get("provider_kind")
    host = str(row.get("endpoint_host") or "")
    if kind == "local":
        return "llama.cpp"
    if "openrouter" in host.lower():
        return "OpenRouter"
    if kind == "openai-compatible" or not kind:
        return host or str(row.get("backend") or "") or "the server"
    return kind_label(str(kind))


def started_text(row: dict[str, Any]) -> str:
    """ "started 11:16:16" in local time, or "" when the row's time cannot be read."""
    try:
        when = datetime.fromisoformat(str(row.get("started_at") or ""))
    except ValueError:
        return ""
    if when.tzinfo is None:
        return ""
    return "started " + date_text(when.astimezone(), "%-d %b %Y, %H:%M:%S")


def _reasoning_possible(row: dict[str, Any]) -> bool:
    found = find_kind(str(row.get("provider_kind") or ""))
    return found is not None and found.capabilities.reasoning


# facts -------------------------------------------------------------------------------------------
def token_split(row: dict[str, Any]) -> TokenSplit:
    prompt, cached = as_int(row.get("prompt_tokens")), as_int(row.get("cached_tokens"))
    new = as_int(row.get("prompt_eval_tokens"))
    if new is None and prompt is not None and cached is not None:
        new = max(prompt - cached, 0)
    if cached is not None and prompt is not None:
        cached = min(cached, prompt)
    return TokenSplit(
        prompt, cached, new, as_int(row.get("output_tokens")), as_int(row.get("reasoning_tokens"))
    )


def context_gauge(row: dict[str, Any]) -> Gauge | None:
    window = as_int(row.get("context_window")) or as_int(row.get("n_ctx"))
    prompt, output = as_int(row.get("prompt_tokens")), as_int(row.get("output_tokens"))
    if not window or prompt is None:
        return None
    return Gauge(prompt + (output or 0), window)


def cost_parts(row: dict[str, Any]) -> CostParts:
    provider = provider_name(row)
    source = row.get("price_source")
    total = as_float(row.get("cost_usd"))
    parts = (
        as_float(row.get("cost_input_usd")),
        as_float(row.get("cost_cached_usd")),
        as_float(row.get("cost_output_usd")),
    )
    if source == "local" or (source is None and is_local(row)):
        return CostParts(0.0, None, None, None, "local model: no cost")
    if total is None:
        host = row.get("endpoint_host")
        if host and not is_hosted_api(f"https://{host}"):
            words = (
                f"no price: {host} is a server of your own (give the agent a price in its "
                "editor to count one)"
            )
            return CostParts(None, None, None, None, words)
        model = row.get("model_reported") or row.get("model_requested") or "this model"
        words = f"unknown price for {model} (give the agent a price in its editor to count one)"
        return CostParts(None, None, None, None, words)
    words = {
        "reported": f"reported by {provider}",
        "agent": "your price for this agent",
        "genai-prices": "price from the genai-prices dataset",
    }.get(str(source), "price source not recorded")
    return CostParts(total, *parts, words)


def _missing(what: str, provider: str) -> str:
    return f"{what}not reported by {provider}"


def _token_facts(row: dict[str, Any], split: TokenSplit, provider: str) -> list[Fact]:
    counted = row.get("token_source") == "counted"
    if split.prompt is None:
        prompt = Fact("prompt", "Prompt tokens", _missing("", provider), known=False)
    elif counted and split.cached is None:
        prompt = Fact(
            "prompt",
            "Prompt tokens",
            f"about {num(split.prompt)} (estimated from the text's length: {provider} did not "
            "report token counts)",
            description="The conversation sent to the model, in tokens: an estimate, because "
            "the server did not say how many it read.",
        )
    else:
        cached = (
            f"{num(split.cached)} cached"
            if split.cached is not None
            else "cached: " + _missing("", provider)
        )
        new = (
            f"{num(split.new)} newly evaluated"
            if split.new is not None
            else "newly evaluated: " + _missing("", provider)
        )
        prompt = Fact(
            "prompt",
            "Prompt tokens",
            f"{num(split.prompt)} = {cached} + {new}",
            description="The conversation sent to the model. Cached tokens were already read in "
            "an earlier call and reused; newly evaluated ones had to be read now (prefill).",
        )
    if split.output is None:
        value = _missing("", provider)
    else:
        value = f"{num(split.output)}"
        if split.reasoning is not None:
            value += f", of which {num(split.reasoning)} reasoning"
        elif _reasoning_possible(row):
            value += f" (reasoning: {_missing('', provider)})"
        if counted:
            value += f" (counted by SIMI Multi: {provider} did not report them)"
    output = Fact(
        "output",
        "Output tokens",
        value,
        known=split.output is not None,
        description="The tokens the model wrote, including any hidden reasoning (thinking).",
    )
    return [prompt, output]


def _image_fact(row: dict[str, Any], provider: str) -> Fact | None:
    """A call that sent images: the prompt tokens they took, reported or estimated."""
    tokens = as_int(row.get("image_tokens"))
    if tokens is None:
        return None
    if row.get("image_tokens_estimated") == 1:
        value = f"about {num(tokens)} (estimated from the images' sizes: {provider} did not say)"
    else:
        value = f"{num(tokens)} (reported by {provider})"
    return Fact(
        "image_tokens",
        "Image tokens",
        value,
        description="Of the prompt tokens, those the attached images took.",
    )


def _retrieval_fact(row: dict[str, Any]) -> Fact | None:
    """A turn whose agent searched its knowledge collections: the passages and their tokens."""
    ms = as_float(row.get("retrieval_ms"))
    if ms is None:
        return None
    chunks = as_int(row.get("retrieval_chunks")) or 0
    tokens = as_int(row.get("retrieval_tokens")) or 0
    value = (
        f"{num(chunks)} passage{'' if chunks == 1 else 's'}, about {num(tokens)} prompt tokens, "
        f"found in {ms_text(ms)}"
        if chunks
        else f"nothing found, in {ms_text(ms)}"
    )
    return Fact(
        "retrieval",
        "Knowledge",
        value,
        description="The passages of the agent's knowledge collections put before the "
        "question (numbered, for the model to cite), and the prompt tokens they added "
        "(estimated: characters / 4).",
    )


def _cache_fact(row: dict[str, Any], split: TokenSplit) -> Fact:
    """A local call: where its cached prompt tokens came from, and restoring them."""
    description = (
        "Prompt tokens llama.cpp did not have to read again, and where their evaluated state "
        "came from: the model's context (this conversation, just before), the memory cache "
        "(a conversation's state kept when you went to another one) or a long system "
        "prompt's state saved on disk (kept across restarts); and how long putting it back "
        "took."
    )
    text = cache_text(row)
    if text:
        return Fact("cache", "Prompt cache", text, True, description)
    if split.prompt is None:
        return Fact("cache", "Prompt cache", _missing("", "llama.cpp"), False, description)
    if not split.cached:
        value = "nothing cached: every prompt token was read for this call"
        return Fact("cache", "Prompt cache", value, True, description)
    value = f"{num(split.cached)} of {num(split.prompt)} prompt tokens cached; where from was "
    value += "not recorded for this call"
    return Fact("cache", "Prompt cache", value, False, description)


def _context_fact(row: dict[str, Any], provider: str) -> Fact:
    gauge = context_gauge(row)
    description = (
        "How much of the model's context window (its working memory, in tokens) "
        "this conversation and reply filled."
    )
    if gauge is None:
        what = "context window: " if row.get("prompt_tokens") is not None else ""
        return Fact("context", "Context", _missing(what, provider), False, description)
    value = f"{num(gauge.used)} of {num(gauge.window)} tokens ({gauge.fraction:.0%})"
    return Fact("context", "Context", value, True, description)


def _kv_fact(row: dict[str, Any], provider: str) -> Fact:
    size = as_int(row.get("kv_cache_bytes"))
    description = (
        "Memory llama.cpp set aside for the KV cache: the model's notes on every token of "
        "the context, so each new token does not re-read the whole conversation."
    )
    if size is None:
        return Fact("kv_cache", "KV cache memory", _missing("", provider), False, description)
    kv_type = row.get("kv_type")
    value = bytes_text(size) + (f" ({kv_type})" if kv_type else "")
    return Fact("kv_cache", "KV cache memory", value, True, description)


def _speed_source(row: dict[str, Any]) -> str:
    timing = row.get("timing_source")
    if timing == "llama.cpp":
        return "measured by llama.cpp"
    if timing == "server":
        return f"reported by the server ({provider_name(row)})"
    return "measured by SIMI Multi"


def _prefill_fact(row: dict[str, Any], provider: str) -> Fact:
    description = (
        "Prefill: how fast the model read the newly evaluated prompt tokens, before it wrote "
        "anything. Prefill tok/s = newly evaluated prompt tokens / prefill time."
    )
    speed = as_float(row.get("prefill_tok_s"))
    if speed is not None and row.get("prefill_source") == "estimated":
        value = (
            f"at least {rate_text(speed)}, estimated from TTFT (the time to first token also "
            "holds the network and any queue)"
        )
        return Fact("prefill_speed", "Prefill speed", value, True, description)
    if speed is not None:
        return Fact(
            "prefill_speed",
            "Prefill speed",
            f"{rate_text(speed)}, {_speed_source(row)}",
            True,
            description,
        )
    value = _missing("", provider)
    if not is_local(row) and row.get("timing_source") is None and row.get("ttft_ms") is not None:
        value += "; the prompt is too short to estimate it from TTFT"
    return Fact("prefill_speed", "Prefill speed", value, False, description)


def _decode_fact(row: dict[str, Any], provider: str) -> Fact:
    description = (
        "Decode: how fast the model wrote its reply. Decode tok/s = the tokens after the "
        "first / the time from the first token to the last (or the backend's own decode "
        "counters)."
    )
    speed = as_float(row.get("decode_tok_s"))
    if speed is not None:
        return Fact(
            "decode_speed",
            "Decode speed",
            f"{rate_text(speed)}, {_speed_source(row)}",
            True,
            description,
        )
    output = as_int(row.get("output_tokens"))
    if row.get("ttft_ms") is None:
        value = "not measured: no reply text arrived"
    elif output is not None and output <= 1:
        value = "not measured: the reply was a single token"
    else:
        value = "not measured: the reply came in one piece (not streamed)"
    return Fact("decode_speed", "Decode speed", value, False, description)


def _cost_fact(row: dict[str, Any]) -> Fact:
    cost = cost_parts(row)
    description = (
        "What the call cost: new input tokens, cached input tokens (often cheaper) and output "
        "tokens (including reasoning)."
    )
    if cost.total is None:
        return Fact("cost", "Cost", cost.source, False, description)
    if cost.source == "local model: no cost":
        return Fact("cost", "Cost", cost.source, True, description)
    value = money(cost.total)
    named = [
        (name, part)
        for name, part in (
            ("input", cost.input),
            ("cached input", cost.cached),
            ("output", cost.output),
        )
        if part is not None
    ]
    if named:
        value += " = " + " + ".join(f"{name} {money(part)}" for name, part in named)
    return Fact("cost", "Cost", f"{value} · {cost.source}", True, description)


def _load_fact(row: dict[str, Any]) -> Fact | None:
    parts = []
    if row.get("n_ctx") is not None:
        parts.append(f"context {num(row['n_ctx'])}")
    if row.get("n_gpu_layers") is not None:
        parts.append(f"{num(row['n_gpu_layers'])} GPU layers")
    if row.get("n_threads") is not None:
        parts.append(f"{num(row['n_threads'])} threads")
    if row.get("flash_attn") is not None:
        parts.append("flash attention " + ("on" if row["flash_attn"] else "off"))
    if row.get("quantization"):
        parts.append(f"weights {row['quantization']}")
    if row.get("backend"):
        parts.append(f"on {row['backend']}")
    if not parts:
        return None
    return Fact(
        "load",
        "Model settings",
        " · ".join(parts),
        True,
        "How the local model was loaded for this call.",
    )


def _where_fact(row: dict[str, Any]) -> Fact | None:
    """Where the model ran, as llama.cpp reported the load: "31/31 layers on Vulkan0 ·
    llvmpipe (software) · 235 MiB GPU memory", "0/31 layers on GPU · CPU". None for a row
    that does not say (recorded before m012)."""
    where = where_text(row)
    if not where:
        return None
    vram = as_int(row.get("vram_bytes"))
    if vram:
        where += f" · {bytes_text(vram)} GPU memory"
    return Fact(
        "placement",
        "Where it ran",
        where,
        True,
        "The layers llama.cpp put on a GPU when it loaded the model (not the setting that "
        "asked for them), the device that holds them, and its memory for weights, KV cache "
        "and compute buffers. A software device (llvmpipe) is the CPU under another name.",
    )


def facts(row: dict[str, Any], ttft: Fact, total: Fact) -> tuple[Fact, ...]:
    """The facts list, in reading order: times, tokens, context, memory, speeds, cost."""
    provider = provider_name(row)
    split = token_split(row)
    found: list[Fact] = [
        ttft,
        total,
        *_token_facts(row, split, provider),
    ]
    if (images := _image_fact(row, provider)) is not None:
        found.append(images)
    if (knowledge := _retrieval_fact(row)) is not None:
        found.append(knowledge)
    if is_local(row):
        found.append(_cache_fact(row, split))
    found.append(_context_fact(row, provider))
    if is_local(row):
        found.append(_kv_fact(row, provider))
    found += [_prefill_fact(row, provider), _decode_fact(row, provider), _cost_fact(row)]
    if is_local(row) and (load := _load_fact(row)) is not None:
        found.append(load)
    if is_local(row) and (where := _where_fact(row)) is not None:
        found.append(where)
    return tuple(found)
