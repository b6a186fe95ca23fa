"""The store's error: the database or the app folder cannot be used."""

from __future__ import annotations

from desktop.errors import UserError


class StoreUnavailable(UserError):
    """The database or app folder cannot be used. ``path`` names the file or folder;
    ``corrupt``: the file is damaged (it can be moved aside to start fresh)."""

    kind = "store_unavailable"

    def __init__(self, user_message: str, *, path: str | None = None, corrupt: bool = False):
        super().__init__(user_message)
        self.path = path
        self.corrupt = corrupt
