"""The attachment errors a person sees, on the chip of the file that failed."""

from __future__ import annotations

from desktop.errors import UserError


class AttachError(UserError):
    """A file that cannot be attached (or sent): missing, too large, not what it claims,
    damaged, password-protected... ``user_message`` says which and what to do."""

    kind = "attachment"


class AttachCancelled(AttachError):
    """Reading a file was cancelled (its chip was removed while it was being read): nothing
    to show, the chip is gone."""


def short_reason(exc: BaseException) -> str:
    """An exception's words on one line, at most 120 characters, for inside a message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."
