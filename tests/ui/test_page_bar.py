"""The sidebar's page buttons keep their words whole when the text grows without the window
changing size (Settings → Text size, another font): the bar re-arranges on the font change,
not only on a resize."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QToolButton

from desktop.ui.kit import theme
from desktop.ui.shell.page_bar import PageBar
from tests.helpers.widget_checks import cut_labels


def _bar(qapp: QApplication) -> PageBar:
    theme.install(qapp, text_scale=1.0)
    bar = PageBar()
    for name in ("Chat", "Models", "Stats", "Compare"):
        button = QToolButton()
        button.setText(name)
        bar.add(button)
    bar.resize(bar.sizeHint().width(), 40)
    bar.show()
    qapp.processEvents()
    return bar


def _cut(bar: PageBar) -> list[str]:
    return [
        f"{b.text()}: {b.width()} < {b.sizeHint().width()}"
        for b in bar.buttons
        if b.width() < b.sizeHint().width()
    ]


def test_larger_text_in_the_same_width_takes_two_rows(qapp: QApplication) -> None:
    bar = _bar(qapp)
    try:
        assert bar.rows == 1 and not _cut(bar)
        width = bar.width()
        theme.install(qapp, text_scale=1.6)  # what Settings → Text size does
        for _ in range(3):
            qapp.processEvents()
        assert bar.width() == width  # nothing resized it
        assert bar.rows == 2
        assert not _cut(bar), _cut(bar)
        assert not cut_labels(bar)
    finally:
        theme.install(qapp, text_scale=1.0)
        bar.close()


def test_squeezed_below_two_rows_it_takes_one_column(qapp: QApplication) -> None:
    bar = _bar(qapp)
    try:
        bar.resize(bar.minimumSizeHint().width() - 20, 40)
        qapp.processEvents()
        assert bar.rows == 4 and not _cut(bar), _cut(bar)
    finally:
        bar.close()
