"""Light and dark looks: a Fusion palette plus one stylesheet built from the same colours.

The scheme follows the system (``QStyleHints.colorScheme()`` on Qt 6.5+, else the palette's
window lightness) unless a caller forces one (Settings, screenshots, tests). The text size is
one factor (``TEXT_SCALES``) applied to the application font and to every ``font-size`` of the
stylesheet: ``install(app, dark=..., text_scale=...)`` re-applies both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from desktop.ui.kit.resources import resource_path

# The text sizes Settings offers (factor, words); 1.0 is the platform's own size.
TEXT_SCALES: tuple[tuple[float, str], ...] = (
    (0.9, "Small"),
    (1.0, "Normal"),
    (1.15, "Large"),
    (1.3, "Larger"),
)
MIN_TEXT_SCALE, MAX_TEXT_SCALE = 0.75, 2.0
_FONT_SIZE = re.compile(r"font-size:\s*(\d+(?:\.\d+)?)px")


@dataclass(frozen=True, slots=True)
class Colors:
    dark: bool
    window: str
    sidebar: str
    surface: str
    raised: str
    text: str
    muted: str
    border: str
    accent: str
    accent_text: str
    accent_hover: str
    selection: str
    user_bubble: str
    user_border: str
    assistant_bubble: str
    assistant_border: str
    error_bg: str
    error_border: str
    error_text: str
    warn_bg: str
    warn_border: str
    warn_text: str
    code_bg: str


# Every colour role: (light, dark).
_SCHEMES: dict[str, tuple[str, str]] = {
    "window": ("#f5f6f8", "#1c1e23"),
    "sidebar": ("#eef0f4", "#17191d"),
    "surface": ("#ffffff", "#202329"),
    "raised": ("#ffffff", "#272a31"),
    "text": ("#1d2129", "#e6e8ec"),
    "muted": ("#6b7280", "#9199a6"),
    "border": ("#dde1e8", "#30343c"),
    "accent": ("#4f63e0", "#7289f5"),
    "accent_text": ("#ffffff", "#ffffff"),
    "accent_hover": ("#4053c9", "#8398f7"),
    "selection": ("#dfe4fb", "#2f3a66"),
    "user_bubble": ("#e9edfd", "#2b3560"),
    "user_border": ("#d3dafa", "#37437a"),
    "assistant_bubble": ("#f4f5f7", "#292c33"),
    "assistant_border": ("#e6e8ec", "#32363e"),
    "error_bg": ("#fdeeee", "#3a2023"),
    "error_border": ("#f3c4c4", "#6a2f35"),
    "error_text": ("#a3201f", "#ff9e9e"),
    "warn_bg": ("#fff7e0", "#3a3220"),
    "warn_border": ("#f1dc9a", "#5e4f26"),
    "warn_text": ("#6b4e00", "#f2d68a"),
    "code_bg": ("#e4e7ee", "#1a1c20"),
}


def _scheme(dark: bool) -> Colors:
    return Colors(dark, **{role: pair[1] if dark else pair[0] for role, pair in _SCHEMES.items()})


LIGHT = _scheme(dark=False)
DARK = _scheme(dark=True)


def system_prefers_dark(app: QGuiApplication | None = None) -> bool:
    app = app or QGuiApplication.instance()  # type: ignore[assignment]
    if app is None:
        return False
    hints = QGuiApplication.styleHints()
    scheme = getattr(hints, "colorScheme", None)
    if scheme is not None:
        value = scheme()
        if value == Qt.ColorScheme.Dark:
            return True
        if value == Qt.ColorScheme.Light:
            return False
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def palette_for(c: Colors) -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    for r, colour in (
        (role.Window, c.window),
        (role.WindowText, c.text),
        (role.Base, c.surface),
        (role.AlternateBase, c.assistant_bubble),
        (role.ToolTipBase, c.raised),
        (role.ToolTipText, c.text),
        (role.PlaceholderText, c.muted),
        (role.Text, c.text),
        (role.Button, c.raised),
        (role.ButtonText, c.text),
        (role.Highlight, c.accent),
        (role.HighlightedText, c.accent_text),
        (role.Link, c.accent),
        (role.Mid, c.border),
        (role.Midlight, c.border),
        (role.Dark, c.border),
    ):
        p.setColor(r, QColor(colour))
    p.setColor(role.BrightText, QColor("#ff5555"))
    p.setColor(role.Shadow, QColor("#000000"))
    for r in (role.Text, role.WindowText, role.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, r, QColor(c.muted))
    return p


def scale_font_sizes(css: str, scale: float) -> str:
    """Every ``font-size: Npx`` of a stylesheet times ``scale`` (for other modules' sheets)."""
    if scale == 1.0:
        return css
    return _FONT_SIZE.sub(lambda m: f"font-size: {max(1, round(float(m[1]) * scale))}px", css)


def _icon_url(name: str) -> str:
    return 'url("' + resource_path("icons", name).as_posix() + '")'


def _rgba(colour: str, alpha: float) -> str:
    """ "#4f63e0" at ``alpha`` as the stylesheet writes it."""
    value = QColor(colour)
    return f"rgba({value.red()}, {value.green()}, {value.blue()}, {round(alpha * 255)})"


def stylesheet(c: Colors, text_scale: float = 1.0) -> str:
    """The application stylesheet for ``c``, font sizes times ``text_scale``."""
    return scale_font_sizes(_stylesheet(c), text_scale)


def _stylesheet(c: Colors) -> str:
    tone = "dark" if c.dark else "light"
    down, up = _icon_url(f"chevron-down-{tone}.svg"), _icon_url(f"chevron-up-{tone}.svg")
    check = _icon_url("check-white.svg")
    return f"""
QMainWindow, QDialog {{ background: {c.window}; }}
QToolTip {{ background: {c.raised}; color: {c.text}; border: 1px solid {c.border};
           padding: 6px 8px; border-radius: 6px; }}

#Sidebar {{ background: {c.sidebar}; }}
#Sidebar QListView {{ background: transparent; border: 1px solid transparent;
              border-radius: 8px; outline: 0; }}
#Sidebar QListView:focus {{ border-color: {c.accent}; }}
#AppTitle {{ font-size: 15px; font-weight: 700; color: {c.text}; }}
#SectionLabel {{ color: {c.muted}; font-size: 11px; font-weight: 700; letter-spacing: 1px; }}
QSplitter::handle {{ background: {c.border}; }}
QSplitter::handle:horizontal {{ width: 1px; }}
QSplitter::handle:vertical {{ height: 1px; }}

QPushButton {{ background: {c.raised}; color: {c.text}; border: 1px solid {c.border};
              border-radius: 8px; padding: 6px 12px; }}
QPushButton:hover {{ border-color: {c.accent}; }}
QPushButton:disabled {{ color: {c.muted}; }}
QPushButton#PrimaryButton, QPushButton#SendButton, QPushButton#ToolAllow {{
              background: {c.accent};
              color: {c.accent_text}; border: 1px solid {c.accent}; font-weight: 600; }}
QPushButton#PrimaryButton:hover, QPushButton#SendButton:hover, QPushButton#ToolAllow:hover {{
              background: {c.accent_hover}; border-color: {c.accent_hover}; }}
QPushButton#SendButton:disabled {{ background: {c.border}; border-color: {c.border};
              color: {c.muted}; }}
QPushButton#SendButton[streaming="true"] {{ background: {c.raised}; color: {c.error_text};
              border: 1px solid {c.error_border}; }}
QToolButton#SidebarTool {{ background: transparent; color: {c.muted}; border: 1px solid transparent;
              border-radius: 6px; padding: 3px 6px; }}
QToolButton#SidebarTool:hover {{ background: {c.selection}; color: {c.text}; }}
QToolButton#SidebarTool:disabled {{ color: {c.border}; }}
QToolButton#SwitchAgentButton {{ background: transparent; color: {c.muted};
              border: 1px solid {c.border}; border-radius: 6px; padding: 4px 10px; }}
QToolButton#SwitchAgentButton:hover {{ background: {c.selection}; color: {c.text}; }}
QToolButton#SwitchAgentButton:disabled {{ color: {c.border}; }}
QToolButton#SwitchAgentButton::menu-indicator {{ image: none; width: 0px; }}

#ChatPane {{ background: {c.surface}; }}
#ChatHeader {{ background: {c.surface}; border-bottom: 1px solid {c.border}; }}
#HeaderTitle {{ font-size: 15px; font-weight: 700; color: {c.text}; }}
#HeaderSubtitle {{ color: {c.muted}; }}
QScrollArea#Transcript {{ background: {c.surface}; border: none; }}
#TranscriptBody {{ background: {c.surface}; }}
#EmptyTitle {{ font-size: 18px; font-weight: 600; color: {c.text}; }}
#EmptyHint {{ color: {c.muted}; }}

QFrame#Bubble {{ border-radius: 14px; border: 1px solid {c.assistant_border};
                 background: {c.assistant_bubble}; }}
QFrame#Bubble[role="user"] {{ background: {c.user_bubble}; border-color: {c.user_border}; }}
QFrame#Bubble[state="error"] {{ border-color: {c.error_border}; }}
#BubbleLabel {{ color: {c.muted}; font-size: 12px; font-weight: 600; }}
#BubbleText {{ color: {c.text}; background: transparent; }}
#StatsFooter {{ color: {c.muted}; font-size: 11px; }}
#StoppedMarker {{ color: {c.muted}; font-size: 11px; font-style: italic; }}
#WaitingNote {{ color: {c.muted}; font-style: italic; }}
QFrame#ErrorBox {{ background: {c.error_bg}; border: 1px solid {c.error_border};
                   border-radius: 8px; }}
#ErrorText {{ color: {c.error_text}; background: transparent; }}
QPushButton#RetryButton {{ padding: 3px 10px; border-radius: 6px; }}
QFrame#ToolCard {{ background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px; }}
QFrame#ToolCard[state="waiting"] {{ border: 1px solid {c.accent}; }}
#ToolTitle {{ color: {c.text}; font-weight: 600; background: transparent; }}
#ToolStatus, #ToolDescription, #ToolPartLabel, #ToolCutNote {{ color: {c.muted};
              font-size: 12px; background: transparent; }}
#ToolStatus[tone="wait"] {{ color: {c.accent}; font-weight: 600; }}
#ToolStatus[tone="error"] {{ color: {c.error_text}; }}
QPlainTextEdit#ToolArguments, QPlainTextEdit#ToolResult {{ background: {c.code_bg};
              color: {c.text}; border: 1px solid {c.border}; border-radius: 6px;
              padding: 2px 4px; }}
QToolButton#ToolToggle {{ color: {c.muted}; border: 1px solid transparent; font-size: 12px;
              padding: 0 2px; background: transparent; }}
QToolButton#ToolToggle:hover {{ color: {c.text}; }}

QFrame#Composer {{ background: {c.raised}; border: 1px solid {c.border}; border-radius: 14px; }}
QFrame#Composer[focused="true"] {{ border-color: {c.accent}; }}
#ComposerHint {{ color: {c.muted}; font-size: 11px; }}
#ComposerHint[warn="true"] {{ color: {c.error_text}; }}
QScrollArea#AttachScroll, #AttachBody {{ background: transparent; }}
QFrame#AttachChip {{ background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px; }}
QFrame#AttachChip[state="error"] {{ background: {c.error_bg}; border-color: {c.error_text}; }}
#AttachName {{ color: {c.text}; font-size: 12px; font-weight: 600; background: transparent; }}
#AttachDetail {{ color: {c.muted}; font-size: 11px; background: transparent; }}
#AttachError {{ color: {c.error_text}; font-size: 11px; background: transparent; }}
#AttachThumb {{ background: transparent; }}
QProgressBar#AttachProgress {{ border: none; border-radius: 2px; background: {c.border}; }}
QProgressBar#AttachProgress::chunk {{ border-radius: 2px; background: {c.accent}; }}
QToolButton#AttachRemove {{ color: {c.muted}; border: 1px solid transparent; border-radius: 4px;
              padding: 0 4px; font-size: 14px; background: transparent; }}
QToolButton#AttachRemove:hover, QToolButton#AttachButton:hover {{ background: {c.selection};
              color: {c.text}; }}
QToolButton#AttachButton {{ border: 1px solid transparent; border-radius: 8px; padding: 5px;
              background: transparent; }}
#DropHint {{ background: {_rgba(c.surface, 0.9)}; border: 2px dashed {c.accent};
              border-radius: 14px; color: {c.accent}; font-size: 16px; font-weight: 600; }}
QToolButton#AttachImage, QToolButton#AttachDocument {{ background: {c.surface};
              border: 1px solid {c.border}; border-radius: 8px; color: {c.text}; }}
QToolButton#AttachImage {{ padding: 2px; }}
QToolButton#AttachDocument {{ padding: 4px 10px 4px 6px; font-size: 12px; }}
QToolButton#AttachImage:hover, QToolButton#AttachDocument:hover {{ border-color: {c.accent}; }}

QFrame#InfoBar {{ background: {c.warn_bg}; border-bottom: 1px solid {c.warn_border}; }}
#InfoText {{ color: {c.warn_text}; background: transparent; }}
QToolButton#InfoClose {{ border: 1px solid transparent; color: {c.warn_text}; padding: 2px 6px;
              border-radius: 6px; }}
QToolButton#InfoAction {{ color: {c.warn_text}; background: transparent; font-weight: 600;
              border: 1px solid {c.warn_border}; border-radius: 6px; padding: 2px 8px; }}
QToolButton#InfoAction:hover, QToolButton#InfoClose:hover {{ background: {c.warn_border}; }}

QStatusBar {{ background: {c.window}; color: {c.muted}; border-top: 1px solid {c.border}; }}
QStatusBar QLabel {{ color: {c.muted}; padding: 0 8px; }}

QLineEdit, QPlainTextEdit, QComboBox, QSpinBox, QDateEdit {{ background: {c.surface};
              color: {c.text};
              border: 1px solid {c.border}; border-radius: 6px; padding: 5px 8px; }}
QComboBox, QDateEdit {{ padding-right: 26px; }}
QComboBox::drop-down, QDateEdit::drop-down {{ subcontrol-origin: border;
              subcontrol-position: center right; border: none; width: 24px; }}
QComboBox::down-arrow, QDateEdit::down-arrow {{ image: {down}; width: 12px; height: 12px; }}
QComboBox::down-arrow:disabled {{ image: {down}; }}
QSpinBox {{ padding-right: 22px; }}
QSpinBox::up-button, QSpinBox::down-button {{ subcontrol-origin: border; width: 20px;
              border: none; background: transparent; }}
QSpinBox::up-button {{ subcontrol-position: top right; }}
QSpinBox::down-button {{ subcontrol-position: bottom right; }}
QSpinBox::up-arrow {{ image: {up}; width: 10px; height: 10px; }}
QSpinBox::down-arrow {{ image: {down}; width: 10px; height: 10px; }}
QSpinBox::up-button:hover, QSpinBox::down-button:hover {{ background: {c.selection}; }}
QComboBox QAbstractItemView {{ background: {c.raised}; color: {c.text};
              selection-background-color: {c.selection}; selection-color: {c.text}; }}
QLineEdit:focus, QPlainTextEdit:focus, QComboBox:focus, QSpinBox:focus, QDateEdit:focus {{
              border-color: {c.accent}; }}
QCheckBox {{ spacing: 8px; }}
QCheckBox::indicator {{ width: 14px; height: 14px; border: 1px solid {c.muted};
              border-radius: 4px; background: {c.surface}; }}
QCheckBox::indicator:hover, QCheckBox::indicator:focus {{ border-color: {c.accent}; }}
QCheckBox::indicator:checked {{ background: {c.accent}; border-color: {c.accent};
              image: {check}; }}
QCheckBox:focus {{ color: {c.accent}; }}
QCheckBox:disabled {{ color: {c.muted}; }}
QLineEdit[invalid="true"], QPlainTextEdit[invalid="true"] {{ border-color: {c.error_text}; }}
QPlainTextEdit#ComposerEdit {{ background: transparent; border: none; color: {c.text};
                               padding: 0;
                               selection-background-color: {c.accent}; }}
#FieldError {{ color: {c.error_text}; font-size: 12px; }}
#FieldWarning {{ color: {c.warn_text}; font-size: 12px; }}
#DialogNote {{ color: {c.muted}; }}
QGroupBox {{ border: 1px solid {c.border}; border-radius: 8px; margin-top: 14px;
             padding: 12px 8px 8px 8px; }}
QGroupBox::title {{ subcontrol-origin: margin; left: 10px; padding: 0 4px; color: {c.muted}; }}
QScrollBar:vertical {{ background: transparent; width: 10px; margin: 2px; }}
QScrollBar::handle:vertical {{ background: {c.border}; border-radius: 4px; min-height: 32px; }}
QScrollBar::handle:vertical:hover {{ background: {c.muted}; }}
QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical {{ height: 0; }}
QScrollBar::add-page:vertical, QScrollBar::sub-page:vertical {{ background: transparent; }}
QScrollBar:horizontal {{ background: transparent; height: 10px; margin: 2px; }}
QScrollBar::handle:horizontal {{ background: {c.border}; border-radius: 4px; min-width: 32px; }}
QScrollBar::handle:horizontal:hover {{ background: {c.muted}; }}
QScrollBar::add-line:horizontal, QScrollBar::sub-line:horizontal {{ width: 0; }}
QScrollBar::add-page:horizontal, QScrollBar::sub-page:horizontal {{ background: transparent; }}
QFrame#Bubble[found="true"] {{ border: 2px solid {c.accent}; }}
QToolButton#BubbleAction {{ color: {c.muted}; border: 1px solid transparent; border-radius: 5px;
              padding: 1px 4px; font-size: 11px; background: transparent; }}
QToolButton#BubbleAction:hover {{ background: {c.selection}; color: {c.text}; }}
QToolButton#BubbleAction:disabled {{ color: {c.border}; }}
QToolButton#VersionButton {{ color: {c.muted}; border: 1px solid transparent; border-radius: 4px;
              padding: 0 5px; font-size: 14px; font-weight: 700; background: transparent; }}
QToolButton#VersionButton:hover {{ background: {c.selection}; color: {c.text}; }}
QToolButton#VersionButton:disabled {{ color: {c.border}; }}
#VersionLabel {{ color: {c.muted}; font-size: 11px; }}
QToolButton#ThinkingToggle {{ color: {c.muted}; border: 1px solid transparent; font-size: 12px;
              font-style: italic; padding: 0; background: transparent; }}
QFrame#ThinkingBox {{ background: transparent; border: none;
              border-left: 2px solid {c.border}; }}
#ThinkingText {{ color: {c.muted}; background: transparent; }}
QToolButton#CodeCopy {{ color: {c.muted}; border: 1px solid transparent; border-radius: 4px;
              font-size: 11px; padding: 1px 8px; background: transparent; }}
QToolButton#CodeCopy:hover {{ background: {c.selection}; color: {c.text}; }}
QPushButton#LoadMore {{ color: {c.muted}; border: 1px dashed {c.border}; padding: 4px 14px; }}
QLineEdit#SearchBox {{ background: {c.surface}; border-radius: 8px; padding: 5px 6px; }}
QComboBox#AgentFilter {{ background: transparent; border: 1px solid transparent;
              color: {c.muted}; font-size: 11px; padding: 0 22px 0 4px; }}
QComboBox#AgentFilter:hover {{ border-color: {c.border}; }}
QComboBox#AgentFilter:focus {{ border-color: {c.accent}; }}
QFrame#UndoBar, QFrame#EditBanner {{ border: 1px solid {c.warn_border}; border-radius: 8px; }}
QToolButton#PageButton {{ background: transparent; color: {c.muted}; border: 1px solid transparent;
              border-radius: 6px; padding: 4px 6px; }}
QToolButton#PageButton:checked {{ background: {c.selection}; color: {c.text}; }}
QMenuBar {{ background: {c.window}; color: {c.text}; }}
QMenuBar::item:selected {{ background: {c.selection}; }}
QTableWidget {{ background: {c.surface}; color: {c.text}; gridline-color: {c.border};
              border: 1px solid {c.border}; }}
QHeaderView::section {{ background: {c.raised}; color: {c.muted}; border: none;
              padding: 4px 8px; }}
QMenu {{ background: {c.raised}; color: {c.text}; border: 1px solid {c.border};
         padding: 4px; border-radius: 6px; }}
QMenu::item {{ padding: 5px 16px; border-radius: 4px; }}
QMenu::item:selected {{ background: {c.selection}; }}
QTableWidget:focus, QTableView:focus, QListView:focus, QTextBrowser:focus {{
              border: 1px solid {c.accent}; }}

QPushButton:focus {{ border-color: {c.accent}; border-width: 2px; padding: 5px 11px; }}
QPushButton#PrimaryButton:focus, QPushButton#SendButton:focus, QPushButton#ToolAllow:focus {{
              border: 2px solid {c.text}; padding: 5px 11px; }}
QPushButton#RetryButton:focus {{ padding: 2px 9px; }}
QPushButton#LoadMore:focus {{ border-style: solid; padding: 3px 13px; }}
QToolButton:focus, QToolButton#SidebarTool:focus, QToolButton#SwitchAgentButton:focus,
QToolButton#InfoClose:focus, QToolButton#InfoAction:focus, QToolButton#BubbleAction:focus,
QToolButton#VersionButton:focus, QToolButton#ThinkingToggle:focus,
QToolButton#CodeCopy:focus, QToolButton#PageButton:focus,
QToolButton#ToolToggle:focus, QToolButton#AttachButton:focus, QToolButton#AttachRemove:focus,
QToolButton#AttachImage:focus, QToolButton#AttachDocument:focus {{
              border: 1px solid {c.accent}; }}
"""


class Theme:
    """Holds the current colours and text size; ``apply`` sets font, palette and stylesheet."""

    def __init__(self, app: QApplication, base_point_size: float) -> None:
        self._app = app
        self.colors = LIGHT
        self.forced: bool | None = None
        self.text_scale = 1.0
        self.base_point_size = base_point_size

    def apply(self, dark: bool | None = None, text_scale: float | None = None) -> Colors:
        """``dark=None`` keeps following the system (or the last forced scheme);
        ``text_scale=None`` keeps the current text size."""
        if dark is not None:
            self.forced = dark
        if text_scale is not None:
            self.text_scale = min(MAX_TEXT_SCALE, max(MIN_TEXT_SCALE, float(text_scale)))
        use_dark = self.forced if self.forced is not None else system_prefers_dark(self._app)
        self.colors = DARK if use_dark else LIGHT
        self._app.setStyle("Fusion")
        font = self._app.font()
        font.setPointSizeF(self.base_point_size * self.text_scale)
        self._app.setFont(font)
        self._app.setPalette(palette_for(self.colors))
        self._app.setStyleSheet(stylesheet(self.colors, self.text_scale))
        return self.colors

    def follow_system(self) -> None:
        self.forced = None
        self.apply()


def current_colors() -> Colors:
    """The colours in use (LIGHT before a theme is installed)."""
    app = QApplication.instance()
    theme: Theme | None = getattr(app, "_simi_theme", None)
    return theme.colors if theme is not None else LIGHT


def current_text_scale() -> float:
    """The text size factor in use (1.0 before a theme is installed)."""
    app = QApplication.instance()
    theme: Theme | None = getattr(app, "_simi_theme", None)
    return theme.text_scale if theme is not None else 1.0


def install(app: QApplication, dark: bool | None = None, text_scale: float | None = None) -> Theme:
    """Apply the theme, pick a readable font, and follow system light/dark changes.

    ``dark``: True/False forces a scheme, None keeps the current choice (the system's at
    first); use ``Theme.follow_system()`` to go back to the system. ``text_scale``: a factor
    for every text size (see ``TEXT_SCALES``), None keeps the current one (1.0 at first).
    The Theme is kept on the application; calling this again re-applies the existing one.
    """
    theme: Theme | None = getattr(app, "_simi_theme", None)
    if theme is None:
        theme = Theme(app, max(10.0, app.font().pointSizeF()))
        app._simi_theme = theme  # type: ignore[attr-defined]
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(lambda _scheme: theme.apply())
    theme.apply(dark, text_scale)
    return theme


def set_text_scale(app: QApplication, scale: float) -> Theme:
    """Change only the text size (keeps light/dark as chosen)."""
    return install(app, text_scale=scale)


def follow_system(app: QApplication) -> Theme:
    """Go back to the system's light/dark (keeps the text size)."""
    theme = install(app)
    theme.follow_system()
    return theme
