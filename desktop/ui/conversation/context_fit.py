"""Whether a message will fit a local agent's context, as the composer says it: the warning
under the composer while typing (an estimate from the text's length and the files' token
estimates; the exact count needs the model's tokenizer), and the "Raise context" dialog a
reply that did not fit offers."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtWidgets import QAbstractButton, QMessageBox, QWidget

from desktop.chat.context_offer import ContextChoice, ContextOffer
from desktop.store.agents import Agent
from desktop.store.conversations import Message
from desktop.ui.kit.widgets import message_box

COMPOSER_HINT = "Enter to send · Shift+Enter for a new line"
FIT_CHECK_MS = 250  # how long typing pauses before the composer checks the message fits
CHARS_PER_TOKEN = 4  # English prose in the usual BPE vocabularies; the warning says "about"


def estimated_tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def fit_warning(
    agent: Agent | None, history: Iterable[Message], text: str, file_tokens: int
) -> str | None:
    """The warning when the conversation (``history``), the message and its files
    (``file_tokens``) are more than a local agent holds; None when it fits or is remote (the
    history is not read then)."""
    if agent is None or not agent.is_local:
        return None
    history_chars = sum(len(m.content) for m in history)
    need = estimated_tokens(history_chars + len(text) + len(agent.system_prompt)) + file_tokens
    n_ctx = agent.n_ctx or 2048
    if need <= n_ctx:
        return None
    return (
        f"This conversation and message are about {need:,} tokens; {agent.name} holds "
        f"{n_ctx:,}. It will not fit: shorten the message, start a new chat, or raise the "
        "agent's context."
    )


def choose_context(parent: QWidget, offer: ContextOffer) -> ContextChoice | None:
    """ "Raise context": the sizes on offer, what each costs, and the trained context; the
    person picks one or cancels."""
    box = message_box(  # plain text: it names the model
        parent,
        QMessageBox.Icon.Question,
        "Raise context",
        offer.question,
        QMessageBox.StandardButton.NoButton,
    )
    buttons: dict[QAbstractButton, ContextChoice] = {}
    details = []
    for choice in offer.choices:  # short buttons; what each costs in the text above them
        label = f"Raise to {choice.n_ctx:,}"
        if choice.drops_turns:
            label += " (trained size)"
        elif choice.beyond_training:
            label += " (past training)"
        note = "oldest turns left out; " if choice.drops_turns else ""
        details.append(f"{choice.n_ctx:,} tokens: {note}{choice.memory or 'memory unknown'}")
        buttons[box.addButton(label, QMessageBox.ButtonRole.AcceptRole)] = choice
    box.setInformativeText("\n".join(details))
    cancel = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(cancel)
    box.exec()
    return buttons.get(box.clickedButton())
