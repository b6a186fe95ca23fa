"""Attachments: what a file is, its text or its sized image, ready for a model.

Qt-free and blocking (file reads, PDF parsing, image decoding): the window calls it through
``desktop/chat/attachments.py`` off the GUI thread, the CLI and prompt sets directly.
``prepare.py`` is the one pipeline (sniff, store, extract or inspect); ``kinds.py`` says what a
file is by its bytes, ``documents.py`` turns documents into text, ``images.py`` sizes images
for each provider. Every failure a person sees is an ``AttachError`` with finished words for
the attachment's chip.
"""
