"""Typed errors that carry finished, user-facing text.

Translate once, at the boundary (``raise ... from exc``). Anything that is not a ``UserError``
is a bug.
"""

from __future__ import annotations


class UserError(Exception):
    """An error a person can act on. ``user_message`` is shown as is."""

    kind = "error"
    retryable = False

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


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


class SecretsUnavailable(UserError):
    kind = "secrets_unavailable"


class StoreUnavailable(UserError):
    """The database or app folder cannot be used. ``path`` names the file or folder."""

    kind = "store_unavailable"

    def __init__(self, user_message: str, *, path: str | None = None, corrupt: bool = False):
        super().__init__(user_message)
        self.path = path
        self.corrupt = corrupt


class ValidationError(UserError):
    """Invalid fields; ``fields`` maps a field name to a message a person understands."""

    kind = "validation"

    def __init__(self, fields: dict[str, str]) -> None:
        text = "; ".join(fields.values())
        super().__init__(text)
        self.fields = dict(fields)
