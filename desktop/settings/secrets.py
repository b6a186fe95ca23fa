"""API keys, kept only in the OS keyring (Secret Service, Keychain, Windows Credential Locker).

One keyring entry per endpoint: service ``simi-multi``, username ``endpoint:<key_ref>``, where
``key_ref`` is a random id stored with the endpoint (entries never collide between databases).
Where no real keyring backend is available the store says so (``available`` is False) and,
only if the person agrees, keeps keys in memory for this run. Nothing is ever written to disk
by us, and a plaintext/file backend (keyrings.alt, keyrings.cryptfile) is refused rather than
used silently, also when it sits inside a chainer (keyring's ``ChainerBackend``, which would
hand a key to the first backend that takes it).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from desktop.errors import UserError

if TYPE_CHECKING:  # keyring loads with the first use of a key (see SecretStore._backend)
    import keyring.backend

log = logging.getLogger("simi.secrets")

SERVICE = "simi-multi"

# Backends that store secrets in plain (or home-made encrypted) files: never accepted.
_REFUSED_MODULE_PREFIXES = ("keyrings.alt", "keyrings.cryptfile", "keyring.backends.null")
# The file backends by class name too, wherever a copy of one is defined.
_REFUSED_CLASS_NAMES = frozenset({"PlaintextKeyring", "EncryptedKeyring", "CryptFileKeyring"})


class SecretsUnavailable(UserError):
    """No keyring to keep a key in (and no consent to memory-only keys), or the keyring
    refused a read or write."""

    kind = "secrets_unavailable"


class _SecretRegistry:
    """Every secret value seen this run, so the log filter can blank it out anywhere."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def add(self, value: str) -> None:
        if value and len(value) >= 4:
            with self._lock:
                self._values.add(value)

    def redact(self, text: str) -> str:
        with self._lock:
            values = sorted(self._values, key=len, reverse=True)
        for value in values:
            if value in text:
                text = text.replace(value, "[redacted]")
        return text


SECRETS_SEEN = _SecretRegistry()


