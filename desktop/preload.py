"""What the window loads ahead of use, on a worker thread, once it has painted.

The window's start imports only what its first screen needs (``tests/test_startup_imports.py``
keeps it so). The rest — the HTTP stack of the remote providers, the trust store, the keyring's
backend, the API server, PDF and image decoding — would otherwise load on the GUI thread at
its first use: the first remote Send imported httpx/httpcore/anyio there (~1 s on a loaded
machine). ``warm_up`` loads them in that order of likely need on a worker thread
(``run_blocking``), one step at a time, after the first paint. A step that fails is logged and
skipped: its first real use raises the same error where the person sees it.

Loading a module takes Python's import lock for that module only, so the GUI thread, should it
need one of them before the warm-up reaches it, imports it itself or waits for the same import
to finish: never worse than without the warm-up.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Iterable
from functools import partial

from desktop.settings.secrets import SecretStore

log = logging.getLogger("simi.preload")

# In order of likely need: a remote reply, the keyring (a remote agent's key), the window's
# other pages (their modules: they are built when first shown or in a quiet moment), the API
# server and the Models' hub, attachments.
HTTP_MODULES: tuple[str, ...] = (
    "httpx",
    "desktop.llm.transport",
    # what httpx itself imports at the first connection (its transport, HTTP/1.1, anyio's
    # asyncio backend): ~60 modules the first remote Send loaded on the GUI thread
    "httpcore",
    "httpcore._backends.anyio",
    "anyio._backends._asyncio",
    "h11",
)
LATER_MODULES: tuple[str, ...] = (
    "desktop.llm.openai_compat",
    "desktop.llm.anthropic",
    "desktop.llm.gemini",
    "desktop.llm.connection",
    "desktop.serve.server",
    "desktop.hub.token_auth",
    "PIL.Image",
    "pypdf",
)


def _tls() -> None:
    from desktop.llm.transport import tls_context

    tls_context(None)  # the default trust store, cached: 20-40 ms on the first client


def imports(names: Iterable[str]) -> list[tuple[str, Callable[[], object]]]:
    """A step that imports each module of ``names``."""
    return [(name, partial(importlib.import_module, name)) for name in names]


def steps(
    secrets: SecretStore | None,
    pages: Iterable[str] = (),
    more: Iterable[tuple[str, Callable[[], object]]] = (),
) -> list[tuple[str, Callable[[], object]]]:
    """The warm-up's plan; ``pages``: the modules of the window's pages built after start
    (a page's first show then builds its widgets only: the dashboard's import was 9 ms of
    the 34 ms its first show held the window); ``more``: the window's own steps after them
    (code highlighting's lexers)."""
    out = imports(HTTP_MODULES)
    out.append(("the default trust store", _tls))
    if secrets is not None:
        out.append(("the keyring backend", secrets.choose_backend))
    return out + imports(pages) + list(more) + imports(LATER_MODULES)


def warm_up(plan: Iterable[tuple[str, Callable[[], object]]]) -> dict[str, float]:
    """Run each step (on a worker thread); returns how long each took, in ms."""
    took: dict[str, float] = {}
    for name, step in plan:
        started = time.perf_counter()
        try:
            step()
        except Exception as exc:  # its first real use reports it where it matters
            log.warning("preload: %s failed: %s", name, exc)
            continue
        took[name] = round((time.perf_counter() - started) * 1000, 1)
    log.info("preloaded after first paint: %s", took)
    return took
