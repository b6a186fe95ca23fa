"""The lanes of a reply's timeline: segments laid one after another on the client's axis, and
the server's own timings inside it. Qt-free; ``desktop.chat.timeline`` assembles them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from desktop.chat.format import CACHE_SOURCE_WORDS
from desktop.chat.timeline_facts import (
    as_float,
    as_int,
    is_local,
    ms_text,
    num,
    provider_name,
    rate_text,
)

MeasuredBy = Literal["client", "llama.cpp", "server"]
Lane = Literal["client", "server", "images", "retrieval"]
# A gap shorter than this is rounding, not time anyone spent: it is not drawn.
MIN_GAP_MS = 1.0


@dataclass(frozen=True, slots=True)
class Segment:
    """A span of the call: ``start_ms``..``end_ms`` on the client's axis; ``kind`` picks its
    colour; ``figure`` is the text drawn with it ("140 ms"); ``description`` says in plain
    words what happened then and who measured it."""

    key: str
    label: str
    start_ms: float
    end_ms: float
    figure: str
    kind: str
    measured_by: MeasuredBy
    description: str
    lane: Lane = "client"

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass(frozen=True, slots=True)
class Marker:
    """A moment with no width: "reused connection", "first token", "done" (or stopped/failed)."""

    key: str
    label: str
    at_ms: float
    figure: str
    description: str


class Builder:
    """Lays segments one after another on a lane; widths are never negative."""

    def __init__(self) -> None:
        self.at = 0.0
        self.segments: list[Segment] = []

    def add(
        self,
        key: str,
        label: str,
        duration: float | None,
        kind: str,
        description: str,
        *,
        figure: str = "",
        measured_by: MeasuredBy = "client",
        lane: Lane = "client",
    ) -> Segment | None:
        if duration is None or duration <= 0:
            return None
        figure = figure or ms_text(duration)
        segment = Segment(
            key,
            label,
            self.at,
            self.at + duration,
            figure,
            kind,
            measured_by,
            description,
            lane,
        )
        self.segments.append(segment)
        self.at = segment.end_ms
        return segment

    def until(self, end: float | None, *args: Any, **kwargs: Any) -> Segment | None:
        """A segment from here to ``end`` (absolute ms), when that is at least a ms."""
        if end is None or end - self.at < MIN_GAP_MS:
            return None
        return self.add(args[0], args[1], end - self.at, *args[2:], **kwargs)


# knowledge ------------------------------------------------------------------------------------
RETRIEVAL_LANE_LABEL = "Knowledge search (timed by SIMI Multi, before the call)"


def retrieval_lane(row: dict[str, Any]) -> Builder:
    """A call whose agent searches knowledge collections: the search's lane, from Send (its
    three parts, each when measured); the call's own lane starts where it ends."""
    lane = Builder()
    if as_float(row.get("retrieval_ms")) is None:
        return lane
    chunks = as_int(row.get("retrieval_chunks")) or 0
    embed = as_float(row.get("retrieval_embed_ms"))
    lane.add(
        "retrieval_embed",
        "embedding the question",
        embed,
        "retrieval",
        lane="retrieval",
        description=f"The collection's embedding model turned the question into a vector in "
        f"{ms_text(embed or 0)}, to find passages by meaning as well as by words.",
    )
    search = as_float(row.get("retrieval_search_ms"))
    lane.add(
        "retrieval_search",
        "searching the collections",
        search,
        "retrieval",
        lane="retrieval",
        description="Ranking the collections' passages for the question (keywords, and "
        f"meaning when an embedding model is set) took {ms_text(search or 0)}.",
    )
    read = as_float(row.get("retrieval_read_ms"))
    lane.add(
        "retrieval_read",
        "reading the passages",
        read,
        "retrieval",
        lane="retrieval",
        description=f"Reading the {num(chunks)} chosen passage{'' if chunks == 1 else 's'} "
        f"from the index took {ms_text(read or 0)}.",
    )
    return lane


