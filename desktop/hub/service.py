"""``HubService``: what ``Services`` offers of the hub (contract): a client with the token
from the keyring, the downloader for the models folder."""

from __future__ import annotations

from desktop.hub.client import HubClient
from desktop.hub.downloads import Downloader
from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SecretStore


class HubService:
    downloads: Downloader

    def __init__(self, paths: AppPaths, secrets: SecretStore) -> None:
        raise NotImplementedError

    def client(self) -> HubClient:
        """A client for ``hub_endpoint()`` with the saved token (reads the keyring: call it off
        the GUI thread)."""
        raise NotImplementedError

    def set_token(self, token: str | None) -> None:
        """Save (or, with None/empty, delete) the access token in the keyring."""
        raise NotImplementedError

    def has_token(self) -> bool:
        raise NotImplementedError
