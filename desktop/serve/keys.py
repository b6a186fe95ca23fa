"""The API server's keys: made here, kept in the OS keyring, checked by their hash.

A key is ``simi-`` and 43 URL-safe characters (256 random bits). SQLite keeps only its SHA-256
(``store/serving.py``), so a request is checked without the keyring (which may be locked, or
slow) and a copy of the database gives nobody a key. The key itself goes to the keyring, under
the key row's id, so the window can show it again to copy; revoking a key removes both.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from desktop.errors import ValidationError
from desktop.settings.secrets import SecretStore
from desktop.store.serving import ApiKeyRecord, ApiKeyStore

KEY_PREFIX = "simi-"
NAME_MAX = 60


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _ref(record: ApiKeyRecord) -> str:
    return f"api-server-key-{record.id}"


class ApiKeys:
    def __init__(self, store: ApiKeyStore, secrets_store: SecretStore) -> None:
        self.store = store
        self._secrets = secrets_store

    def list(self) -> list[ApiKeyRecord]:
        return self.store.list()

    def create(
        self, name: str, agent_ids: tuple[int, ...] | None = None
    ) -> tuple[ApiKeyRecord, str]:
        """A new key named ``name`` (limited to ``agent_ids``; None: every served agent):
        its record and the key, once. Raises ``ValidationError`` for a bad or taken name,
        ``SecretsUnavailable`` when the keyring refuses it (then nothing is kept)."""
        name = name.strip()
        if not name:
            raise ValidationError({"name": "Give the key a name, such as the app that uses it."})
        if len(name) > NAME_MAX:
            raise ValidationError({"name": f"A key's name has at most {NAME_MAX} characters."})
        if self.store.by_name(name) is not None:
            raise ValidationError({"name": f"There is already a key named “{name}”."})
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        record = self.store.add(name, key_hash(key), f"{key[:9]}…{key[-4:]}", agent_ids)
        try:
            self._secrets.set(_ref(record), key)
        except BaseException:
            self.store.remove(name)
            raise
        return record, key

    def verify(self, key: str) -> ApiKeyRecord | None:
        """The key's record, or None for a key this server never made (or revoked)."""
        if not key.startswith(KEY_PREFIX):
            return None
        digest = key_hash(key)
        record = self.store.by_hash(digest)
        if record is None or not hmac.compare_digest(record.key_hash, digest):
            return None
        return record

    def reveal(self, name: str) -> str | None:
        """The key itself, from the keyring (None: gone, or the record is)."""
        record = self.store.by_name(name)
        return self._secrets.get(_ref(record)) if record is not None else None

    def revoke(self, name: str) -> bool:
        """Remove the key: it stops working at once. False: there is no such key."""
        record = self.store.by_name(name)
        if record is None:
            return False
        self.store.remove(name)
        self._secrets.delete(_ref(record))
        return True

    def any(self) -> bool:
        return bool(self.store.list())
