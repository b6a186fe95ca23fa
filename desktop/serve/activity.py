"""The server's recent requests, for the Server page's live list and ``simi serve``'s log
lines: one ``Served`` per request, updated as it moves (waiting -> answering -> done), with
its figures once its stats row is stored (TTFT, tok/s, tokens, cost, the row's id for the
call's timeline). Kept in memory (the last ``KEEP``); the stats rows are the history.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from desktop.chat.call_stats import CallStats

log = logging.getLogger("simi.serve")

KEEP = 200


@dataclass(slots=True)
class Served:
    id: int
    started: float  # time.time()
    client: str  # the key's name, or "" without one
    peer: str  # the client's address
    model: str  # the model id asked for
    agent: str = ""
    stream: bool = False
    state: str = "received"  # received, waiting, answering, done, cancelled, error, refused
    status: int = 200
    error: str = ""
    ttft_ms: float | None = None
    decode_tok_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    stats_id: int | None = None
    total_ms: float | None = None

    def take_stats(self, stats: CallStats | None, stats_id: int | None) -> None:
        if stats is None:
            return
        self.ttft_ms = stats.ttft_ms
        self.decode_tok_s = stats.decode_tok_s
        self.prompt_tokens = stats.prompt_tokens
        self.output_tokens = stats.output_tokens
        self.cost_usd = stats.cost_usd
        self.total_ms = stats.total_ms
        self.stats_id = stats_id


class Activity:
    def __init__(self, keep: int = KEEP) -> None:
        self.entries: deque[Served] = deque(maxlen=keep)
        self.listeners: list[Callable[[Served], None]] = []
        self._ids = itertools.count(1)

    def begin(self, client: str, peer: str, model: str, stream: bool) -> Served:
        entry = Served(next(self._ids), time.time(), client, peer, model, stream=stream)
        self.entries.append(entry)
        self.changed(entry)
        return entry

    def changed(self, entry: Served) -> None:
        for listener in list(self.listeners):
            try:
                listener(entry)
            except Exception:  # a listener's bug never fails a request
                log.exception("request listener failed")

    def recent(self) -> list[Served]:
        """Newest first."""
        return list(reversed(self.entries))
