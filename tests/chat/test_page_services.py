"""The Qt-free services the Models page, the agent editor, Settings → Tools and File → Export
call (chat/model_library.py, memory_estimate.py, mcp_servers.py, file_places.py), without a
window: what the pages show is tested in tests/ui; here, what the services decide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop.chat import file_places
from desktop.chat.mcp_servers import ServerChanges, store_server
from desktop.chat.memory_estimate import MemoryEstimator, estimate_args
from desktop.chat.model_library import ModelLibrary
from desktop.errors import UserError
from desktop.local.catalog import InfoCache, ModelFileError
from desktop.local.gpu import Device, GpuSupport
from desktop.local.starter import STARTER_REF
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import Preferences
from desktop.store.tools import McpServer, bearer_key_ref, secret_key_ref
from tests.helpers import gguf_files

GiB = 1024**3
CPU_ONLY = GpuSupport(True, False, "CPU", "0.3.36", ())


class Manifest:
    def __init__(self, paths: set[str], broken: bool = False) -> None:
        self.paths, self.broken = paths, broken

    def is_downloaded(self, path: str) -> bool:
        if self.broken:
            raise OSError("unreadable manifest")
        return path in self.paths


class Downloads:
    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.deleted: list[str] = []

    def delete(self, path: str) -> list[Path]:
        self.deleted.append(path)
        return [Path(path)]


def _library(tmp_path: Path, downloads: Any) -> tuple[ModelLibrary, Path, Path]:
    paths = AppPaths(data_dir=tmp_path / "data", config_dir=tmp_path, log_dir=tmp_path / "logs")
    paths.models_dir.mkdir(parents=True)
    mine = gguf_files.rewrite_starter(paths.models_dir / "mine.gguf")
    bad = gguf_files.text_file(paths.models_dir / "notes.gguf")
    prefs = Preferences(tmp_path / "settings.json")
    return ModelLibrary(paths, prefs, InfoCache(), downloads), mine, bad


def test_a_scan_lists_files_their_disk_use_and_what_the_app_downloaded(tmp_path: Path) -> None:
    downloads = Downloads(Manifest(set()))
    library, mine, bad = _library(tmp_path, downloads)
    downloads.manifest.paths = {str(mine)}
    scan = library.scan(lambda: CPU_ONLY)
    by_path = {e.path: e for e in scan.entries}
    assert by_path[str(mine)].info is not None and by_path[str(bad)].error
    assert scan.gpu is CPU_ONLY and scan.downloaded == {str(mine)}
    assert scan.disk.total == mine.stat().st_size + bad.stat().st_size
    assert scan.disk.line.startswith("Models folder ")
    assert library.is_downloaded(str(mine)) and not library.is_downloaded(str(bad))
    assert library.delete(str(mine)) == [mine] and downloads.deleted == [str(mine)]


def test_without_a_readable_manifest_nothing_may_be_deleted(tmp_path: Path) -> None:
    library, mine, _bad = _library(tmp_path, Downloads(Manifest({"x"}, broken=True)))
    assert not library.is_downloaded(str(mine))  # logged, not raised
    bare, mine, _bad = _library(tmp_path / "bare", None)
    assert not bare.is_downloaded(str(mine)) and bare.delete(str(mine)) == []
    assert bare.scan(lambda: CPU_ONLY).downloaded == set()


def test_linking_a_missing_folder_says_why(tmp_path: Path) -> None:
    library, _mine, _bad = _library(tmp_path, None)
    with pytest.raises(UserError, match="does not exist"):
        library.add_folder(tmp_path / "nowhere")
    linked = library.add_folder(tmp_path)
    assert library.folders() == [library.models_dir, linked]
    assert library.remove_folder(tmp_path) == tmp_path and library.folders() == [library.models_dir]


def test_the_estimator_reads_a_file_once_and_says_what_the_fields_give() -> None:
    estimator = MemoryEstimator(gpu=CPU_ONLY)
    path, n_ctx, kv, layers = estimate_args(STARTER_REF, " 4096 ", None, "")
    assert path is not None and (n_ctx, kv, layers) == (4096, "f16", None)
    assert estimator.peek(path) is None
    info = estimator.read(path)
    assert not isinstance(info, ModelFileError) and estimator.peek(path) is info
    est, notes = estimator.estimate(info, 16384, "f16", 8)
    assert est is not None and est.vram == 0
    assert "beyond the 8,192 tokens" in notes and "CPU-only" in notes
    assert estimator.gpu_line() == ""


def test_the_estimator_fills_empty_gpu_layers_as_saving_would() -> None:
    gpu = Device("Vulkan0", "NVIDIA H200", "GPU", 139 * GiB, 138 * GiB)
    estimator = MemoryEstimator(gpu=GpuSupport(True, True, "Vulkan", "0.3.36", (gpu,)))
    path, n_ctx, kv, layers = estimate_args(STARTER_REF, "2048", "f16", "")
    assert path is not None
    info = estimator.read(path)
    assert not isinstance(info, ModelFileError)
    est, notes = estimator.estimate(info, n_ctx, kv, layers)
    assert est is not None and est.gpu_layers == est.block_count + 1  # every layer and the head
    assert "GPU layers automatic: all" in notes and "NVIDIA H200" in estimator.gpu_line()


class Secrets:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def set(self, ref: str, _value: str) -> None:
        self.calls.append(("set", ref))

    def delete(self, ref: str) -> None:
        self.calls.append(("delete", ref))


class Config:
    def __init__(self) -> None:
        self.secrets = Secrets()
        self.added: list[tuple[McpServer, dict[str, str], str | None]] = []

    def add(self, server: McpServer, secrets: dict[str, str], bearer: str | None) -> McpServer:
        self.added.append((server, secrets, bearer))
        return server

    def update(self, server: McpServer) -> McpServer:
        self.secrets.calls.append(("update", server.name))
        return server


def test_an_edited_server_writes_the_keyring_then_the_record_then_drops_old_keys() -> None:
    config = Config()
    old = McpServer(name="web", transport="http", url="https://x.test/mcp", bearer=True)
    new = McpServer(name="web", transport="http", url="https://x.test/mcp", bearer=False)
    changes = ServerChanges(new, {"TOKEN": "t"}, ["OLD"], None)
    assert store_server(config, old, changes) is new
    assert config.secrets.calls == [
        ("set", secret_key_ref("web", "TOKEN")),
        ("update", "web"),
        ("delete", secret_key_ref("web", "OLD")),
        ("delete", bearer_key_ref("web")),
    ]
    fresh = Config()
    store_server(fresh, None, ServerChanges(new, {"A": "1"}, [], "b"))
    assert fresh.added == [(new, {"A": "1"}, "b")] and fresh.secrets.calls == []


def test_exports_start_in_the_folder_used_last_with_a_clean_name(tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    chosen = tmp_path / "exports" / "a.md"
    chosen.parent.mkdir()
    file_places.remember(prefs, str(chosen))
    suggested, filters = file_places.export_suggestion(prefs, 'What is "2/3"?', "md")
    assert suggested == str(chosen.parent / "What is 2 3.md") and filters == "Markdown (*.md)"
    suggested, filters = file_places.export_suggestion(prefs, "Notes", "json")
    assert suggested.endswith("Notes.json") and filters == "JSON (*.json)"
    assert file_places.import_folder(prefs) == str(chosen.parent)
    assert file_places.proposed_path(prefs, "stats.csv") == str(chosen.parent / "stats.csv")
