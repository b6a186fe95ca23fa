"""The errors a person sees, importable from every layer (this module imports nothing of ours).

``UserError`` carries finished, user-facing text; every error shown to a person is one.
Translate once, at the boundary (``raise ... from exc``). Anything that is not a ``UserError``
is a bug. Each layer keeps its own subclasses next to what raises them: provider errors in
``desktop.llm.errors``, ``StoreUnavailable`` in ``desktop.store.errors``, ``SecretsUnavailable``
in ``desktop.settings.secrets``.
"""

from __future__ import annotations


class UserError(Exception):
    """An error a person can act on. ``user_message`` is shown as is."""

    kind = "error"
    retryable = False

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class ValidationError(UserError):
    """Invalid fields; ``fields`` maps a field name to a message a person understands.

    Raised wherever input is checked: agent fields (``desktop.chat``) and endpoint settings a
    provider cannot use (``desktop.llm``), so it lives here, below both.
    """

    kind = "validation"

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__("; ".join(fields.values()))
        self.fields = dict(fields)
