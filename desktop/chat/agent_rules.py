"""Rules about agents that the editor and the CLI share: where a saved key may go, and how
typed text becomes an agent's numbers.

Keys: an API key belongs to the host of its endpoint (the URL's host name, case-insensitive).
It may follow the agent to another path, port or kind on the same host; never to another host
name (``localhost`` and ``127.0.0.1`` are two hosts), and never from https:// to plain http://
(it would travel in clear). Pointing an agent anywhere else asks for the new endpoint's key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import SplitResult, urlsplit

from desktop.local.starter import resolve_model_path

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


# keys and hosts -------------------------------------------------------------------------------
def split_url(url: str | None) -> SplitResult | None:
    """The URL's parts; None when there is no URL or it does not parse (e.g. "http://[::1")."""
    if not url:
        return None
    try:
        return urlsplit(url)
    except ValueError:
        return None


def host_of(url: str | None) -> str | None:
    """The URL's host name, lower case; None when there is none (or the URL does not parse)."""
    parts = split_url(url)
    host = parts.hostname if parts is not None else None
    return host.lower() if host else None


def _scheme(url: str | None) -> str:
    parts = split_url(url)
    return parts.scheme if parts is not None else ""


def _downgraded(old_url: str | None, new_url: str | None) -> bool:
    return _scheme(old_url) == "https" and _scheme(new_url) == "http"


def key_may_follow(old_url: str | None, new_url: str | None) -> bool:
    """Whether a key saved for ``old_url`` may be sent to ``new_url``: the same host, and not
    moved from https:// to plain http://."""
    old_host = host_of(old_url)
    same_host = old_host is not None and old_host == host_of(new_url)
    return same_host and not _downgraded(old_url, new_url)


def key_left_behind(old_url: str | None, new_url: str | None) -> str | None:
    """Why the key saved for ``old_url`` is not used at ``new_url`` (a sentence asking for the
    new endpoint's key), or None when it may follow."""
    if key_may_follow(old_url, new_url):
        return None
    old_host, host = host_of(old_url), host_of(new_url) or "the new address"
    if old_host is not None and old_host == host:
        return (
            f"This agent now uses plain http:// to {host}; enter its API key again "
            "(the old key is not sent unencrypted)"
        )
    return (
        f"This agent now points at {host}; enter its API key "
        "(the old key is not sent to another host)"
    )


def is_plain_http_remote(base_url: str | None) -> bool:
    """True for http:// to a host that is not this machine (keys would travel in clear)."""
    return _scheme(base_url) == "http" and (host_of(base_url) or "") not in LOCAL_HOSTS


# fields and typed text -----------------------------------------------------------------------
# Agent fields only one side uses: a local agent's load parameters, a remote one's endpoint.
# The other side's are reset when an agent is saved, so a kind change leaves nothing stale.
LOCAL_FIELDS = (
    "model_path",
    "n_ctx",
    "n_gpu_layers",
    "n_threads",
    "n_batch",
    "main_gpu",
    "flash_attn",
    "kv_type",
    "mmproj_path",
)
REMOTE_FIELDS = (
    "base_url",
    "preset",
    "stall_timeout_s",
    "ca_bundle",
    "price_input_per_m",
    "price_output_per_m",
)
Scope = Literal["any", "local", "remote"]


@dataclass(frozen=True, slots=True)
class NumberField:
    """A numeric agent field: ``name`` is the ``Agent`` attribute, ``what`` how a message names
    it, ``whole`` an integer, ``scope`` the agents that use it (local load parameters, remote
    connection options, or any)."""

    name: str
    what: str
    whole: bool
    scope: Scope = "any"

    def applies_to(self, remote: bool) -> bool:
        return self.scope == "any" or (self.scope == "remote") == remote

    def parse(self, text: str) -> int | float | None:
        return parse_number(text, self.what, whole=self.whole)


NUMBER_FIELDS = (
    NumberField("temperature", "Temperature", whole=False),
    NumberField("top_p", "Top-p", whole=False),
    NumberField("max_tokens", "Max tokens", whole=True),
    NumberField("seed", "Seed", whole=True),
    NumberField("n_ctx", "Context size", whole=True, scope="local"),
    NumberField("n_gpu_layers", "GPU layers", whole=True, scope="local"),
    NumberField("n_threads", "Threads", whole=True, scope="local"),
    NumberField("n_batch", "Batch size", whole=True, scope="local"),
    NumberField("main_gpu", "Main GPU", whole=True, scope="local"),
    NumberField("stall_timeout_s", "The stall timeout (seconds)", whole=False, scope="remote"),
    # a price override, USD per million tokens (desktop.chat.pricing)
    NumberField("price_input_per_m", "The input price", whole=False, scope="remote"),
    NumberField("price_output_per_m", "The output price", whole=False, scope="remote"),
)


def number_field(name: str) -> NumberField:
    for f in NUMBER_FIELDS:
        if f.name == name:
            return f
    raise KeyError(name)


def parse_number(text: str, what: str, *, whole: bool) -> int | float | None:
    """Empty text: None. Whole numbers may have thousands commas ("4,096"). A ``ValueError``
    carries the message for a person, e.g. "Max tokens must be a whole number."."""
    text = text.strip().replace(",", "") if whole else text.strip()
    if not text:
        return None
    try:
        value: int | float = int(text) if whole else float(text)
    except ValueError:
        raise ValueError(f"{what} must be a {'whole number' if whole else 'number'}.") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a number.")
    return value


def parse_numbers(
    texts: dict[str, str], *, remote: bool
) -> tuple[dict[str, int | float | None], dict[str, str]]:
    """Text per field name -> (values of the fields this agent uses, messages for those that do
    not parse). Fields of the other side (local vs remote) are left out, unread."""
    values: dict[str, int | float | None] = {}
    errors: dict[str, str] = {}
    for f in NUMBER_FIELDS:
        if f.name not in texts or not f.applies_to(remote):
            continue
        try:
            values[f.name] = f.parse(texts[f.name])
        except ValueError as exc:
            errors[f.name] = str(exc)
    return values, errors


def stop_lines(text: str) -> tuple[str, ...]:
    """Stop sequences typed one per line (empty lines are not sequences)."""
    return tuple(line for line in text.split("\n") if line != "")


def default_model_name(model_path: str | None) -> str:
    """What a local agent without a model name is called: its file's name without ``.gguf``."""
    path = resolve_model_path(model_path)
    return path.stem if path is not None else ""
