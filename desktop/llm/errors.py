"""What a model call can fail with: typed ``UserError`` subclasses with finished text.

``kind`` names the failure in stats rows; ``retryable`` says whether Retry may help (the
retrying wrapper and the UI read it); ``auto_retry`` (where it is False) says that Retry may
help but should be the person's choice, not an automatic one (``retries_automatically``).
Their base, ``UserError``, lives in ``desktop.errors`` with ``ValidationError``: the errors of
every other layer build on it too.
"""

from __future__ import annotations

from desktop.errors import UserError

__all__ = [
    "AuthError",
    "BadResponse",
    "ContextTooLong",
    "ImagesNotSupported",
    "LocalModelError",
    "ModelNotFound",
    "ProviderUnavailable",
    "RateLimited",
    "Stalled",
    "retries_automatically",
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
    auto_retry = True


class Stalled(ProviderUnavailable):
    """The server went silent for longer than the stall timeout. Retry may help, but not
    automatically: before the first token the server may still be evaluating a long prompt,
    and a retry would start that over (and make the person wait the timeout again, silently).
    """

    kind = "stalled"
    auto_retry = False


class BadResponse(UserError):
    kind = "bad_response"


class ImagesNotSupported(BadResponse):
    """The message had images and the model (or the server it runs on) cannot read them: a
    text-only model, a llama.cpp server started without its vision projector. Not retryable;
    the person picks a vision model or removes the image."""


class LocalModelError(UserError):
    kind = "local_model"


def retries_automatically(error: UserError) -> bool:
    """Whether the retrying wrapper may repeat a call that failed with ``error`` on its own:
    it must be retryable, and not one the person should decide on (a stall, a gateway
    timeout)."""
    return error.retryable and getattr(error, "auto_retry", True)
