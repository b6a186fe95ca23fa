"""``HubService``: what ``Services`` offers of the hub: a client with the token from the
keyring (else ``HF_TOKEN``, huggingface_hub's variable, so the CLI works in a shell that has
one), the downloader for the models folder. Nothing here contacts the hub on its own."""

from __future__ import annotations

import logging
import os

from desktop.hub.client import TOKEN_REF, HubClient, hub_endpoint
from desktop.hub.downloads import Downloader
from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SECRETS_SEEN, SecretStore, SecretsUnavailable

log = logging.getLogger(__name__)


class HubService:
    downloads: Downloader

    def __init__(self, paths: AppPaths, secrets: SecretStore) -> None:
        self.paths = paths
        self.secrets = secrets
        self.downloads = Downloader(paths.models_dir, self.client)

    @property
    def endpoint(self) -> str:
        return hub_endpoint()

    def token(self) -> str | None:
        """The saved token, else ``HF_TOKEN``; None when neither (reads the keyring)."""
        try:
            saved = self.secrets.get(TOKEN_REF)
        except SecretsUnavailable as exc:
            log.warning("hub token not read from the keyring: %s", exc)
            saved = None
        if saved:
            return saved
        env = os.environ.get("HF_TOKEN", "").strip()
        if env:
            SECRETS_SEEN.add(env)
        return env or None

    def client(self) -> HubClient:
        """A client for ``hub_endpoint()`` with the saved token (reads the keyring: call it off
        the GUI thread)."""
        return HubClient(hub_endpoint(), self.token())

    def set_token(self, token: str | None) -> None:
        """Save (or, with None/empty, delete) the access token in the keyring."""
        value = (token or "").strip()
        if value:
            self.secrets.set(TOKEN_REF, value)
        else:
            self.secrets.delete(TOKEN_REF)

    def has_token(self) -> bool:
        try:
            return bool(self.secrets.get(TOKEN_REF))
        except SecretsUnavailable:
            return False