# local ----------------------------------------------------------------------------------------
def local_start(row: dict[str, Any], lane: Builder) -> None:
    queued = as_float(row.get("queued_ms"))
    lane.add(
        "queued",
        "queued",
        queued,
        "wait",
        f"Waited {ms_text(queued or 0)} for the local model: it was answering another chat "
        "(one local model answers one request at a time).",
    )
    worker = as_float(row.get("worker_start_ms"))
    lane.add(
        "worker_start",
        "starting the worker",
        worker,
        "startup",
        f"Starting the process that runs llama.cpp took {ms_text(worker or 0)}: the first call "
        "after the app starts (or after the worker stopped) pays this once.",
    )
    load = as_float(row.get("load_ms"))
    lane.add(
        "load",
        "loading the model",
        load,
        "load",
        f"Loading the model file into memory took {ms_text(load or 0)}: paid by the first "
        "call after the model is loaded, changed or unloaded; later calls skip it.",
    )
    source = str(row.get("cache_source") or "")
    restore = as_float(row.get("cache_restore_ms")) if source in ("memory", "saved") else None
    cached = as_int(row.get("cached_tokens"))
    restored = f"{num(cached)} prompt tokens' state" if cached else "the prompt's state"
    lane.add(
        "restore",
        "restoring the prompt cache",
        restore,
        "restore",
        f"Putting back {restored} "
        + (
            "kept in the memory cache from an earlier call"
            if source == "memory"
            else "saved on disk for this agent's system prompt"
        )
        + f" took {ms_text(restore or 0)}, instead of reading those tokens again.",
        figure=ms_text(restore or 0),
    )
    prefill = as_float(row.get("prefill_ms"))
    evaluated = as_int(row.get("prompt_eval_tokens"))
    speed = as_float(row.get("prefill_tok_s"))
    figure = ms_text(prefill or 0) + (f" · {rate_text(speed)}" if speed else "")
    tokens = f"{num(evaluated)} new prompt tokens" if evaluated is not None else "the prompt"
    where = CACHE_SOURCE_WORDS.get(source, "reused from the cache")
    reused = f" ({num(cached)} more were {where})" if cached else ""
    lane.add(
        "prefill",
        "reading the prompt (prefill)",
        prefill,
        "prefill",
        f"llama.cpp read {tokens}{reused} in {ms_text(prefill or 0)}, measured by its own "
        "counters.",
        figure=figure,
        measured_by="llama.cpp",
    )


# remote ---------------------------------------------------------------------------------------
def remote_start(row: dict[str, Any], lane: Builder, markers: list[Marker], provider: str) -> None:
    lane.add(
        "queued",
        "queued",
        as_float(row.get("queued_ms")),
        "wait",
        "Waited for a free slot before the request was sent.",
    )
    connect = as_float(row.get("connect_ms"))
    reused = row.get("reused_connection")
    if reused == 1 or (connect == 0 and reused is None):
        markers.append(
            Marker(
                "reused",
                "reused connection",
                lane.at,
                "0 ms",
                "The request went over a connection kept open from an earlier call: no "
                "connecting and no TLS handshake this time.",
            )
        )
    elif connect:
        tls = as_float(row.get("tls_ms"))
        if tls is not None and 0 < tls <= connect:
            lane.add(
                "connect",
                "connecting (TCP)",
                connect - tls,
                "network",
                f"Opening a network connection to {provider} (TCP).",
            )
            lane.add(
                "tls",
                "TLS handshake",
                tls,
                "network",
                "Agreeing on encryption with the server (TLS), before anything is sent.",
            )
        else:
            lane.add(
                "connect",
                "connecting",
                connect,
                "network",
                f"Opening a network connection to {provider} (TCP and TLS together).",
            )
    lane.until(
        as_float(row.get("headers_ms")),
        "headers",
        "waiting for the answer to begin",
        "network",
        f"Sending the request and waiting until {provider} began to answer (its response "
        "headers arrived).",
    )


def gap_to_first_token(
    row: dict[str, Any], lane: Builder, ttft: float, local: bool, provider: str
) -> None:
    if local:
        measured = row.get("prefill_ms") is not None
        lane.until(
            ttft,
            "other",
            "other (formatting, first token, hand-off)" if measured else "reading the prompt",
            "other",
            "The rest of the time to the first token, which llama.cpp's counters do not "
            "split: formatting the prompt, computing the first token and handing it to the app."
            if measured
            else "Reading the prompt and computing the first token (llama.cpp's counters were "
            "not recorded for this call, so this is not split further).",
        )
        return
    server = row.get("timing_source") == "server"
    lane.until(
        ttft,
        "first_token_wait",
        "waiting for the first token",
        "wait",
        f"{provider} was reading the prompt (prefill) and computing the first token; the "
        "lane below shows how much of this the server itself spent."
        if server
        else f"{provider} was reading the prompt (prefill), computing the first token, and "
        f"perhaps queueing the request; {provider} does not report how this splits.",
    )


