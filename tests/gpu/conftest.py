"""The GPU path for real, on Mesa's software Vulkan device (lavapipe): run by
``scripts/test-gpu-path``, which installs the Vulkan build of llama.cpp into its own venv and
sets ``SIMI_GPU_TESTS=1`` and ``GGML_VK_VISIBLE_DEVICES=0`` (ggml-vulkan hides CPU-type devices
unless they are listed). Not part of ``./scripts/test``: the build takes ~11 minutes on 2 cores
and replies run at ~1 token/s there. Without ``SIMI_GPU_TESTS`` nothing here is collected."""

from __future__ import annotations

import os

if not os.environ.get("SIMI_GPU_TESTS"):
    collect_ignore_glob = ["test_*.py"]

if os.environ.get("SIMI_GPU_TESTS"):
    from tests.ui.conftest import qloop  # noqa: F401  (the window's event loop, for pages)
