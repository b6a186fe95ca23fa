"""A composer's files, from the paperclip, a drop or a paste to the checks before sending.

``ComposerFiles`` gives a composer (a conversation pane's, the compare view's) its chip row
(``attach_row.AttachRow``), its paperclip, drops anywhere on its host widget (a hint covers
the host while files are dragged over it) and pastes into its ``FileComposer``. Before a
message with attachments goes, ``check`` asks each agent that will answer: can it see the
images (no: words in the composer, nothing sent), do the documents fit its context (no: a
dialog offers "Send the first part" or Cancel). Nothing here blocks the GUI thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QFileDialog,
    QLabel,
    QMessageBox,
    QPushButton,
    QWidget,
)

from desktop.chat import file_places
from desktop.chat.attachments import ContextCheck
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.ui.conversation.attach_row import AttachRow
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.file_composer import AttachButton, FileComposer, local_files
from desktop.ui.kit.widgets import FocusFrame, hbox, message_box, vbox

FIRST_PART = "Send the first part"
WAIT_WORDS = "Wait until every file is read (or remove it), then send."
DROP_WORDS = "Drop files here to attach them"
HINT_MARGIN_PX = 12


@dataclass
class Checked:
    """What to send after the checks: each target's attachments (None: nothing is sent, and
    ``problem`` says why, or the person cancelled)."""

    attachments: list[list[Attachment]] | None
    problem: str = ""
    cut: list[str] = field(default_factory=list)  # the agents that get the first part


class DropHint(QLabel):
    """The dashed frame over a pane while files are dragged over it."""

    def __init__(self, host: QWidget) -> None:
        super().__init__(DROP_WORDS, host)
        self.setObjectName("DropHint")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.hide()

    def cover(self) -> None:
        host = self.parentWidget()
        if host is not None:
            margin = HINT_MARGIN_PX
            self.setGeometry(host.rect().adjusted(margin, margin, -margin, -margin))
        self.raise_()
        self.show()


class ComposerFiles(QObject):
    """The files of one composer. Signals: changed() (a chip came, went or got ready: Send
    may change). ``agent()`` is the agent the chips estimate for."""

    changed = Signal()

    def __init__(
        self,
        services: Services,
        host: QWidget,
        composer: FileComposer,
        agent: Callable[[], Agent | None],
    ) -> None:
        super().__init__(host)
        self.services = services
        self.host = host
        self.composer = composer
        self.row = AttachRow(services, agent)
        self.row.changed.connect(self.changed)
        self.button = AttachButton()
        self.button.clicked.connect(self.choose_files)
        self.hint = DropHint(host)
        self.checking = False  # the checks before a send are running
        # Which files the paperclip adds (tests answer without a dialog).
        self.pick_files: Callable[[], list[str]] = self._file_dialog
        composer.files_given.connect(self.row.add_files)
        composer.image_given.connect(self.row.add_image)
        host.setAcceptDrops(True)
        host.installEventFilter(self)

    # adding ------------------------------------------------------------------------------------
    def choose_files(self) -> None:
        """The paperclip: an open dialog for several files."""
        chosen = self.pick_files()
        if chosen:
            self.row.add_files([Path(p) for p in chosen])
            file_places.remember(self.services.prefs, chosen[0])
        self.composer.setFocus()

    def _file_dialog(self) -> list[str]:
        folder = file_places.import_folder(self.services.prefs)
        paths, _ = QFileDialog.getOpenFileNames(
            self.host,
            "Attach files",
            folder,
            "Images and documents (*.png *.jpg *.jpeg *.gif *.webp *.pdf *.docx *.txt *.md "
            "*.csv *.json *.html *.htm *.py *.js *.ts *.c *.cpp *.h *.rs *.go *.java);;"
            "All files (*)",
        )
        return list(paths)

    def _takes_drops(self) -> bool:
        return self.composer.isVisible() and self.button.isEnabled()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if watched is not self.host or kind not in (
            QEvent.Type.DragEnter,
            QEvent.Type.DragMove,
            QEvent.Type.DragLeave,
            QEvent.Type.Drop,
        ):
            return False
        if kind == QEvent.Type.DragLeave:
            self.hint.hide()
            return False
        assert isinstance(event, QDropEvent)  # a drag's enter and move events are drop events
        files = local_files(event.mimeData())
        if not files or not self._takes_drops():
            return False  # a pane without its composer (a compare column): the page takes it
        event.acceptProposedAction()
        if kind == QEvent.Type.Drop:
            self.hint.hide()
            self.row.add_files(files)
            self.composer.setFocus()
        elif kind == QEvent.Type.DragEnter:
            self.hint.cover()
        return True

    # sending -----------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Nothing being read and no check running: a send may go."""
        return not self.row.preparing and not self.checking

    def left_out(self) -> str:
        """Words for the failed chips a send leaves out ("" when none)."""
        failed = [c.name for c in self.row.failed()]
        if not failed:
            return ""
        names = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
        files = "file" if len(failed) == 1 else "files"
        return f"Sent without {len(failed)} {files} that could not be attached: {names}."

    def submit(
        self,
        targets: Sequence[tuple[Agent, int | None]],
        text: str,
        deliver: Callable[[list[list[Attachment]]], bool],
        say: Callable[[str], None],
    ) -> asyncio.Task[Any] | None:
        """Send: ``deliver`` gets each target's attachments (after ``check`` when there are
        any; at once when not) and says whether the message went; then the chips it took go,
        and ``say`` tells what was left out or why nothing was sent."""
        if not self.ready:
            say(WAIT_WORDS)
            return None
        chips = list(self.row.chips)
        note = self.left_out()

        def sent(chosen: list[list[Attachment]]) -> None:
            if deliver(chosen):
                self.row.clear(release=False, chips=chips)
                if note:
                    say(note)

        if not self.row.attachments():
            sent([[] for _ in targets])
            return None

        async def go() -> None:
            checked = await self.check(targets, text)
            if checked.attachments is not None:
                sent(checked.attachments)
            elif checked.problem:
                say(checked.problem)

        return start(go(), name="send with attachments")

    async def check(self, targets: Sequence[tuple[Agent, int | None]], text: str) -> Checked:
        """The chips' attachments for each (agent, conversation) about to answer, after the
        checks: an agent that cannot see the images stops the send (its words); documents too
        long for one are cut to their first part if the person says so."""
        attachments = self.row.attachments()
        problems = [
            words
            for agent, _conv in targets
            if (words := self.services.attachments.vision_problem(agent, attachments))
        ]
        if problems:
            return Checked(None, " ".join(dict.fromkeys(problems)))
        self.checking = True
        self.changed.emit()
        try:
            service = self.services.attachments
            checks = await run_blocking(
                lambda: [service.context_check(a, text, attachments, c) for a, c in targets]
            )
        except UserError as exc:
            return Checked(None, exc.user_message)
        finally:
            self.checking = False
            self.changed.emit()
        chosen = [list(attachments) for _ in targets]
        long = [(i, c) for i, c in enumerate(checks) if not c.fits]
        if not long:
            return Checked(chosen)
        agents = [targets[i][0] for i, _c in long]
        if any(c.first_part is None for _i, c in long):
            return Checked(None, too_long(agents, [c for _i, c in long], cut=False))
        if not await self.ask_first_part(too_long(agents, [c for _i, c in long], cut=True)):
            return Checked(None)
        for i, c in long:
            chosen[i] = list(c.first_part or ())
        return Checked(chosen, cut=[a.name for a in agents])

    async def ask_first_part(self, question: str) -> bool:
        """The dialog: "Send the first part" (True) or Cancel. Window-modal, opened without a
        nested event loop: the replies streaming elsewhere keep streaming."""
        box = message_box(
            self.host,
            QMessageBox.Icon.Question,
            "Too long for the agent",
            question,
            QMessageBox.StandardButton.NoButton,
        )
        box.setObjectName("FirstPartDialog")
        send: QAbstractButton = box.addButton(FIRST_PART, QMessageBox.ButtonRole.AcceptRole)
        box.setDefaultButton(box.addButton(QMessageBox.StandardButton.Cancel))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def answered(_result: int) -> None:
            if not done.done():
                done.set_result(None)

        box.finished.connect(answered)
        box.open()
        try:
            await done
        finally:
            box.deleteLater()
        return box.clickedButton() is send