def decode(row: dict[str, Any], lane: Builder, first_at: float, local: bool, provider: str) -> None:
    """First token → last token on the client's clock. Its speed is llama.cpp's own (local),
    the client's (no timings), or, when a server reports its own, shown in the server lane."""
    lane.at = first_at
    source = row.get("timing_source")
    stream = as_float(row.get("stream_ms"))
    if stream is None and source is None:
        stream = as_float(row.get("decode_ms"))  # then the client's first→last span
    output = as_int(row.get("output_tokens"))
    speed = as_float(row.get("decode_tok_s")) if source != "server" else None
    parts = [ms_text(stream or 0)]
    if speed:
        parts.append(rate_text(speed))
    if output is not None:
        parts.append(f"{num(output)} tokens")
    by: MeasuredBy = "llama.cpp" if source == "llama.cpp" else "client"
    decode_ms = as_float(row.get("decode_ms"))
    own = ""
    if source == "llama.cpp" and decode_ms is not None:
        own = f" llama.cpp's own decode counter: {ms_text(decode_ms)}."
    elif source == "server":
        own = f" {provider}'s own decode time is in the lane below."
    lane.add(
        "decode",
        "writing the reply (decode)" if local else "streaming the reply",
        stream,
        "decode",
        f"From the first token to the last: {ms_text(stream or 0)}"
        + (f" for {num(output)} tokens" if output is not None else "")
        + (f", {rate_text(speed)}." if speed else ".")
        + own,
        figure=" · ".join(parts),
        measured_by=by,
    )


def server_lane(
    row: dict[str, Any], first_at: float, end: float, notes: list[str]
) -> list[Segment]:
    """The server's own prefill and decode inside the client's span; the rest is network and
    queue. The server says how long each took, not when: its prefill is drawn ending at the
    first token, its decode starting there."""
    if row.get("timing_source") != "server" or is_local(row):
        return []
    prefill = as_float(row.get("prefill_ms"))
    decode = as_float(row.get("decode_ms"))
    if prefill is None and decode is None:
        return []
    provider = provider_name(row)
    lane = Builder()
    earliest = as_float(row.get("connect_ms")) or 0.0
    prefill = prefill or 0.0
    start = first_at - prefill
    if start < earliest:
        notes.append(
            f"The server's prefill ({ms_text(prefill)}) is longer than its share of the time to "
            "first token; it is drawn cut at the start of the request."
        )
        start = earliest
    gap = (
        f"Time {provider} did not account for: the request and the reply travelling over the "
        "network, and any wait in the server's queue."
    )
    lane.until(start, "server_network", "network and queue", "gap", gap, lane="server")
    speed = as_float(row.get("prefill_tok_s"))
    lane.until(
        first_at,
        "server_prefill",
        "prefill (server)",
        "prefill",
        f"{provider} says it read the prompt in {ms_text(prefill)}"
        + (
            f" ({num(row['prompt_eval_tokens'])} new tokens)"
            if row.get("prompt_eval_tokens")
            else ""
        )
        + ".",
        figure=ms_text(prefill) + (f" · {rate_text(speed)}" if speed else ""),
        measured_by="server",
        lane="server",
    )
    lane.at = max(lane.at, first_at)
    if decode:
        shown = min(decode, max(end - lane.at, 0.0))
        rate = as_float(row.get("decode_tok_s"))
        lane.add(
            "server_decode",
            "decode (server)",
            shown,
            "decode",
            f"{provider} says it spent {ms_text(decode)} writing the reply.",
            figure=ms_text(decode) + (f" · {rate_text(rate)}" if rate else ""),
            measured_by="server",
            lane="server",
        )
    lane.until(end, "server_network_end", "network and queue", "gap", gap, lane="server")
    notes.append(
        f"{provider} reports how long its prefill and decode took, not when they began: its "
        "prefill is drawn ending at the first token and its decode starting there."
    )
    return lane.segments


# images (local) --------------------------------------------------------------------------------
IMAGE_LANE_LABEL = "Image encoding (the vision projector, timed by llama.cpp)"


def image_lane(row: dict[str, Any], start: float) -> list[Segment]:
    """A local call that sent images: the vision projector encoding them, drawn in a lane of
    its own from ``start`` (where the prompt's reading begins). It is part of the time to the
    first token."""
    encode = as_float(row.get("image_encode_ms"))
    if not is_local(row) or not encode or encode <= 0:
        return []
    lane = Builder()
    lane.at = start
    tokens = as_int(row.get("image_tokens"))
    about = "about " if row.get("image_tokens_estimated") == 1 else ""
    into = f" into {about}{num(tokens)} tokens" if tokens is not None else ""
    lane.add(
        "image_encode",
        "encoding the images",
        encode,
        "prefill",
        f"The model's vision projector turned the attached images{into} the model can read: "
        f"{ms_text(encode)}, measured by llama.cpp. The model reads them with the prompt, "
        "before its first token.",
        measured_by="llama.cpp",
        lane="images",
    )
    return lane.segments
