"""`simi models`, run as a user runs it: a subprocess on a real SIMI_HOME."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import gguf_files
from tests.helpers.cli import simi


def test_models_list_add_and_remove_folder(cli_env, tmp_path: Path) -> None:
    folder = tmp_path / "downloads"
    folder.mkdir()
    gguf_files.rewrite_starter(folder / "plain.gguf", drop_kv=("tokenizer.chat_template",))
    gguf_files.truncated_tensor_data(folder / "half.gguf")

    listed = json.loads(simi(cli_env, "models", "list", "--json").stdout)
    assert [m["starter"] for m in listed["models"]] == [True]
    assert listed["gpu"]["backend"] in ("CPU", "CUDA", "Metal", "Vulkan", "ROCm", "SYCL", "GPU")

    added = simi(cli_env, "models", "add-folder", str(folder))
    assert added.returncode == 0 and "2 GGUF files" in added.stdout
    data = json.loads(simi(cli_env, "models", "list", "--json").stdout)
    rows = {Path(m["path"]).name: m for m in data["models"]}
    assert rows["plain.gguf"]["info"]["chat_template_present"] is False
    assert rows["plain.gguf"]["info"]["block_count"] == 30
    assert rows["half.gguf"]["info"] is None and "truncated" in rows["half.gguf"]["error"]
    text = simi(cli_env, "models", "list").stdout
    assert "half.gguf\tERROR: the tensor data is truncated" in text
    assert "no chat template" in text

    removed = simi(cli_env, "models", "remove-folder", str(folder))
    assert removed.returncode == 0 and (folder / "plain.gguf").exists()
    again = simi(cli_env, "models", "remove-folder", str(folder))
    assert again.returncode == 1 and "not in the model library" in again.stderr


def test_models_gpu_json(cli_env) -> None:
    out = simi(cli_env, "models", "gpu", "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 0 and isinstance(data["gpu_offload"], bool)
    assert any(d["type"] == "CPU" for d in data["devices"])
