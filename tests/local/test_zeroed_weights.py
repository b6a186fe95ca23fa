"""A model file whose header is intact but whose tensor data is all zeros (weights never
written, or wiped) is refused with a clear message, like a truncated one, wherever the app
reads it: the library, the message (tests/local/test_bad_models.py) and the worker's load.
Before, llama.cpp loaded it and the model wrote garbage without a word."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path

import pytest

from desktop.llm.errors import LocalModelError
from desktop.local.client import WorkerClient
from desktop.local.gguf import (
    GGUFError,
    check_tensor_data_sampled,
    read_header,
    read_header_from,
)
from desktop.local.loading import LoadParams
from tests.helpers import gguf_files

WORDS = "tensor data is all zeros"


def test_all_zero_tensor_data_is_refused_and_some_zeros_are_not(tmp_path: Path) -> None:
    zeroed = gguf_files.zeroed_tensor_data(tmp_path / "zeroed.gguf")
    with pytest.raises(GGUFError, match=WORDS):
        read_header(zeroed)
    # Only the last few KiB are left (a real model's zero rows, a file damaged in places):
    # the check is about weights that are not there at all, and samples to the data's end.
    tail = tmp_path / "tail.gguf"
    gguf_files.zeroed_tensor_data(tail)
    with gguf_files.starter().open("rb") as real, tail.open("r+b") as fh:
        real.seek(-4096, os.SEEK_END)
        fh.seek(-4096, os.SEEK_END)
        fh.write(real.read())
    assert read_header(tail).tensors == read_header(gguf_files.starter()).tensors


def test_the_check_on_the_starter_is_a_fraction_of_a_millisecond() -> None:
    path = gguf_files.starter()
    with path.open("rb") as fh:
        header = read_header_from(fh, os.fstat(fh.fileno()).st_size)
        times = []
        for _ in range(20):
            started = time.perf_counter()
            check_tensor_data_sampled(fh, header)
            times.append(time.perf_counter() - started)
    assert statistics.median(times) < 0.002, f"{statistics.median(times) * 1000:.2f} ms"


@pytest.mark.slow
def test_the_worker_refuses_the_zeroed_file_and_loads_the_starter(tmp_path: Path) -> None:
    """As the app loads a model ahead of a message (``WorkerClient.load``): the worker's
    check names the file and what is wrong; the real starter still loads in that worker."""
    zeroed = gguf_files.zeroed_tensor_data(tmp_path / "zeroed.gguf")

    async def main() -> tuple[LocalModelError, str]:
        client = WorkerClient()
        try:
            with pytest.raises(LocalModelError) as info:
                await client.load(LoadParams(str(zeroed), n_ctx=512))
            pid = client.pid
            await client.load(LoadParams(str(gguf_files.starter()), n_ctx=512))
            assert client.pid == pid  # refused by the check, not by a crash
            return info.value, client.state
        finally:
            client.shutdown()

    error, state = asyncio.run(main())
    # worded as a truncated file is: "The model file … cannot be used: the tensor data is …"
    assert error.user_message.startswith(f"The model file {zeroed} cannot be used: the {WORDS}")
    assert state == "ready"
