"""The compare view's one composer: the text and files that go to every column.

Files come as in a conversation (the paperclip, a drop anywhere on the page, a paste) through
``conversation/attach_send.ComposerFiles``; before a send each column's agent is checked (can
it see the images, do the documents fit), and each column gets its own attachments (the first
part of a document for an agent it is too long for, when the person says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from PySide6.QtWidgets import QWidget

from desktop.chat.services import Services
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.ui.conversation.attach_send import composer_box
from desktop.ui.kit.widgets import plain_label, vbox

HINT = "Enter sends to every column · Shift+Enter for a new line"


class CompareComposer(QWidget):
    """The text box, its files, the paperclip and Send (Stop all), and the hint under them,
    which says what a send could not do until the text or the files change."""

    def __init__(
        self, services: Services, page: QWidget, agent: Callable[[], Agent | None]
    ) -> None:
        super().__init__()
        column = vbox(self, (24, 8, 24, 12), 6)
        # drops anywhere on the page; the chips estimate for the first column's agent
        box = composer_box(services, page, agent)
        self.composer, self.files, self.send_button = box.composer, box.files, box.send_button
        self.composer.setAccessibleName("Message to every agent")
        self.composer.setPlaceholderText("Message every agent…")
        self.send_button.setAccessibleName("Send to every agent")
        column.addWidget(box.frame)
        self.hint = plain_label(HINT, "ComposerHint", wrap=True)
        column.addWidget(self.hint)
        self.composer.textChanged.connect(lambda: self.say(""))
        self.files.changed.connect(lambda: self.say("") if self.files.ready else None)

    def submit(
        self,
        targets: Sequence[tuple[Agent, int | None]],
        send: Callable[[str, list[list[Attachment]]], bool],
    ) -> None:
        """Enter or Send: ``send(text, each target's attachments)`` once the files passed the
        checks for every target's agent (``ComposerFiles.submit``); the text box empties when
        it went."""
        text = self.composer.toPlainText()

        def deliver(chosen: list[list[Attachment]]) -> bool:
            sent = send(text, chosen)
            if sent:
                self.composer.clear()
            return sent

        self.files.submit(targets, text, deliver, self.say)

    def say(self, words: str) -> None:
        """Words under the composer in the warning colour ("" brings back the hint)."""
        self.hint.setText(words or HINT)
        if self.hint.property("warn") != bool(words):
            self.hint.setProperty("warn", bool(words))
            self.hint.style().unpolish(self.hint)
            self.hint.style().polish(self.hint)


def files_title(files: Iterable[Sequence[Attachment]]) -> str:
    """A comparison's title when its first prompt is only files: the first file's name."""
    return next((items[0].name for items in files if items), "")
