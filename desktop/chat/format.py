"""Stats records as short text: the message footer, its tooltip, Markdown exports; model names
as people recognise them (a GGUF path becomes its file name, a long id is elided in the
middle). Qt-free."""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any

# A model name longer than this is elided in the middle (the full one goes in a tooltip).
MODEL_NAME_CHARS = 36
_FILE_SUFFIXES = (".gguf", ".ggml", ".bin", ".safetensors")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_SEPARATORS = re.compile(r"[\\/]+")
# finish_reason in plain words; a normal end ("stop") says nothing
_FINISH_WORDS = {
    "stop": "",
    "length": "max tokens reached",
    "cancelled": "stopped",
    "error": "",
    "tool_calls": "called tools",
}


# The window's words are English; so are its month names, whatever the machine's locale (Qt sets
# the C library's locale from LANG, where strftime's %b would give "Dez" or "12月").
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def date_text(moment: date | datetime, pattern: str) -> str:
    """``moment.strftime(pattern)`` with ``%b`` as the English month and ``%-d`` as the day
    without a leading zero, on any platform and in any locale."""
    pattern = pattern.replace("%b", MONTHS[moment.month - 1]).replace("%-d", str(moment.day))
    return moment.strftime(pattern)


def _num(value: Any, digits: int = 0) -> str:
    if digits == 0:
        return f"{round(float(value)):,}"
    return f"{float(value):,.{digits}f}"


def count_text(n: int) -> str:
    """1234 -> "1,234"; 123_456 -> "123k"; 1_234_567 -> "1.2M": a count that keeps a column
    narrow (the hub's downloads and likes, ``simi stats``' tokens)."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 100_000:
        return f"{n / 1000:.0f}k"
    return f"{n:,}"


def _is_path(name: str) -> bool:
    return (
        name.startswith(("/", "~", "./", "../", "\\"))
        or bool(_DRIVE.match(name))
        or "\\" in name
        or name.lower().endswith(_FILE_SUFFIXES)
    )


def elide_middle(text: str, limit: int = MODEL_NAME_CHARS) -> str:
    """``text`` at most ``limit`` characters: its start, "…", and its (longer) end, where the
    name of a model usually says most ("accounts/fi…llama-v3p1-405b-instruct")."""
    if len(text) <= limit or limit < 3:
        return text
    keep = limit - 1
    head = keep // 3
    return f"{text[:head]}…{text[len(text) - (keep - head) :]}"


def short_model_name(model: str | None, limit: int = MODEL_NAME_CHARS) -> str:
    """A model name as a person recognises it: a file path (a llama.cpp server reports the
    GGUF path it loaded) becomes its file name; a long id is elided in the middle. "" for
    none. Show the full ``model`` in a tooltip wherever this one is shown."""
    name = (model or "").strip()
    if not name:
        return ""
    if _is_path(name):
        name = _SEPARATORS.split(name.rstrip("\\/"))[-1] or name
    return elide_middle(name, limit)


UNKNOWN_COST = "—"


def cost_text(usd: Any, source: str | None = None) -> str:
    """A cost as a person reads it: "$0.0012", "$1.25"; "local" for a local model (free);
    "—" when the price is unknown (never "$0": an unknown cost is not a free one)."""
    if source == "local":
        return "local"
    if usd is None:
        return UNKNOWN_COST
    value = float(usd)
    if value == 0:
        return "$0"
    if 0 < value < 0.0001:  # two significant digits: $0.0000075, not $0.0000
        return f"${value:.{1 - math.floor(math.log10(value))}f}"
    return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"


def row_cost_text(row: dict[str, Any]) -> str:
    """The cost of a stats row (see ``cost_text``)."""
    return cost_text(row.get("cost_usd"), row.get("price_source"))


def finish_words(reason: str | None) -> str:
    """How a reply ended, in words: "" for a normal end, "stopped", "max tokens reached"."""
    if not reason:
        return ""
    return _FINISH_WORDS.get(reason, reason.replace("_", " "))


def tokens_text(row: dict[str, Any], counted_note: bool = False) -> str:
    """ "32 (4 cached) → 57 tokens"; only what is known: "57 tokens" (no prompt count),
    "32 tokens in" (no output count); "" for neither. ``counted_note`` adds "(counted)" when
    we counted the streamed tokens ourselves."""
    prompt, output = row.get("prompt_tokens"), row.get("output_tokens")
    if prompt is None and output is None:
        return ""
    cached = row.get("cached_tokens")
    left = _num(prompt) if prompt is not None else ""
    if left and cached:
        left += f" ({_num(cached)} cached)"
    if output is None:
        text = f"{left} tokens in"
    elif not left:
        text = f"{_num(output)} tokens"
    else:
        text = f"{left} → {_num(output)} tokens"
    if counted_note and row.get("token_source") == "counted":
        text += " (counted)"
    return text


# Where a local call's cached prompt tokens came from (inference_stats.cache_source)
CACHE_SOURCE_WORDS = {
    "context": "already in the model's context",
    "memory": "restored from the memory cache",
    "saved": "from the saved system prompt (disk)",
}


def _short_ms(ms: float) -> str:
    if ms < 1:
        return f"{ms:.1f} ms"
    return f"{round(ms)} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def cache_words(row: dict[str, Any]) -> str:
    """Where the cached tokens came from and how long restoring them took: "restored from the
    memory cache in 41 ms", "from the saved system prompt (disk) in 12 ms", "already in the
    model's context"; "" when the row does not say (not local, nothing cached, an old row)."""
    words = CACHE_SOURCE_WORDS.get(str(row.get("cache_source") or ""), "")
    restore = row.get("cache_restore_ms")
    if words and restore is not None and row.get("cache_source") != "context":
        words += f" in {_short_ms(float(restore))}"
    return words


