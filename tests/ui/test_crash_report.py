"""A bug's report (log line, dialog details, "Copy debug info") never carries a key."""

from __future__ import annotations

import logging
from typing import Any

import keyring.backends.fail

from desktop.settings.secrets import SecretStore
from desktop.ui.shell.crash import CrashReporter, debug_info

KEY = "sk-crash-report-5d1e9a"


def _bug_with_key() -> BaseException:
    try:
        headers = {"Authorization": f"Bearer {KEY}"}
        raise RuntimeError(f"unexpected response for request with headers {headers}")
    except RuntimeError as exc:
        return exc


def test_debug_info_and_crash_log_redact_known_keys(qapp: Any, caplog: Any) -> None:
    store = SecretStore(backend=keyring.backends.fail.Keyring())
    store.allow_memory_fallback()
    store.set("crash-test", KEY)  # the app has seen this key this run

    exc = _bug_with_key()
    info = debug_info("".join(__import__("traceback").format_exception(exc)))
    assert KEY not in info and "[redacted]" in info and "SIMI Multi" in info

    reporter = CrashReporter()
    reporter._showing = True  # the dialog path is modal; the log line is what we check here
    with caplog.at_level(logging.ERROR, logger="simi.crash"):
        reporter.excepthook(type(exc), exc, exc.__traceback__)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "unexpected error" in text and KEY not in text and "[redacted]" in text
