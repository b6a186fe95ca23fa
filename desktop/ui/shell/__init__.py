"""The main window and what frames every page: the window, its sidebar's page bar, the chat
page's pane stack, menus and shortcuts, the store watcher that shows changes made elsewhere,
Help and About, the crash dialog, export and import."""
