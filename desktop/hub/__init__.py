"""Models people can get: the Hugging Face Hub's GGUF repositories, searched and downloaded.

Qt-free. Spoken over the hub's documented HTTP API with httpx (sync; the window calls it on a
worker thread), not ``huggingface_hub``: we already ship httpx, downloads must land in the
models folder as plain files (not the hub cache's blobs and symlinks), and pause/resume, byte
progress, the disk check and the checksum are ours to control. The hub's address comes from
``HF_ENDPOINT`` (huggingface_hub's convention), so a mirror or a test server can stand in.
Nothing is contacted until the person searches.

- ``client.py``  — ``HubClient``: search, a repository's files (with LFS sha256), byte ranges.
- ``names.py``   — repository ids and file paths checked before they become folders and files.
- ``files.py``   — GGUF files grouped into models (split parts as one), quantization, fit marks.
- ``downloads.py`` — resumable, verified downloads into the models folder; the manifest of
  files the app downloaded (only those may be deleted from the app).
"""