class RedactingFilter(logging.Filter):
    """Blanks every known secret out of all that a handler writes of a record, with
    ``[redacted]``: the message (``msg`` with its ``args``), the traceback (``exc_info``,
    formatted here into ``exc_text``, which formatters reuse) and ``stack_info``.

    Handlers share the record, so one with this filter redacts it for those that come after
    it too; put it on every handler that writes anywhere (``setup_logging`` does).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not lose the record (nor leak its args)
            message = f"{record.msg!s} (arguments: {record.args!r})"
            record.args = None
            record.msg = message
        redacted = SECRETS_SEEN.redact(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            text = SECRETS_SEEN.redact(record.exc_text)
            if text != record.exc_text:
                record.exc_text = text
                record.exc_info = None  # nothing may format the raw traceback again
        if record.stack_info:
            record.stack_info = SECRETS_SEEN.redact(record.stack_info)
        return True


def _dotted(backend: object) -> str:
    return f"{type(backend).__module__}.{type(backend).__name__}"


def _chained(backend: object) -> list[object]:
    import keyring.backends.chainer

    if not isinstance(backend, keyring.backends.chainer.ChainerBackend):
        return []
    try:
        return list(backend.backends)
    except Exception:
        return []


def _is_real(backend: object) -> bool:
    """A backend of the OS keyring: no class it is built from comes from a plaintext/file
    package (``keyrings.alt``, ``keyrings.cryptfile``), the null or the fail backend, and it
    has a positive priority. A chainer is never real by itself (see ``available``)."""
    import keyring.backends.chainer

    if isinstance(backend, keyring.backends.chainer.ChainerBackend):
        return False
    for cls in type(backend).__mro__:
        module = cls.__module__ or ""
        if module.startswith(_REFUSED_MODULE_PREFIXES) or module.startswith(
            "keyring.backends.fail"
        ):
            return False
        if cls.__name__ in _REFUSED_CLASS_NAMES:
            return False
    try:
        return float(backend.priority) > 0  # type: ignore[attr-defined]
    except Exception:
        return False


def redact(text: str) -> str:
    return SECRETS_SEEN.redact(text)


def endpoint_username(key_ref: str) -> str:
    return f"endpoint:{key_ref}"


class SecretStore:
    """Keys by endpoint id, in the OS keyring or (by consent) in memory for this run."""

    def __init__(self, backend: keyring.backend.KeyringBackend | None = None) -> None:
        # keyring picks its backend by importing and probing each one it knows (D-Bus for
        # Secret Service): ~90 ms, so it is done on first use, not when the window opens
        # (desktop.preload does it on a background thread after the first paint).
        self._chosen = backend
        self._choosing = threading.Lock()
        self._memory: dict[str, str] = {}
        self._memory_allowed = False

    @property
    def _backend(self) -> keyring.backend.KeyringBackend:
        if self._chosen is None:
            with self._choosing:
                if self._chosen is None:
                    import keyring

                    self._chosen = keyring.get_keyring()
        return self._chosen

    def choose_backend(self) -> None:
        """Pick the keyring backend now (a background thread's warm-up)."""
        _ = self._backend

    @property
    def backend_name(self) -> str:
        """The backend's dotted name; a chainer's with the backends it chains."""
        name = _dotted(self._backend)
        inner = _chained(self._backend)
        if inner:
            name += " (chaining " + ", ".join(_dotted(b) for b in inner) + ")"
        return name

    @property
    def available(self) -> bool:
        """True when a real OS keyring backend is in use: not a plaintext/file or null one,
        and not a chainer that would hand a key to one of those."""
        import keyring.backends.chainer

        if isinstance(self._backend, keyring.backends.chainer.ChainerBackend):
            try:
                inner = list(self._backend.backends)
            except Exception:
                return False
            return bool(inner) and all(_is_real(b) for b in inner)
        return _is_real(self._backend)

    @property
    def memory_only(self) -> bool:
        return not self.available and self._memory_allowed

    def unavailable_message(self) -> str:
        return (
            "No system keyring is available (looked for Secret Service, macOS Keychain or "
            "Windows Credential Locker; found " + self.backend_name + "). SIMI Multi never "
            "writes API keys to disk, so keys can be kept in memory for this run only. "
            "To keep keys between runs on Linux, install and unlock gnome-keyring or KeePassXC "
            "(Secret Service)."
        )

    def allow_memory_fallback(self) -> None:
        """The person agreed to keep keys in memory for this run only."""
        self._memory_allowed = True

    def _require(self) -> None:
        if not self.available and not self._memory_allowed:
            raise SecretsUnavailable(self.unavailable_message())

    def get(self, key_ref: str) -> str | None:
        name = endpoint_username(key_ref)
        if not self.available:
            value = self._memory.get(name)
        else:
            import keyring.errors  # loaded with the backend

            try:
                value = self._backend.get_password(SERVICE, name)
            except keyring.errors.KeyringError as exc:
                raise SecretsUnavailable(
                    f"The system keyring could not be read ({type(exc).__name__}). Unlock it "
                    "and try again."
                ) from exc
        if value:
            SECRETS_SEEN.add(value)
        return value

    def set(self, key_ref: str, value: str) -> None:
        self._require()
        SECRETS_SEEN.add(value)
        name = endpoint_username(key_ref)
        if not self.available:
            self._memory[name] = value
            return
        import keyring.errors  # loaded with the backend

        try:
            self._backend.set_password(SERVICE, name, value)
        except keyring.errors.KeyringError as exc:
            raise SecretsUnavailable(
                f"The system keyring refused to store the key ({type(exc).__name__}). Unlock "
                "it and try again."
            ) from exc

    def delete(self, key_ref: str) -> None:
        name = endpoint_username(key_ref)
        self._memory.pop(name, None)
        if not self.available:
            return
        import keyring.errors  # loaded with the backend

        try:
            self._backend.delete_password(SERVICE, name)
        except keyring.errors.PasswordDeleteError:
            pass
        except keyring.errors.KeyringError as exc:
            log.warning("could not delete key %s: %s", name, type(exc).__name__)
