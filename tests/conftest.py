"""Shared fixtures: a fresh SIMI_HOME per test and a real OS keyring (Secret Service)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")

from tests.helpers import secret_service

if TYPE_CHECKING:
    from desktop.store.db import Database

_SESSION: secret_service.SecretServiceSession | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Start gnome-keyring on a private D-Bus before anything imports keyring."""
    global _SESSION
    if os.environ.get("SIMI_TEST_NO_KEYRING"):
        return
    if not secret_service.available():
        return
    _SESSION = secret_service.start()
    os.environ.update(_SESSION.env)
    # Name the backend: keyring's own pick can be a ChainerBackend when the service is slow to
    # answer its probe on a loaded machine (seen in CI); the tests are about Secret Service.
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.SecretService.Keyring"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION is not None:
        _SESSION.stop()


@pytest.fixture(scope="session")
def secret_service_env() -> dict[str, str]:
    """The environment of the real Secret Service; skips where none could start."""
    if _SESSION is None:
        pytest.fail(
            "No Secret Service: install gnome-keyring and dbus (the README's test command does)."
        )
    return dict(_SESSION.env)


@pytest.fixture(autouse=True)
def simi_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "simi-home"
    monkeypatch.setenv("SIMI_HOME", str(home))
    yield home


@pytest.fixture
def services(simi_home: Path) -> Iterator[object]:
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    svc = Services.open(AppPaths.from_env())
    yield svc
    svc.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A fresh SQLite file with SIMI's schema (``simi.db`` in the test's folder), closed after."""
    from desktop.store.db import open_database

    database = open_database(tmp_path / "simi.db")
    yield database
    database.conn.close()


@pytest.fixture
def cli_env(simi_home: Path) -> dict[str, str]:
    """Environment for running `python -m desktop` in a subprocess on this test's SIMI_HOME."""
    env = dict(os.environ)
    env["SIMI_HOME"] = str(simi_home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable


THROWAWAY_KIND = "throwaway-test-kind"


@pytest.fixture
def throwaway_kind() -> Iterator[tuple[object, list[object]]]:
    """A provider kind registered for one test (and unregistered after): OpenAI's wire
    protocol, its own label, colour, default address and hints. Yields the kind and the list
    of ``ProviderSpec`` its factory was called with."""
    from desktop.chat.kinds import ProviderKind, ProviderSpec, register, unregister
    from desktop.llm.openai_compat import OpenAICompatProvider

    built: list[object] = []

    def factory(spec: ProviderSpec) -> OpenAICompatProvider:
        built.append(spec)
        return OpenAICompatProvider(spec.base_url, spec.api_key, label=spec.label)

    kind = register(
        ProviderKind(
            THROWAWAY_KIND,
            "Throwaway service",
            factory,
            needs_key=True,
            default_base_url="https://throwaway.example/v1",
            badge_color="#123456",
            model_hint="e.g. throwaway-1",
        )
    )
    try:
        yield kind, built
    finally:
        unregister(THROWAWAY_KIND)


def _pin_xdist_worker() -> None:
    """Each pytest-xdist worker (``-n 2``) on its own core, with whatever it starts (llama.cpp
    workers, CLI subprocesses, MCP servers): llama.cpp sizes its threads from the affinity
    (``desktop.local.loading.usable_cpus``), so two workers never run more llama.cpp threads
    than cores (threads that spin against each other decode many times slower)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if len(cpus) < 2 or count < 2:
        return
    os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


_pin_xdist_worker()
