"""What a model call can fail with: typed ``UserError`` subclasses with finished text.

``kind`` names the failure in stats rows; ``retryable`` says whether Retry may help (the
retrying wrapper and the UI read it). Their base, ``UserError``, lives in ``desktop.errors``
with ``ValidationError``: the errors of every other layer build on it too.
"""

from __future__ import annotations

from desktop.errors import UserError

__all__ = [
    "AuthError",
    "BadResponse",
    "ContextTooLong",
    "LocalModelError",
    "ModelNotFound",
    "ProviderUnavailable",
    "RateLimited",
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
