"""The Vulkan build on lavapipe: what a person with a GPU gets, end to end (issue 26 item 4).

lavapipe (llvmpipe) is a real Vulkan driver that computes on the CPU: the same ggml-vulkan
code, shaders and buffers as on a GPU, at ~1 token/s. Each test here loads the starter with
every layer on ``Vulkan0`` through SIMI's own worker, as the app does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from desktop.local import gpu
from desktop.local.starter import STARTER_AGENT_NAME

pytestmark = pytest.mark.slow


def test_the_build_and_its_device_are_named_from_llama_cpp() -> None:
    support = gpu.detect()
    assert support.gpu_offload and support.backend == "Vulkan"
    [vulkan] = [d for d in support.devices if d.name == "Vulkan0"]
    assert vulkan.software and vulkan.label.startswith("llvmpipe") and "(software)" in vulkan.label
    assert "Vulkan0 · llvmpipe" in support.summary or "llvmpipe" in support.summary


def test_automatic_gpu_layers_never_choose_the_software_device() -> None:
    """llvmpipe's "free memory" is RAM: GPU room for no one (~1 vs 74 tok/s on the CPU)."""
    from desktop.local.pool import gpu_memory

    assert gpu_memory() == (True, None)


def test_a_new_local_agent_keeps_its_layers_off_the_software_device(services: Any) -> None:
    from desktop.local.starter import STARTER_REF
    from desktop.store.agents import Agent

    agent = services.agents.create(Agent(name="New local", kind="local", model_path=STARTER_REF))
    assert agent.n_gpu_layers == 0  # llvmpipe is the CPU again: every layer stays on the CPU


def _reply(services: Any, agent: Any, text: str) -> Any:
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, text)
    return asyncio.run(services.chat.run(turn))


def test_a_reply_with_every_layer_on_vulkan(services: Any, qtbot: Any) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    agent = services.agents.update(agent.with_changes(n_gpu_layers=-1, max_tokens=4, seed=1))
    result = _reply(services, agent, "Hi")
    assert result.status == "complete" and result.text.strip()
    row = result.stats.as_row()
    print(
        "stats row:",
        {
            k: row.get(k)
            for k in (
                "backend",
                "device",
                "offloaded_layers",
                "vram_bytes",
                "n_gpu_layers",
                "load_ms",
                "decode_tok_s",
                "prefill_tok_s",
            )
        },
    )
    assert row["backend"] == "Vulkan"
    assert row["offloaded_layers"] == "31/31"
    assert row["device"] == "Vulkan0 · llvmpipe (software)"
    assert row["vram_bytes"] > 50 * 1024 * 1024  # weights + KV cache + compute on Vulkan0

    # the reply's timeline says where it ran, from the load
    from PySide6.QtWidgets import QLabel

    from desktop.ui.stats.timeline_panel import TimelinePanel

    panel = TimelinePanel(row)
    qtbot.addWidget(panel)
    texts = [label.text() for label in panel.findChildren(QLabel)]
    assert "Where it ran" in texts
    assert any("31/31 layers on Vulkan0 · llvmpipe (software)" in t for t in texts), texts


def test_the_models_page_shows_the_layers_and_buffers_on_vulkan0(
    services: Any, qtbot: Any, qloop: Any
) -> None:
    """Load from the Models page with every layer on the GPU: the page says where the model
    runs and what llama.cpp allocated on Vulkan0, from the worker's own load report."""
    import os

    from desktop.ui.models.page import ModelsPage
    from tests.helpers import gguf_files

    starter = services.agents.by_name(STARTER_AGENT_NAME)
    services.agents.update(starter.with_changes(n_gpu_layers=-1, n_ctx=512))
    page = ModelsPage(services)
    qtbot.addWidget(page)
    with qtbot.waitSignal(page.refreshed, timeout=30_000):
        page.refresh()
    assert "Vulkan0 · llvmpipe (software)" in page.backend_label.text()
    page.select(gguf_files.starter())
    page.model_actions.load_button.click()
    qtbot.waitUntil(lambda: page.cell_text(0, "State") == "Loaded", timeout=240_000)
    qtbot.waitUntil(lambda: "Where it runs" in page.details.text(), timeout=30_000)
    lines = page.details.text().splitlines()
    print("\n".join(line for line in lines if line.startswith(("Where it runs", "Buffers"))))
    assert "Where it runs: 31/31 layers on Vulkan0 · llvmpipe (software)" in lines
    buffers = page.cell_text(0, "Buffers")
    assert buffers.startswith("Vulkan0: weights ") and "KV cache" in buffers
    assert "compute" in buffers and "; CPU: weights " in buffers  # token embeddings stay on CPU
    page.resize(900, 640)
    page.show()
    shot = os.environ.get("SIMI_GPU_SHOTS", "/tmp/simi-gpu-shots")
    os.makedirs(shot, exist_ok=True)
    page.grab().save(os.path.join(shot, "models-page-vulkan.png"))
    page.model_actions.unload_button.click()
    qtbot.waitUntil(lambda: page.cell_text(0, "State") == "Not loaded", timeout=30_000)
