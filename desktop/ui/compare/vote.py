"""The vote bar under a finished comparison: a preference between two answers.

With two columns: "A is better / B is better / Tie / Both are bad". With more, two drop-downs
pick the pair first (A vs B by default), then the same four choices. Outcomes are the store's
("left" = the first of the pair). Every control is reachable by Tab and has an accessible name.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFrame, QLabel, QPushButton, QWidget

from desktop.ui.kit.widgets import FlowLayout, plain

OUTCOME_WORDS = {
    "left": "{left} is better",
    "right": "{right} is better",
    "tie": "Tie",
    "both_bad": "Both are bad",
}


class VoteBar(QFrame):
    """Signals: voted(int, int, str): the positions of the pair (left, right) and the outcome."""

    voted = Signal(int, int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("VoteBar")
        self.setAccessibleName("Vote")
        self._labels: list[str] = []
        self._voted: set[tuple[int, int]] = set()
        row = FlowLayout(self, 8)  # wraps in a narrow window instead of widening it
        row.setContentsMargins(12, 6, 12, 6)
        self.question = QLabel("Which answer is better?")
        row.addWidget(self.question)
        self.left_pick = QComboBox()
        self.left_pick.setAccessibleName("First answer of the pair")
        self.right_pick = QComboBox()
        self.right_pick.setAccessibleName("Second answer of the pair")
        for pick in (self.left_pick, self.right_pick):  # wider when the names are revealed
            pick.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.versus = QLabel("vs")
        for widget in (self.left_pick, self.versus, self.right_pick):
            row.addWidget(widget)
        self.left_pick.currentIndexChanged.connect(self._update)
        self.right_pick.currentIndexChanged.connect(self._update)
        self.buttons: dict[str, QPushButton] = {}
        for outcome in OUTCOME_WORDS:
            button = QPushButton()
            button.setObjectName(f"Vote_{outcome}")
            button.clicked.connect(lambda _c=False, o=outcome: self.vote(o))
            self.buttons[outcome] = button
            row.addWidget(button)
        self.note = plain(QLabel())  # agent names once revealed
        self.note.setObjectName("HeaderSubtitle")
        self.note.setAccessibleName("Votes so far")
        row.addWidget(self.note)
        height = self.buttons["tie"].sizeHint().height()  # a wrapping row: labels centred
        for label in (self.question, self.versus, self.note):
            label.setMinimumHeight(height)
        self.set_labels([])

    def set_labels(self, labels: list[str]) -> None:
        """The columns' labels as shown ("A", "B", … or "A · name"); a new prompt: no votes."""
        self._labels = list(labels)
        self._voted.clear()
        for pick, index in ((self.left_pick, 0), (self.right_pick, 1)):
            pick.blockSignals(True)
            pick.clear()
            pick.addItems(self._labels)
            pick.setCurrentIndex(min(index, len(self._labels) - 1))
            pick.blockSignals(False)
        many = len(self._labels) > 2
        for widget in (self.left_pick, self.versus, self.right_pick):
            widget.setVisible(many)
        self.note.setText("")
        self._update()

    def rename(self, labels: list[str]) -> None:
        """The same columns under new names (revealed): the pair and the votes stay."""
        self._labels = list(labels)
        for pick in (self.left_pick, self.right_pick):
            for i, text in enumerate(labels):
                pick.setItemText(i, text)
        self._update()

    def pair(self) -> tuple[int, int]:
        return self.left_pick.currentIndex(), self.right_pick.currentIndex()

    def set_pair(self, left: int, right: int) -> None:
        self.left_pick.setCurrentIndex(left)
        self.right_pick.setCurrentIndex(right)

    def _name(self, index: int) -> str:
        label = self._labels[index] if 0 <= index < len(self._labels) else "?"
        return label.split(" · ", 1)[0]  # "A is better", whatever the column's name

    def _update(self) -> None:
        left, right = self.pair()
        names = {"left": self._name(left), "right": self._name(right)}
        valid = len(self._labels) >= 2 and left >= 0 and right >= 0 and left != right
        done = (min(left, right), max(left, right)) in self._voted
        for outcome, button in self.buttons.items():
            text = OUTCOME_WORDS[outcome].format(**names)
            button.setText(text)
            button.setAccessibleName(f"{text} ({names['left']} vs {names['right']})")
            button.setEnabled(valid and not done)
        if done:
            self.note.setText(f"{names['left']} vs {names['right']}: voted")

    def vote(self, outcome: str) -> None:
        left, right = self.pair()
        if left == right or not self.buttons[outcome].isEnabled():
            return
        self._voted.add((min(left, right), max(left, right)))
        text = OUTCOME_WORDS[outcome].format(left=self._name(left), right=self._name(right))
        self.voted.emit(left, right, outcome)
        self._update()
        self.note.setText(f"Voted: {text}")

    def mark_voted(self, left: int, right: int) -> None:
        """A vote already stored for this prompt (a reopened comparison)."""
        self._voted.add((min(left, right), max(left, right)))
        self._update()
