"""The one door to files under ``resources/`` (icons, themes), in a checkout or a bundle."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPixmap


def resources_dir() -> Path:
    """``resources/`` next to the package, or inside a PyInstaller bundle."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        return Path(bundle) / "resources"
    return Path(__file__).resolve().parents[3] / "resources"


def resource_path(*parts: str) -> Path:
    return resources_dir().joinpath(*parts)


@cache
def app_icon() -> QIcon:
    path = resource_path("icons", "simi.svg")
    return QIcon(str(path)) if path.is_file() else QIcon()


def initials(name: str) -> str:
    words = [w for w in name.replace("(", " ").replace(")", " ").split() if w[:1].isalnum()]
    if not words:
        return "?"
    if len(words) == 1:
        return words[0][:2].upper() if len(words[0]) > 1 else words[0].upper()
    return (words[0][0] + words[1][0]).upper()


def agent_badge(name: str, color: str, size: int = 28, device_pixel_ratio: float = 1.0) -> QPixmap:
    """A rounded square in ``color`` (the kind's: ``desktop.chat.kinds.badge_color``) with the
    initials."""
    scale = max(1.0, device_pixel_ratio)
    pixmap = QPixmap(int(size * scale), int(size * scale))
    pixmap.setDevicePixelRatio(scale)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    rect = QRectF(0, 0, size, size)
    painter.drawRoundedRect(rect, size * 0.28, size * 0.28)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(max(8, int(size * 0.4)))
    painter.setFont(font)
    painter.setPen(QColor("#ffffff"))
    painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, initials(name))
    painter.end()
    return pixmap


@cache
def icon(name: str) -> QIcon:
    """An SVG icon from ``resources/icons`` (sharp at any device pixel ratio)."""
    path = resource_path("icons", name)
    return QIcon(str(path)) if path.is_file() else QIcon()