def cache_text(row: dict[str, Any]) -> str:
    """ "Cached 2,950 of 3,010 prompt tokens — restored from the memory cache in 41 ms"; ""
    when nothing was cached or the row does not say where from."""
    cached, prompt, words = row.get("cached_tokens"), row.get("prompt_tokens"), cache_words(row)
    if not cached or not words:
        return ""
    of = f" of {_num(prompt)}" if prompt is not None else ""
    return f"Cached {_num(cached)}{of} prompt tokens — {words}"


def _figures(row: dict[str, Any], counted_note: bool = False, compact: bool = False) -> list[str]:
    """The figures of a call as parts of a line; ``compact`` leaves out the cached tokens and
    an unknown cost (the tooltip and the timeline have them)."""
    parts: list[str] = []
    if row.get("ttft_ms") is not None:
        parts.append(f"TTFT {_num(row['ttft_ms'])} ms")
    if row.get("decode_tok_s") is not None:
        parts.append(f"{_num(row['decode_tok_s'])} tok/s")
    tokens = tokens_text({**row, "cached_tokens": None} if compact else row, counted_note)
    if tokens:
        parts.append(tokens)
    cost = row_cost_text(row)
    # a local model's cost says nothing on every line (it is free): the timeline says it
    local = row.get("price_source") == "local" or row.get("provider_kind") == "local"
    if (
        (tokens or row.get("cost_usd") is not None)
        and not local
        and not (compact and cost == UNKNOWN_COST)
    ):
        parts.append(cost)
    knowledge = retrieval_text(row)
    if knowledge:
        parts.append(knowledge)
    finish = finish_words(row.get("finish_reason"))
    if finish:
        parts.append(finish)
    return parts


def retrieval_text(row: dict[str, Any]) -> str:
    """ "knowledge 38 ms, +1,204 tokens": the search of the agent's collections before the
    call and what its passages added to the prompt; "" for a call without one."""
    ms = row.get("retrieval_ms")
    if ms is None:
        return ""
    tokens = row.get("retrieval_tokens")
    added = f", +{_num(tokens)} tokens" if tokens else ", nothing found"
    return f"knowledge {_short_ms(float(ms))}{added}"


def _model_of(row: dict[str, Any], model: str | None) -> str | None:
    return model or row.get("model_reported") or row.get("model_requested")


def stats_line(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> str:
    """ "Agent · model · TTFT 85 ms · 112 tok/s · 32 (4 cached) → 57 tokens · $0.0004".

    ``agent`` and the short model name (``short_model_name``: the given one, else the row's)
    lead the line when ``agent`` is given (the per-message footer); a stopped reply ends
    with "stopped", one cut at max tokens with "max tokens reached". Only what is known is
    shown (no "?"); "" for no row.
    """
    if not row:
        return ""
    parts: list[str] = []
    if agent:
        parts.append(agent)
        name = short_model_name(_model_of(row, model))
        if name:
            parts.append(name)
    elif model:
        parts.append(short_model_name(model))
    return " · ".join(parts + _figures(row))


def stats_line_variants(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> list[str]:
    """``stats_line`` and shorter wordings of it for a narrow footer, longest first: without
    the agent (the bubble names it above), the figures alone, then the figures without the
    cached tokens and an unknown cost. Never empty (``[""]`` for no row)."""
    full = stats_line(row, agent, model)
    if not row:
        return [full]
    name = short_model_name(_model_of(row, model)) if agent else ""
    figures = _figures(row)
    lines = [full, " · ".join([name, *figures] if name else figures)]
    lines += [" · ".join(figures), " · ".join(_figures(row, compact=True))]
    return [line for n, line in enumerate(lines) if line and line not in lines[:n]] or [full]


def where_text(row: dict[str, Any]) -> str:
    """Where a local call ran, from its stats row (llama.cpp's own report at load): "0/31
    layers on GPU · CPU" when nothing was offloaded, "31/31 layers on Vulkan0 · llvmpipe
    (software)" when layers were; "" when the row does not say (remote calls, older rows)."""
    layers, device = row.get("offloaded_layers"), row.get("device")
    if not layers and not device:
        return ""
    if not layers:
        return f"on {device}"
    offloaded = str(layers).split("/", 1)[0]
    if offloaded == "0" or not device or device == "CPU":
        return f"{layers} layers on GPU · {device or 'CPU'}"
    return f"{layers} layers on {device}"


def stats_details(row: dict[str, Any] | None) -> str:
    """Every non-empty field of the stats record, one per line."""
    if not row:
        return ""
    lines = [f"{key}: {value}" for key, value in row.items() if value is not None and key != "id"]
    return "\n".join(lines)


def stats_tooltip_text(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> str:
    """The footer's tooltip: who answered with the full model name, the whole line (nothing
    elided, counted tokens marked), where its cached tokens came from, where a local model ran
    (``where_text``), then every field of the record."""
    if not row:
        return ""
    who = " · ".join(p for p in (agent, _model_of(row, model)) if p)
    head = [who] if who else []
    figures = " · ".join(_figures(row, counted_note=True))
    if figures:
        head.append(figures)
    cache = cache_text(row)
    if cache:
        head.append(cache)
    where = where_text(row)
    if where:
        head.append("On " + where[3:] if where.startswith("on ") else where)
    return "\n".join([*head, "", stats_details(row)]) if head else stats_details(row)
