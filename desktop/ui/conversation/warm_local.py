"""Local replies that start at once: the llama.cpp worker started after the window's first
paint, the model loaded when the person focuses a composer or starts typing.

Setting "Keep local models ready" (``PREF_KEEP_READY``, on by default). Never for a model whose
memory estimate does not fit what the machine has available now (``fits_now``), and never
while a worker answers (``LocalRuntime.load`` takes only an idle worker). Loading is what Send
would do anyway, a little earlier; a failure is left for Send to report on its message.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QWidget

from desktop.chat.model_library import fits_now
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.first_paint import after_first_paint

log = logging.getLogger("simi.ui.warm")

PREF_KEEP_READY = "keep_local_models_ready"


def keep_ready(prefs: Any) -> bool:
    return bool(prefs.get(PREF_KEEP_READY, True))


class LocalWarmer(QObject):
    """Watches the window for its first paint and for a composer getting focus or text."""

    def __init__(self, services: Services, window: QWidget) -> None:
        super().__init__(window)
        self._services = services
        self._window = window
        self._painted = False
        self._armed: set[int] = set()  # composers whose first keystroke would load
        self.tasks: list[Any] = []  # what it started (tests wait on them)

    def install(self, app: QApplication) -> None:
        after_first_paint(self._window, self._on_first_paint)
        app.focusChanged.connect(self._focus_changed)

    # first paint -----------------------------------------------------------------------------
    def _on_first_paint(self) -> None:
        self._painted = True
        self.first_paint()

    def first_paint(self) -> None:
        """Start the worker (no model) when the agent in view is local; arm the focused
        composer (it may have had focus since start-up) to load on its first keystroke."""
        if not keep_ready(self._services.prefs):
            return
        focused = QApplication.focusWidget()
        if _agent_of(focused) is not None or self._any_local_agent():
            self.tasks.append(start(self._services.local.prestart(), name="warm: prestart"))
        if focused is not None and _agent_of(focused) is not None:
            self._arm(focused)

    def _any_local_agent(self) -> bool:
        from desktop.ui.kit.widgets import ComposerEdit

        return any(_agent_of(c) is not None for c in self._window.findChildren(ComposerEdit))

    # composer focus / typing -----------------------------------------------------------------
    def _focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        if self._painted and new is not None and _agent_of(new) is not None:
            self.warm(new)

    def _arm(self, composer: QWidget) -> None:
        if id(composer) in self._armed:
            return
        self._armed.add(id(composer))

        def typed() -> None:
            composer.textChanged.disconnect(typed)  # type: ignore[attr-defined]
            self._armed.discard(id(composer))
            self.warm(composer)

        composer.textChanged.connect(typed)  # type: ignore[attr-defined]

    def warm(self, composer: QWidget) -> Any:
        """Load the model of the composer's local agent unless it is ready, loading or the
        setting is off. Returns the task (None when nothing to do)."""
        agent = _agent_of(composer)
        if agent is None or not keep_ready(self._services.prefs):
            return None
        from desktop.chat.kinds import load_params_for

        try:
            params = load_params_for(agent)
        except UserError:
            return None  # no model file: Send says so
        local = self._services.local
        if local.state_of(params.model_path) in ("ready", "busy", "loading"):
            return None
        task = start(self._load(params), name="warm: load")
        self.tasks.append(task)
        return task

    async def _load(self, params: Any) -> bool:
        local = self._services.local
        try:
            info = await run_blocking(local.model_info.get, params.model_path)
            if not await run_blocking(fits_now, info, params):
                log.info("not loading %s ahead: it would not fit now", params.model_path)
                return False
            return await local.load(params)
        except UserError as exc:  # Send will say it on the message
            log.info("loading ahead failed: %s", exc.user_message)
            return False


def _agent_of(widget: QWidget | None) -> Any:
    """The local agent of the conversation pane whose composer ``widget`` is, else None."""
    from desktop.ui.kit.widgets import ComposerEdit

    if not isinstance(widget, ComposerEdit):
        return None
    parent = widget.parentWidget()
    while parent is not None and not hasattr(parent, "presenter"):
        parent = parent.parentWidget()
    agent = getattr(parent, "agent", None)
    return agent if agent is not None and getattr(agent, "kind", None) == "local" else None
