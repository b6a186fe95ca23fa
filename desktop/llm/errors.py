"""What a model call can fail with: typed ``UserError`` subclasses with finished text.

``kind`` names the failure in stats rows; ``retryable`` says whether Retry may help (the
retrying wrapper and the UI read it). ``UserError`` and ``ValidationError`` live in
``desktop.errors`` and are re-exported here for the modules that import them from this one.
"""

from __future__ import annotations

from typing import Any

from desktop.errors import UserError, ValidationError

__all__ = [
    "AuthError",
    "BadResponse",
    "ContextTooLong",
    "LocalModelError",
    "ModelNotFound",
    "ProviderUnavailable",
    "RateLimited",
    "UserError",
    "ValidationError",
]


class AuthError(UserError):
    kind = "auth"


class RateLimited(UserError):
    kind = "rate_limited"
    retryable = True

    def __init__(self, user_message: str, retry_after: float | None = None) -> None:
        super().__init__(user_message)
        self.retry_after = retry_after


class ContextTooLong(UserError):
    kind = "context_too_long"

    def __init__(
        self, user_message: str, *, needed_tokens: int | None = None, n_ctx: int | None = None
    ) -> None:
        super().__init__(user_message)
        self.needed_tokens = needed_tokens
        self.n_ctx = n_ctx


class ModelNotFound(UserError):
    kind = "model_not_found"


class ProviderUnavailable(UserError):
    kind = "unavailable"
    retryable = True


class BadResponse(UserError):
    kind = "bad_response"


class LocalModelError(UserError):
    kind = "local_model"


def __getattr__(name: str) -> Any:
    """``StoreUnavailable`` moved to ``desktop.store.errors``; resolved lazily for callers not
    yet switched, so this layer never imports the store."""
    if name == "StoreUnavailable":
        from desktop.store.errors import StoreUnavailable

        return StoreUnavailable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
