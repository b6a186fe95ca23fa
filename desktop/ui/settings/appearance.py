"""Theme (System / Light / Dark) and text size from Settings, applied to the application.

``apply(app, theme_name, text_size)`` puts a choice into effect at once (Settings calls it as
the person picks, and again with the saved values on Cancel); ``apply_saved(app, prefs)`` does
it at start-up. The colours and the stylesheet are ``desktop.ui.kit.theme``'s: this module only
says which scheme and what scale.
"""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from desktop.settings.prefs import TEXT_SIZES, Preferences, text_size_choice, theme_choice
from desktop.ui.kit import theme

PREF_FOOTER = "ui.stats_footer"
FOOTER_CHOICES = (
    ("always", "Always"),
    ("hover", "When the pointer is on the message"),
    ("never", "Never"),
)
THEME_CHOICES = (
    ("system", "Same as the system"),
    ("light", "Light"),
    ("dark", "Dark"),
)
TEXT_SIZE_CHOICES = (
    ("small", "Small"),
    ("normal", "Normal"),
    ("large", "Large"),
    ("larger", "Larger"),
)


def _dark(theme_name: str) -> bool | None:
    return {"light": False, "dark": True}.get(theme_name)


def apply(app: QApplication, theme_name: str, text_size: str) -> None:
    """Show the application in this scheme ("system" follows the OS, and its changes) and at
    this text size (a ``TEXT_SIZES`` key)."""
    dark = _dark(theme_name)
    current = theme.install(app, dark=dark, text_scale=TEXT_SIZES.get(text_size, 1.0))
    if dark is None and current.forced is not None:
        # Where the platform does not say its colour scheme, the theme reads it from the
        # application palette: the platform's, not the one a forced scheme set.
        app.setPalette(QPalette())
        current.follow_system()


def apply_saved(app: QApplication, prefs: Preferences) -> None:
    apply(app, theme_choice(prefs), text_size_choice(prefs))


def footer_mode(prefs: Preferences) -> str:
    """Where a message's statistics line shows: "always", "hover" or "never"."""
    value = prefs.get(PREF_FOOTER, "always")
    return value if value in {k for k, _ in FOOTER_CHOICES} else "always"
