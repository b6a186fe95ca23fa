import keyring
import keyring.backends.fail
import pytest

from desktop.settings.secrets import SERVICE, SecretStore, SecretsUnavailable, redact


def test_keys_round_trip_through_the_real_secret_service(secret_service_env: dict) -> None:
    store = SecretStore()
    assert store.available, store.backend_name
    assert "SecretService" in store.backend_name
    store.set("ref41", "sk-test-roundtrip-123")
    assert keyring.get_password(SERVICE, "endpoint:ref41") == "sk-test-roundtrip-123"
    assert store.get("ref41") == "sk-test-roundtrip-123"
    store.delete("ref41")
    assert store.get("ref41") is None


def test_without_keyring_keys_are_refused_until_memory_is_allowed() -> None:
    store = SecretStore(backend=keyring.backends.fail.Keyring())
    assert not store.available
    with pytest.raises(SecretsUnavailable) as info:
        store.set("r1", "sk-memory-only-999")
    assert "keyring" in info.value.user_message.lower()
    store.allow_memory_fallback()
    store.set("r1", "sk-memory-only-999")
    assert store.get("r1") == "sk-memory-only-999"
    assert store.memory_only


def test_plaintext_backends_are_never_used() -> None:
    class PlaintextKeyring(keyring.backend.KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def get_password(self, service, username):  # pragma: no cover
            return None

        def set_password(self, service, username, password):  # pragma: no cover
            raise AssertionError("must not be called")

        def delete_password(self, service, username):  # pragma: no cover
            pass

    PlaintextKeyring.__module__ = "keyrings.alt.file"
    store = SecretStore(backend=PlaintextKeyring())
    assert not store.available
    with pytest.raises(SecretsUnavailable):
        store.set("r1", "sk-should-not-land-on-disk")


def test_known_secrets_are_redacted_from_text() -> None:
    store = SecretStore(backend=keyring.backends.fail.Keyring())
    store.allow_memory_fallback()
    store.set("r7", "sk-redact-me-777")
    assert redact("Authorization: Bearer sk-redact-me-777") == "Authorization: Bearer [redacted]"
