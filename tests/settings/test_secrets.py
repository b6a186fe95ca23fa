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


def _fake_backend(name: str, module: str, base: type = keyring.backend.KeyringBackend) -> type:
    """A backend class named and placed like a real one (nothing is installed)."""

    def set_password(self, service, username, password):  # pragma: no cover
        raise AssertionError(f"{name} must not be given a key")

    cls = type(
        name,
        (base,),
        {
            "priority": 1,
            "get_password": lambda self, service, username: None,
            "set_password": set_password,
            "delete_password": lambda self, service, username: None,
        },
    )
    cls.__module__ = module
    return cls


def _chainer_over(*backends: object) -> keyring.backend.KeyringBackend:
    import keyring.backends.chainer

    class Chainer(keyring.backends.chainer.ChainerBackend):
        pass

    Chainer.backends = list(backends)  # type: ignore[misc]  # what keyring would discover
    Chainer.__module__ = "keyring.backends.chainer"
    return Chainer()


SECRET_SERVICE = _fake_backend("Keyring", "keyring.backends.SecretService")
PLAINTEXT = _fake_backend("PlaintextKeyring", "keyrings.alt.file")
ENCRYPTED = _fake_backend("EncryptedKeyring", "keyrings.alt.file")


@pytest.mark.parametrize("bad", [PLAINTEXT, ENCRYPTED], ids=lambda c: c.__name__)
def test_a_chainer_holding_a_plaintext_backend_is_refused(bad: type) -> None:
    chainer = _chainer_over(SECRET_SERVICE(), bad())
    assert chainer.priority > 0  # keyring itself would pick it
    store = SecretStore(backend=chainer)
    assert not store.available
    assert f"keyrings.alt.file.{bad.__name__}" in store.backend_name
    assert f"keyrings.alt.file.{bad.__name__}" in store.unavailable_message()
    with pytest.raises(SecretsUnavailable):
        store.set("r1", "sk-should-not-land-on-disk")
    assert store.get("r1") is None  # nothing read through the chainer either


def test_a_copy_of_a_file_backend_is_refused_wherever_it_is_defined() -> None:
    subclass = _fake_backend("MyKeys", "somewhere.else", base=PLAINTEXT)
    assert not SecretStore(backend=subclass()).available
    renamed = _fake_backend("PlaintextKeyring", "vendored.keyrings")
    assert not SecretStore(backend=renamed()).available
    assert not SecretStore(backend=_chainer_over(SECRET_SERVICE(), subclass())).available


def test_a_chainer_of_real_keyrings_only_is_accepted() -> None:
    other = _fake_backend("Keyring", "keyring.backends.kwallet")
    store = SecretStore(backend=_chainer_over(SECRET_SERVICE(), other()))
    assert store.available
    assert "chaining keyring.backends.SecretService.Keyring" in store.backend_name
    assert not SecretStore(backend=_chainer_over()).available  # chains nothing


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
