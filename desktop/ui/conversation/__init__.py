"""One conversation on screen: the pane, its presenter (a turn from Send to the stored reply),
the transcript and its paging, bubbles, tool cards and approvals, files attached in the
composer and shown in a question, the sidebar's conversation list, the warm local start."""
