"""The model library: folders linked in place, header facts per file, errors per row."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.llm.errors import LocalModelError
from desktop.local.catalog import PREF_MODEL_FOLDERS, InfoCache, ModelCatalog
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import Preferences
from tests.helpers import gguf_files


@pytest.fixture
def catalog(simi_home: Path) -> ModelCatalog:
    paths = AppPaths.from_env()
    paths.ensure()
    return ModelCatalog(paths, Preferences(paths.settings_path))


def test_starter_is_always_listed_even_with_an_empty_library(catalog) -> None:
    entries = catalog.entries()
    assert len(entries) == 1 and entries[0].starter and entries[0].error is None
    assert entries[0].info.architecture == "llama"


def test_added_folder_is_linked_in_place_and_remembered(catalog, tmp_path: Path) -> None:
    folder = tmp_path / "my models"
    (folder / "publisher" / "model").mkdir(parents=True)
    model = gguf_files.copy_starter(folder / "publisher" / "model" / "tiny.gguf")
    (folder / "readme.txt").write_text("not a model")
    catalog.add_folder(folder)
    again = ModelCatalog(catalog._paths, Preferences(catalog._paths.settings_path))
    assert again.added_folders() == [folder.resolve()]
    [entry] = [e for e in again.entries() if not e.starter]
    assert entry.path == str(model.resolve()) and entry.info and entry.info.block_count == 30
    assert not any(catalog.models_dir.rglob("*.gguf"))  # nothing was copied
    again.remove_folder(folder)
    assert [e for e in again.entries() if not e.starter] == []
    assert model.exists()  # unlinking never deletes


def test_models_dir_files_and_split_parts(catalog) -> None:
    catalog.models_dir.mkdir(parents=True, exist_ok=True)
    gguf_files.copy_starter(catalog.models_dir / "big-00001-of-00002.gguf")
    (catalog.models_dir / "big-00002-of-00002.gguf").write_bytes(b"GGUF")
    names = [Path(e.path).name for e in catalog.entries() if not e.starter]
    assert names == ["big-00001-of-00002.gguf"]  # part 2 is part of the same model


def test_folder_errors_are_clear(catalog, tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="does not exist"):
        catalog.add_folder(tmp_path / "nope")
    with pytest.raises(LocalModelError, match="not in the model library"):
        catalog.remove_folder(tmp_path)
    catalog._prefs.set(PREF_MODEL_FOLDERS, "garbage")  # a hand-edited settings file
    assert catalog.added_folders() == []


def test_info_cache_rereads_a_replaced_file(tmp_path: Path) -> None:
    cache = InfoCache()
    path = gguf_files.copy_starter(tmp_path / "m.gguf")
    assert cache.get(path).chat_template_present
    assert cache.get(path) is cache.get(path)  # cached per path + mtime + size
    gguf_files.rewrite_starter(tmp_path / "other.gguf", drop_kv=("tokenizer.chat_template",))
    (tmp_path / "other.gguf").replace(path)
    assert not cache.get(path).chat_template_present


def test_callers_asking_for_one_file_at_once_share_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Picking a local agent asks for its header from two worker threads at once; a header
    read is Python work that holds the GIL, so the second waits for the first's answer."""
    import threading
    import time

    from desktop.local import catalog as catalog_module

    model = gguf_files.rewrite_starter(tmp_path / "model.gguf")
    real = catalog_module.read_model_info
    reads: list[str] = []

    def counted(path):  # the real read, slowed so that the two calls overlap
        reads.append(str(path))
        time.sleep(0.2)
        return real(path)

    monkeypatch.setattr(catalog_module, "read_model_info", counted)
    cache = InfoCache()
    answers: list[object] = []
    threads = [threading.Thread(target=lambda: answers.append(cache.get(model))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reads == [str(model)]
    assert len(answers) == 2 and answers[0] is answers[1]
    assert answers[0].architecture == "llama"
    assert cache._reading == {}  # nothing kept per read once it is done
