"""GGUF files as models a person chooses between: quantization from names, split parts grouped,
fit marks, and the header read from the fake hub (``tests/helpers/fake_hub.py``, standing in
for huggingface.co) by Range requests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from desktop.hub.client import HubClient, RepoFile
from desktop.hub.files import (
    GgufModel,
    fetch_header_info,
    fit_of,
    group_gguf,
    quantization_of,
)
from desktop.local.catalog import read_model_info
from desktop.local.starter import STARTER_FILE, starter_model_path
from tests.helpers.fake_hub import GGUF_REPO, MMPROJ_FILE, SPLIT_PARTS, FakeHub

GB = 1_000_000_000


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Llama-3.2-3B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("mistral-7b-instruct-v0.2.Q5_K_S.gguf", "Q5_K_S"),
        ("phi-2.q8_0.gguf", "Q8_0"),
        ("Qwen2.5-7B-Instruct-IQ3_XS.gguf", "IQ3_XS"),
        ("model-IQ4_NL.gguf", "IQ4_NL"),
        ("gemma-2-2b-it-f16.gguf", "F16"),
        ("gemma-2-2b-it-BF16.gguf", "BF16"),
        ("llama-Q4_0_4_4.gguf", "Q4_0_4_4"),
        ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "UD-Q4_K_XL"),
        ("DeepSeek-R1-IQ2_XXS-00001-of-00004.gguf", "IQ2_XXS"),
        (STARTER_FILE, "Q4_1"),
        ("Q4_K_M/model-00001-of-00002.gguf", None),  # the name says none (the folder does)
        ("Qwen2.5-7B-Instruct.gguf", None),
        ("README.md", None),
    ],
)
def test_quantization_of(name: str, quant: str | None) -> None:
    assert quantization_of(name) == quant


def f(path: str, size: int) -> RepoFile:
    return RepoFile(path, size, "0" * 64)


def test_group_gguf_groups_split_parts_skips_projectors_and_sorts_by_size() -> None:
    files = [
        f("README.md", 10),
        f("big/Model-Q8_0-00002-of-00002.gguf", 300),
        f("big/Model-Q8_0-00001-of-00002.gguf", 500),
        f("Model-Q4_K_M.gguf", 400),
        f("mmproj-Model-F16.gguf", 50),
        f("Model-Q2_K.gguf", 200),
        f("Q5_K_M/Model-00001-of-00002.gguf", 600),  # part 2 missing: not offered
    ]
    models = group_gguf(files)
    assert [m.name for m in models] == ["Model-Q2_K", "Model-Q4_K_M", "Model-Q8_0"]
    split = models[-1]
    assert [p.path for p in split.files] == [
        "big/Model-Q8_0-00001-of-00002.gguf",
        "big/Model-Q8_0-00002-of-00002.gguf",
    ]
    assert split.size == 800 and split.quantization == "Q8_0"
    assert split.first.path.endswith("00001-of-00002.gguf")


def test_the_folder_names_the_quantization_when_the_file_does_not() -> None:
    files = [f("Q5_K_M/Model-00001-of-00002.gguf", 1), f("Q5_K_M/Model-00002-of-00002.gguf", 1)]
    assert group_gguf(files)[0].quantization == "Q5_K_M"


def starter_model(size: int | None = None) -> GgufModel:
    path = starter_model_path()
    assert path is not None
    n = size or path.stat().st_size
    return GgufModel("SmolLM2", "Q4_1", (RepoFile(STARTER_FILE, n, None),), n)


def test_fit_with_the_header() -> None:
    path = starter_model_path()
    assert path is not None
    info = read_model_info(path)
    model = starter_model()
    on_gpu = fit_of(model, 2048, ram=16 * GB, vram=8 * GB, header_info=info)
    assert on_gpu.verdict == "gpu" and on_gpu.label == "Fits on the GPU"
    assert on_gpu.estimate is not None and on_gpu.estimate.gpu_layers > 0
    assert "context 2,048" in on_gpu.detail
    in_ram = fit_of(model, 2048, ram=16 * GB, vram=None, header_info=info)
    assert in_ram.verdict == "ram" and in_ram.estimate is not None
    need = in_ram.estimate.total
    assert fit_of(model, 2048, ram=int(need * 1.1), vram=None, header_info=info).verdict == "tight"
    assert fit_of(model, 2048, ram=need - 1, vram=None, header_info=info).verdict == "too_big"
    # a longer context needs more
    long = fit_of(model, 8192, ram=16 * GB, vram=None, header_info=info)
    assert long.estimate is not None and long.estimate.total > need
    # too little VRAM: falls back to RAM
    assert fit_of(model, 2048, ram=16 * GB, vram=10_000, header_info=info).verdict == "ram"


def test_fit_from_file_size_and_unknown_ram() -> None:
    model = GgufModel("M", "Q4_K_M", (f("M-Q4_K_M.gguf", 4 * GB),), 4 * GB)
    fit = fit_of(model, 4096, ram=16 * GB, vram=None)
    assert fit.verdict == "ram" and "estimate from file size" in fit.detail
    assert fit_of(model, 4096, ram=4 * GB, vram=None).verdict == "too_big"
    assert fit_of(model, 4096, ram=16 * GB, vram=24 * GB).verdict == "gpu"
    assert fit_of(model, 4096, ram=None, vram=None).verdict == "unknown"


def test_header_fetched_from_the_hub_equals_the_local_read(hub: FakeHub) -> None:
    path = starter_model_path()
    assert path is not None
    with HubClient() as client:
        models = group_gguf(client.files(GGUF_REPO))
        starter = next(m for m in models if m.first.path == STARTER_FILE)
        info = fetch_header_info(client, GGUF_REPO, starter)
    assert info is not None
    assert replace(info, path=str(path)) == read_model_info(path)
    ranges = [r.headers["range"] for r in hub.file_requests(STARTER_FILE)]
    assert ranges and ranges[0] == "bytes=0-1048575"  # only the first bytes, never the file
    total = len(hub.repos[GGUF_REPO].files[STARTER_FILE])
    assert all(int(r.split("-")[1]) < min(total, 32 << 20) for r in ranges)


def test_header_of_something_that_is_not_gguf_is_none(hub: FakeHub) -> None:
    with HubClient() as client:
        files = {x.path: x for x in client.files(GGUF_REPO)}
        readme = GgufModel("README", None, (files["README.md"],), files["README.md"].size)
        assert fetch_header_info(client, GGUF_REPO, readme) is None
        part = files[SPLIT_PARTS[0]]
        assert fetch_header_info(client, GGUF_REPO, GgufModel("x", None, (part,), 1)) is None
        proj = files[MMPROJ_FILE]
        assert fetch_header_info(client, GGUF_REPO, GgufModel("p", None, (proj,), 1)) is None
        missing = GgufModel("gone", None, (RepoFile("gone.gguf", 100, None),), 100)
        assert fetch_header_info(client, GGUF_REPO, missing) is None
