"""The agent editor's vision projector: a local model sees images with its "mmproj" GGUF.

``ProjectorField`` is the "Vision projector" row (a path with Browse…) and the line under the
model file: "Sees images (vision projector …)" once the projector checks, else "Text only".
Choosing a model fills the field with the projector beside it (the library's entry names
it, else the model's folder is listed), unless the person typed one of their own; an agent
opened for editing keeps what it has. Whether the file is a projector, and one for this
model, is ``desktop.chat.model_library.projector_problem``'s (two GGUF headers read off the
GUI thread), shown in red under the field; saving checks again (``check_on_save``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QLabel, QLineEdit, QPushButton, QWidget

from desktop.chat.model_library import (
    projector_beside,
    projector_problem,
    same_file,
    vision_line,
)
from desktop.errors import ValidationError
from desktop.local.starter import resolve_model_path
from desktop.store.agents import Agent
from desktop.ui.agents.form import say
from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.widgets import plain

CHECK_DELAY_MS = 150  # typing a path: check once it rests
PLACEHOLDER = "none: the model reads text only"
TIP = (
    "A vision model comes as two GGUF files: the model and its projector (“mmproj”). With "
    "the projector the model sees images attached to a message."
)

# (projector found beside the model or None, the projector to check, its problem or None)
Checked = tuple[str | None, str | None, str | None]


class ProjectorField(QObject):
    """``edit`` (the stored ``mmproj_path``), ``browse`` and ``status`` (the line under the
    model). ``show_error(text)`` shows a message under the field (the form's error label).

    Signal checked(object): a check ended; the projector's problem (str) or None."""

    checked = Signal(object)

    def __init__(self, model_path: QLineEdit, parent: QWidget) -> None:
        super().__init__(parent)
        self._parent = parent
        self._model_path = model_path
        self.edit = QLineEdit()
        self.edit.setObjectName("ProjectorPath")
        self.edit.setPlaceholderText(PLACEHOLDER)
        self.edit.setToolTip(TIP)
        self.browse = QPushButton("Browse…")
        self.browse.setAccessibleName("Choose a vision projector")
        self.browse.clicked.connect(self._browse)
        self.status = plain(QLabel())
        self.status.setObjectName("VisionLine")
        self.status.setWordWrap(True)
        self.show_error: Callable[[str], None] = lambda _text: None
        # Blocking: the library's projector for a model path (``library_projector`` over the
        # model picker's entries), asked off the GUI thread before the folder is listed.
        self.known: Callable[[str], str | None] = lambda _path: None
        self._auto: str | None = None  # what was filled in for the model, not typed
        self._follow = True  # a model chosen since the agent was loaded: its projector fills
        self._filling = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHECK_DELAY_MS)
        self._timer.timeout.connect(self.refresh)
        self._task: asyncio.Task[None] | None = None
        model_path.textChanged.connect(self._model_changed)
        self.edit.textEdited.connect(self._typed)
        self.edit.textChanged.connect(self._changed)
        self._show(None, None)

    # the field -------------------------------------------------------------------------------
    def value(self) -> str | None:
        return self.edit.text().strip() or None

    def load(self, agent: Agent) -> None:
        """An agent's stored projector (after its model): kept until another model is
        chosen."""
        self._follow = False
        self._auto = None
        self._set(agent.mmproj_path or "")
        self.refresh()

    def _set(self, text: str) -> None:
        self._filling = True
        try:
            self.edit.setText(text)
        finally:
            self._filling = False

    def _model_changed(self) -> None:
        self._follow = True
        self._timer.start()

    def _typed(self) -> None:
        self._auto = None  # the person's own choice: a model change leaves it

    def _changed(self) -> None:
        if not self._filling:
            self._timer.start()

    def _may_fill(self) -> bool:
        text = self.value()
        return self._follow and (text is None or text == self._auto)

    # checking --------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Look for the model's projector (when the field follows the model) and check the
        projector, off the GUI thread when a loop runs."""
        self._timer.stop()
        model = self._model_path.text().strip() or None
        fill, current = self._may_fill(), self.value()
        if not loop_running():
            self._apply(model, current, self._check(model, current, fill))
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = start(self._run(model, current, fill), name="agent editor: projector")

    async def _run(self, model: str | None, current: str | None, fill: bool) -> None:
        result = await run_blocking(self._check, model, current, fill)
        self._apply(model, current, result)

    def _check(self, model: str | None, current: str | None, fill: bool) -> Checked:
        """Blocking: the projector for ``model`` (when ``fill``) and the problem of the one
        the field will hold."""
        found = (self.known(model) or projector_beside(model)) if fill and model else None
        chosen = found if fill else current
        return found, chosen, projector_problem(chosen, model)

    def _apply(self, model: str | None, current: str | None, result: Checked) -> None:
        if (self._model_path.text().strip() or None) != model or self.value() != current:
            return  # changed while checking: the newer check tells
        found, chosen, problem = result
        if self._may_fill():
            self._auto = found
            if chosen != current:
                self._set(chosen or "")
        self._show(chosen, problem)
        self.checked.emit(problem)

    def _show(self, chosen: str | None, problem: str | None) -> None:
        say(self.status, vision_line(chosen, problem), "ok" if chosen and not problem else "muted")
        self.show_error(problem or "")

    def _browse(self) -> None:
        model = resolve_model_path(self._model_path.text().strip() or None)
        current = self.value()
        start_dir = str(Path(current).expanduser().parent) if current else ""
        if not start_dir and model is not None:
            start_dir = str(model.parent)
        path, _ = QFileDialog.getOpenFileName(
            self._parent,
            "Choose the model's vision projector",
            start_dir or str(Path.home()),
            "GGUF files (*.gguf);;All files (*)",
        )
        if path:
            self._auto = None
            self.edit.setText(path)


def check_on_save(agent: Agent) -> None:
    """Blocking, as an agent is stored: a local agent's projector must be one, for its model
    (``ValidationError`` on ``mmproj_path``)."""
    if not agent.is_local or not agent.mmproj_path:
        return
    problem = projector_problem(agent.mmproj_path, agent.model_path)
    if problem:
        raise ValidationError({"mmproj_path": problem})


def library_projector(entries: Callable[[], Sequence[object]]) -> Callable[[str], str | None]:
    """``ProjectorField.known`` over the library's entries (``ModelPicker.entries_now``)."""

    def known(path: str) -> str | None:
        for entry in entries():
            entry_path = getattr(entry, "path", None)
            if isinstance(entry_path, str) and same_file(entry_path, path):
                found = getattr(entry, "mmproj", None)
                return found if isinstance(found, str) else None
        return None

    return known
