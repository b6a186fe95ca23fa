"""The context a new local agent gets when nobody chose one: the largest of 8,192 / 4,096 /
2,048 tokens that the model was trained for and that fits in half the available memory (the
starter: trained for 8,192, about 440 MiB at that size); Settings' fixed sizes win; a starter
stored by an older version at the old 2,048 default is raised, one someone chose is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.chat import local_defaults
from desktop.chat.services import Services
from desktop.local.catalog import read_model_info
from desktop.local.context_size import automatic_n_ctx, available_ram
from desktop.local.memory import estimate
from desktop.local.starter import STARTER_AGENT_NAME, STARTER_REF
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import (
    PREF_NEW_LOCAL_MAX_TOKENS,
    PREF_NEW_LOCAL_N_CTX,
    Preferences,
)
from desktop.store.agents import Agent
from tests.helpers import gguf_files

MIB = 1024 * 1024
PLENTY = 64 * 1024 * MIB


@pytest.fixture(scope="module")
def starter_info():
    return read_model_info(gguf_files.starter())


def test_the_starter_gets_the_largest_context_it_was_trained_for_that_fits(starter_info) -> None:
    assert starter_info.context_length == 8192
    need = {n: estimate(starter_info, n).total for n in (2048, 4096, 8192)}
    assert automatic_n_ctx(starter_info, PLENTY) == 8192
    assert automatic_n_ctx(starter_info, None) == 8192  # the system does not say: trained
    # 8,192 needs more than half of this, 4,096 less
    assert automatic_n_ctx(starter_info, 2 * need[8192] - MIB) == 4096
    assert automatic_n_ctx(starter_info, 2 * need[4096] - MIB) == 2048
    assert automatic_n_ctx(starter_info, 10 * MIB) == 2048  # the smallest step, never less


def test_never_past_what_the_model_was_trained_for(tmp_path: Path) -> None:
    trained_4k = gguf_files.rewrite_starter(
        tmp_path / "4k.gguf", set_kv={"llama.context_length": 4096}
    )
    trained_1k = gguf_files.rewrite_starter(
        tmp_path / "1k.gguf", set_kv={"llama.context_length": 1024}
    )
    unknown = gguf_files.rewrite_starter(tmp_path / "x.gguf", drop_kv=("llama.context_length",))
    assert automatic_n_ctx(read_model_info(trained_4k), PLENTY) == 4096
    assert automatic_n_ctx(read_model_info(trained_1k), PLENTY) == 1024
    assert automatic_n_ctx(read_model_info(unknown), PLENTY) == 2048


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 16000000 kB\nMemAvailable: 1024 kB\n", encoding="ascii")
    assert available_ram(meminfo) == 1024 * 1024
    meminfo.write_text("nonsense\n", encoding="ascii")
    fallback = available_ram(meminfo)  # the system's page counts instead
    assert fallback is None or fallback > 0
    assert (available_ram() or 1) > 0


def _reopen(simi_home: Path) -> Services:
    return Services.open(AppPaths.from_env())


def test_a_fresh_starter_follows_the_model_and_the_memory(
    simi_home: Path, monkeypatch: pytest.MonkeyPatch, starter_info
) -> None:
    monkeypatch.setattr(local_defaults, "available_ram", lambda: PLENTY)
    services = _reopen(simi_home)
    try:
        starter = services.agents.by_name(STARTER_AGENT_NAME)
        assert (starter.n_ctx, starter.max_tokens) == (8192, 512)
    finally:
        services.close()
    small = 2 * estimate(starter_info, 4096).total + MIB  # 4,096 fits, 8,192 does not
    monkeypatch.setattr(local_defaults, "available_ram", lambda: small)
    (simi_home / "simi.db").unlink()
    for extra in simi_home.glob("simi.db-*"):
        extra.unlink()
    services = _reopen(simi_home)
    try:
        assert services.agents.by_name(STARTER_AGENT_NAME).n_ctx == 4096
    finally:
        services.close()


def _store_as_an_older_version(services: Services, n_ctx: int | None, edited: bool) -> None:
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    updated = "2099-01-01T00:00:00.000+00:00" if edited else starter.created_at
    services.db.execute(
        "UPDATE agents SET n_ctx = ?, updated_at = ? WHERE id = ?",
        [n_ctx, updated, starter.id],
    )
    services.db.conn.commit()


@pytest.mark.parametrize(
    ("stored", "edited", "after"),
    [(2048, False, 8192), (None, False, 8192), (None, True, 8192), (2048, True, 2048)],
)
def test_an_older_starter_at_the_old_default_is_raised_a_chosen_size_is_kept(
    simi_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    stored: int | None,
    edited: bool,
    after: int,
) -> None:
    monkeypatch.setattr(local_defaults, "available_ram", lambda: PLENTY)
    services = _reopen(simi_home)
    _store_as_an_older_version(services, stored, edited)
    services.close()
    services = _reopen(simi_home)
    try:
        assert services.agents.by_name(STARTER_AGENT_NAME).n_ctx == after
    finally:
        services.close()


def test_new_local_agents_take_the_settings_defaults_chosen_values_stay(
    simi_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_defaults, "available_ram", lambda: PLENTY)
    services = _reopen(simi_home)
    try:
        new = services.agents.create(
            Agent(name="Auto", kind="local", model="m", model_path=STARTER_REF)
        )
        assert (new.n_ctx, new.max_tokens) == (8192, 512)
        services.prefs.set(PREF_NEW_LOCAL_N_CTX, 4096)
        services.prefs.set(PREF_NEW_LOCAL_MAX_TOKENS, 1024)
        fixed = services.agents.create(
            Agent(name="Fixed", kind="local", model="m", model_path=STARTER_REF)
        )
        assert (fixed.n_ctx, fixed.max_tokens) == (4096, 1024)
        chosen = services.agents.create(
            Agent(
                name="Mine",
                kind="local",
                model="m",
                model_path=STARTER_REF,
                n_ctx=1000,
                max_tokens=64,
            )
        )
        assert (chosen.n_ctx, chosen.max_tokens) == (1000, 64)
        cleared = services.agents.update(chosen.with_changes(n_ctx=None))
        assert cleared.n_ctx == 4096  # an emptied context field is the default again
        copy = services.agents.clone(chosen.with_changes(max_tokens=None))
        assert copy.max_tokens is None  # a copy is a copy
        remote = services.agents.create(Agent(name="Far", kind="openai", model="gpt-4o-mini"))
        assert (remote.n_ctx, remote.max_tokens) == (None, None)
    finally:
        services.close()


def test_settings_values_that_make_no_sense_fall_back(tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    prefs.set(PREF_NEW_LOCAL_N_CTX, "lots")
    prefs.set(PREF_NEW_LOCAL_MAX_TOKENS, -5)
    agent = Agent(name="a", kind="local", model="m", model_path=str(tmp_path / "gone.gguf"))
    # a file that cannot be read: the old default (the editor says what is wrong with it)
    assert local_defaults.new_local_fields(prefs, agent, ram=lambda: PLENTY) == {
        "n_ctx": 2048,
        "max_tokens": 512,
        "n_gpu_layers": 0,
    }


GiB = 1024 * MIB
ROOMY_GPU = (True, 100 * GiB)  # a build that offloads, a GPU with plenty free
SMALL_GPU = (True, 16 * MIB)  # less than the starter's GPU part at any context
CPU_BUILD = (False, None)


def _fresh(simi_home: Path) -> Services:
    for stale in simi_home.glob("simi.db*"):
        stale.unlink()
    return _reopen(simi_home)


@pytest.mark.parametrize(("gpu", "layers"), [(ROOMY_GPU, -1), (SMALL_GPU, 0), (CPU_BUILD, 0)])
def test_new_local_agents_and_the_starter_put_every_layer_on_a_gpu_with_room(
    simi_home: Path, monkeypatch: pytest.MonkeyPatch, gpu: tuple[bool, int | None], layers: int
) -> None:
    """One rule (``memory.gpu_layers_for``) for the starter, a new local agent whose GPU
    layers were left empty (the editor's blank field) and one whose field was emptied; a
    value someone chose is never replaced."""
    monkeypatch.setattr(local_defaults, "available_ram", lambda: PLENTY)
    monkeypatch.setattr(local_defaults, "gpu_memory", lambda: gpu)
    services = _fresh(simi_home)
    try:
        assert services.agents.by_name(STARTER_AGENT_NAME).n_gpu_layers == layers
        new = services.agents.create(Agent(name="New", kind="local", model_path=STARTER_REF))
        assert new.n_gpu_layers == layers
        for chosen in (0, 5, -1):
            mine = services.agents.create(
                Agent(
                    name=f"Mine {chosen}",
                    kind="local",
                    model_path=STARTER_REF,
                    n_gpu_layers=chosen,
                )
            )
            assert mine.n_gpu_layers == chosen
            renamed = services.agents.update(mine.with_changes(name=f"Still {chosen}"))
            assert renamed.n_gpu_layers == chosen
        emptied = services.agents.update(new.with_changes(n_gpu_layers=None))
        assert emptied.n_gpu_layers == layers  # an emptied field is the default again
        remote = services.agents.create(Agent(name="Far", kind="openai", model="gpt-4o-mini"))
        assert remote.n_gpu_layers is None
    finally:
        services.close()


def test_the_rule_weighs_the_context_and_kv_type_the_agent_will_have(tmp_path: Path) -> None:
    info = read_model_info(gguf_files.starter())
    prefs = Preferences(tmp_path / "settings.json")
    need = estimate(info, 8192, "f16", -1, gpu_offload=True).vram
    agent = Agent(name="a", kind="local", model_path=STARTER_REF)

    def fields(agent: Agent, free: int) -> dict[str, object]:
        return local_defaults.new_local_fields(
            prefs, agent, ram=lambda: PLENTY, gpu=lambda: (True, free)
        )

    assert fields(agent, need)["n_gpu_layers"] == -1  # 8,192 tokens (automatic) fit exactly
    assert fields(agent, need - 1)["n_gpu_layers"] == 0
    # a smaller context or a lighter KV cache needs less: then it fits
    assert fields(agent.with_changes(n_ctx=2048), need - 1)["n_gpu_layers"] == -1
    assert fields(agent.with_changes(kv_type="q4_0"), need - 1)["n_gpu_layers"] == -1
    gone = agent.with_changes(model_path=str(tmp_path / "gone.gguf"))
    assert fields(gone, 100 * GiB)["n_gpu_layers"] == 0  # a file that cannot be read
    assert "n_gpu_layers" not in fields(agent.with_changes(n_gpu_layers=3), 100 * GiB)


def test_the_default_probe_on_this_build(services: Services) -> None:
    """The probe that runs when no test stands in: the build's own word (a CPU build says
    "no offload" without listing devices), and the starter made with it."""
    from desktop.local import pool
    from desktop.local.memory import gpu_layers_for

    offload, free = local_defaults.gpu_memory()
    assert offload == pool.gpu_memory()[0]
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    info = read_model_info(gguf_files.starter())
    assert starter.n_gpu_layers == gpu_layers_for(info, starter.n_ctx, offload, free)
    if not offload:  # this machine's CPU build: nothing on a GPU, as before
        assert starter.n_gpu_layers == 0


def test_the_starter_file_is_found_again_after_it_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the starter model was found is remembered (a search of sys.path per agent
    header cost ~1 ms); a file that is gone is searched for again, not handed out."""
    from desktop.local import starter

    found = starter.starter_model_path()
    assert found is not None and found.is_file()
    assert starter.starter_model_path() == found
    moved = tmp_path / starter.STARTER_FILE
    moved.write_bytes(b"GGUF")
    monkeypatch.setattr(starter, "_found", tmp_path / "gone.gguf")  # as if it was removed
    monkeypatch.setattr(starter, "_search", lambda: moved)  # and is now installed here
    assert starter.starter_model_path() == moved
