""" "Test connection": one model-list call, turned into a report a person can read."""

from __future__ import annotations

import time
from dataclasses import dataclass

from desktop.errors import UserError, ValidationError
from desktop.llm.errors import AuthError, ProviderUnavailable
from desktop.llm.provider import Provider


@dataclass(frozen=True, slots=True)
class ConnectionReport:
    """``reachable``: the server answered HTTP at all; ``auth_ok``: it accepted the key (None
    when unknown, because it failed before saying); ``latency_ms``: the whole model-list call;
    ``message``: plain words for the editor, naming the endpoint."""

    reachable: bool
    auth_ok: bool | None
    latency_ms: float | None
    model_count: int | None
    message: str
    models: tuple[str, ...] = ()
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.reachable and bool(self.auth_ok)


async def test_connection(provider: Provider, *, label: str) -> ConnectionReport:
    """List the endpoint's models and say what happened. Never raises ``UserError``."""
    started = time.perf_counter()
    try:
        models = await provider.list_models()
    except AuthError as exc:
        return ConnectionReport(True, False, _ms(started), None, exc.user_message, (), exc.kind)
    except (ProviderUnavailable, ValidationError) as exc:
        # Transport failures are raised from httpx errors; an HTTP 5xx means it did answer.
        import httpx  # loaded by then: the provider has made its request

        answered = isinstance(exc, ProviderUnavailable) and not isinstance(
            exc.__cause__, httpx.TransportError
        )
        latency = _ms(started) if answered else None
        return ConnectionReport(answered, None, latency, None, exc.user_message, (), exc.kind)
    except UserError as exc:
        return ConnectionReport(True, None, _ms(started), None, exc.user_message, (), exc.kind)
    latency_ms = _ms(started)
    count = len(models)
    if count:
        message = f"Connected to {label} in {latency_ms:.0f} ms; {count} model(s) available."
    else:
        message = (
            f"Connected to {label} in {latency_ms:.0f} ms, but it lists no models. Load or pull "
            "a model on the server, or type the model name by hand."
        )
    return ConnectionReport(True, True, latency_ms, count, message, tuple(models))


test_connection.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