def too_long(agents: Sequence[Agent], checks: Sequence[ContextCheck], *, cut: bool) -> str:
    """Why the message does not fit, per agent, and what "Send the first part" does."""
    lines = []
    for agent, check in zip(agents, checks, strict=True):
        holds = f"holds {check.window:,}" if check.window else "cannot hold that much"
        lines.append(f"{agent.name} {holds} tokens; this message needs about {check.needed:,}.")
    if cut:
        lines.append(
            "Send the first part of the documents (as much as fits), or cancel and remove some."
        )
    else:
        lines.append(
            "Even without its documents' text the message does not fit: remove a file, start "
            "a new chat, or raise the agent's context."
        )
    return "\n".join(lines)


@dataclass
class ComposerBox:
    """A composer as the pane and Compare build it: a framed box holding the files' chips
    over the text box, the paperclip and Send."""

    frame: FocusFrame
    composer: FileComposer
    files: ComposerFiles
    send_button: QPushButton


def composer_box(
    services: Services, drop_target: QWidget, agent: Callable[[], Agent | None]
) -> ComposerBox:
    """The framed composer: chips above, then the text box, the paperclip and Send in a row.
    Files dropped anywhere on ``drop_target`` are attached; chips estimate for ``agent()``."""
    frame = FocusFrame("Composer")
    inside = vbox(frame, (10, 8, 8, 8), 6)
    composer = FileComposer()
    frame.watch(composer)
    files = ComposerFiles(services, drop_target, composer, agent)
    inside.addWidget(files.row)
    row = hbox(None, (0, 0, 0, 0), 8)
    inside.addLayout(row)
    row.addWidget(composer, 1)
    row.addWidget(files.button, 0, Qt.AlignmentFlag.AlignBottom)
    send_button = QPushButton("Send")
    send_button.setObjectName("SendButton")
    send_button.setCursor(Qt.CursorShape.PointingHandCursor)
    send_button.setMinimumWidth(76)
    row.addWidget(send_button, 0, Qt.AlignmentFlag.AlignBottom)
    return ComposerBox(frame, composer, files, send_button)
