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


def test_the_log_file_never_holds_a_key_not_even_in_tracebacks(tmp_path, monkeypatch) -> None:
    import logging

    from desktop.chat.services import setup_logging
    from desktop.settings.paths import AppPaths
    from desktop.settings.secrets import RedactingFilter

    simi_logger = logging.getLogger("simi")
    monkeypatch.setattr(simi_logger, "handlers", [])  # this test's own log file
    monkeypatch.setattr(simi_logger, "level", simi_logger.level)
    paths = AppPaths.from_env({"SIMI_HOME": str(tmp_path / "home")})
    paths.ensure()
    setup_logging(paths)
    key = "sk-traceback-leak-5e1d9c"
    store = SecretStore(backend=keyring.backends.fail.Keyring())
    store.allow_memory_fallback()
    store.set("r9", key)  # known to the redaction from now on

    log = logging.getLogger("simi.test")

    def call_server() -> None:
        try:
            raise KeyError(f"header Authorization: Bearer {key}")
        except KeyError as inner:
            raise RuntimeError(f"the server refused {key}") from inner

    try:
        call_server()
    except RuntimeError:
        log.exception("turn failed")  # the message is clean; the traceback is not
    log.warning("plain %s and %(x)s", key, {"x": 1})  # a bad format string with a key in args
    log.error("args %s", {"key": key})
    log.error("stack", stack_info=True)  # its text comes through the filter too
    record = logging.LogRecord("simi.t", logging.ERROR, __file__, 1, "m", None, None)
    record.stack_info = f"Stack (most recent call last):\n  use({key!r})"
    RedactingFilter().filter(record)
    assert key not in record.stack_info
    for handler in simi_logger.handlers:
        handler.flush()
        handler.close()
    text = paths.log_path.read_text(encoding="utf-8")
    assert "turn failed" in text and "Traceback (most recent call last)" in text
    assert "RuntimeError: the server refused [redacted]" in text
    assert "KeyError: 'header Authorization: Bearer [redacted]'" in text
    assert "plain" in text and "args {'key': '[redacted]'}" in text
    assert key not in text and key[3:] not in text
