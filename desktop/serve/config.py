"""How the API server runs: address, keys, browsers, limits. Read from the settings file
(``serve.*``), overridden by ``simi serve``'s flags or the Server page.

``DEFAULT_PORT`` 7464 spells SIMI on a phone keypad; it is none of the ports other local
servers take by default (LM Studio 1234, Jan 1337, GPT4All 4891, koboldcpp 5001, llama.cpp
8080, vLLM 8000, Ollama 11434), so SIMI runs beside them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from desktop.errors import ValidationError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7464
DEFAULT_MAX_BODY_MB = 16
DEFAULT_QUEUE_LIMIT = 16  # API requests waiting for a local model, beyond those answering
DEFAULT_QUEUE_TIMEOUT_S = 120.0

PREF_HOST = "serve.host"
PREF_PORT = "serve.port"
PREF_REQUIRE_KEY = "serve.require_key"
PREF_CORS_ORIGINS = "serve.cors_origins"
PREF_KEEP_CONVERSATIONS = "serve.keep_conversations"
PREF_AUTOSTART = "serve.start_with_window"


def is_loopback(host: str) -> bool:
    """Whether ``host`` binds to this machine only ("localhost", 127.x, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """``agents``: names the server is limited to (empty: every agent the Server page exposes).
    ``cors_origins``: the exact origins (``http://localhost:3000``) whose pages may call the
    server from a browser; none by default. ``require_key``: even on loopback every request
    needs a key (beyond loopback it always does)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    agents: tuple[str, ...] = ()
    require_key: bool = False
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_MB * 1024 * 1024
    queue_limit: int = DEFAULT_QUEUE_LIMIT
    queue_timeout_s: float = DEFAULT_QUEUE_TIMEOUT_S
    keep_conversations: bool = False

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def keys_required(self) -> bool:
        return self.require_key or not self.loopback

    @property
    def base_url(self) -> str:
        """The address a client uses: a wildcard bind is reached at loopback from here."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    def check(self) -> None:
        """Raise ``ValidationError`` for a setting that cannot work."""
        if not 0 <= self.port <= 65535:  # 0: a free port the system picks
            raise ValidationError({"port": "The port must be between 1 and 65535."})
        for origin in self.cors_origins:
            if origin == "*" or not origin.startswith(("http://", "https://")):
                raise ValidationError(
                    {
                        "cors_origins": f"“{origin}” is not an origin: give each one exactly, "
                        "such as http://localhost:3000 (a wildcard is never allowed)."
                    }
                )


def from_prefs(prefs: Any, **overrides: Any) -> ServeConfig:
    """The saved settings, then ``overrides`` (a flag given: not None)."""
    origins = prefs.get(PREF_CORS_ORIGINS) or []
    values: dict[str, Any] = {
        "host": str(prefs.get(PREF_HOST) or DEFAULT_HOST),
        "port": _int(prefs.get(PREF_PORT), DEFAULT_PORT),
        "require_key": bool(prefs.get(PREF_REQUIRE_KEY, False)),
        "cors_origins": tuple(str(o).rstrip("/") for o in origins if str(o).strip()),
        "keep_conversations": bool(prefs.get(PREF_KEEP_CONVERSATIONS, False)),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return ServeConfig(**values)


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
