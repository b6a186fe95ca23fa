"""Temporary re-export of the old module's names, for the files being rewritten meanwhile
(main_window.py, chat_controller.py, conversation_pane.py) and the committed versions of
tests/ui/test_conversations.py and bench/render.py. The code now lives in transcript.py,
bubble.py, bubble_parts.py, blit_scroll.py and paging.py; delete this file once nothing
imports it."""

from desktop.ui.paging import FIRST_SCREEN, MAX_LOADED, PAGE
from desktop.ui.transcript import Transcript

__all__ = ["FIRST_SCREEN", "MAX_LOADED", "PAGE", "Transcript"]
