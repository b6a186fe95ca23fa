"""The Knowledge page: collections of folders and files agents can search, their indexing
(progress, pause, cancel, what was skipped and why), a search to try them, and the watch that
keeps indexed collections up to date while the app runs.

``runs.py`` runs at most one index per collection, each on a worker thread; ``watch.py``
(owned by the window, started after the first paint) re-indexes a collection when its folders
change and every few minutes; ``page.py`` is the page; ``words.py`` the figures in words.
"""
