from pathlib import Path

import pytest

from desktop.errors import ValidationError
from desktop.local.starter import STARTER_AGENT_NAME, STARTER_REF
from desktop.store.agents import Agent


def test_first_open_creates_the_ready_starter_agent(services) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    assert agent is not None
    assert agent.kind == "local" and agent.model_path == STARTER_REF
    assert services.agents.validate(agent) == {}


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"name": "  "}, "name", "name"),
        ({"name": "smollm2 (LOCAL)"}, "name", "already exists"),
        ({"kind": "openai-compatible", "base_url": "localhost:8080"}, "base_url", "http"),
        ({"kind": "openai-compatible", "base_url": "ftp://x/v1"}, "base_url", "http"),
        ({"kind": "openai-compatible", "base_url": "http://[::1/v1"}, "base_url", "http"),
        ({"kind": "openai-compatible"}, "base_url", "localhost:8080"),
        ({"kind": "no-such-kind"}, "kind", "openai-compatible"),
        ({"temperature": 3.0}, "temperature", "between 0 and 2"),
        ({"top_p": 0.0}, "top_p", "Top-p"),
        ({"model_path": "/nope/missing.gguf"}, "model_path", "does not exist"),
        ({"kv_type": "q3"}, "kv_type", "KV"),
        ({"n_ctx": 10}, "n_ctx", "Context size"),
    ],
)
def test_invalid_fields_get_messages_a_person_understands(services, changes, field, words):
    base = Agent(name="New", kind="local", model="m", model_path=STARTER_REF, n_ctx=2048)
    with pytest.raises(ValidationError) as info:
        services.agents.create(base.with_changes(**changes))
    assert field in info.value.fields
    assert words.lower() in info.value.fields[field].lower()
    assert services.agents.by_name("New") is None


def test_create_clone_edit_delete(services) -> None:
    svc = services.agents
    created = svc.create(
        Agent(
            name="Groq Llama",
            kind="openai-compatible",
            base_url="https://api.groq.com/openai/v1/",
            model="llama-3.1-8b-instant",
            temperature=0.2,
            stop=("###",),
        )
    )
    assert created.base_url == "https://api.groq.com/openai/v1"  # trailing slash normalised
    copy = svc.clone(created)
    assert copy.name == "Groq Llama (copy)" and copy.model == created.model
    assert copy.stop == ("###",) and copy.id != created.id
    assert svc.clone(created).name == "Groq Llama (copy 2)"
    edited = svc.update(copy.with_changes(name="Fast one", temperature=1.1))
    assert svc.get(edited.id).temperature == 1.1 and svc.get(edited.id).name == "Fast one"
    svc.delete(edited)
    assert svc.by_name("Fast one") is None
    assert svc.by_name("Groq Llama") is not None


def test_key_stays_with_its_host(services, secret_service_env) -> None:
    svc = services.agents
    agent = svc.create(
        Agent(
            name="Remote", kind="openai-compatible", base_url="https://one.example/v1", model="m"
        ),
        api_key="sk-host-one-secret",
    )
    assert svc.api_key(agent) == "sk-host-one-secret"
    moved = svc.update(agent.with_changes(base_url="https://two.example/v1"))
    assert svc.api_key(moved) is None  # the key is not carried to another host
    assert svc.api_key(agent) == "sk-host-one-secret"  # the old endpoint keeps its own


def test_a_key_follows_its_agent_within_the_same_host(services, secret_service_env) -> None:
    svc = services.agents
    agent = svc.create(
        Agent(name="Moving", kind="openai", base_url="https://one.example/v1", model="m"),
        api_key="sk-follows-the-host",
    )
    # Another path and port, and another kind: a new endpoint on the same host.
    moved = svc.update(
        agent.with_changes(kind="openai-compatible", base_url="https://one.example:8443/api")
    )
    assert moved.key_ref != agent.key_ref
    assert svc.api_key(moved) == "sk-follows-the-host"

    clear = svc.update(moved.with_changes(base_url="http://one.example:8443/api"))
    assert svc.api_key(clear) is None  # never from https:// to plain http://

    # The endpoint it lands on has a key of its own: that one stays.
    other = svc.create(
        Agent(name="Other", kind="openai", base_url="https://one.example/v2", model="m"),
        api_key="sk-the-other-endpoints-own",
    )
    landed = svc.update(moved.with_changes(kind="openai", base_url="https://one.example/v2"))
    assert landed.key_ref == other.key_ref
    assert svc.api_key(landed) == "sk-the-other-endpoints-own"


def test_switching_kind_clears_the_other_sides_fields(services) -> None:
    local = services.agents.by_name(STARTER_AGENT_NAME)
    remote = services.agents.validate(
        local.with_changes(kind="openai", model="gpt-4o-mini", name="Switched")
    )
    assert remote == {}
    saved = services.agents.create(
        local.with_changes(kind="openai", model="gpt-4o-mini", name="Switched")
    )
    assert (saved.model_path, saved.n_ctx, saved.n_gpu_layers) == (None, None, None)
    assert saved.base_url == "https://api.openai.com/v1"
    back = services.agents.update(
        saved.with_changes(kind="local", model="", model_path=STARTER_REF)
    )
    assert back.base_url is None and back.endpoint_id is None
    assert back.model == "SmolLM2-135M-Instruct.Q4_1"  # named after its file


def test_local_agent_with_custom_file(services, tmp_path: Path) -> None:
    from desktop.local.starter import starter_model_path

    path = starter_model_path()
    agent = services.agents.create(
        Agent(
            name="Mine",
            kind="local",
            model="x",
            model_path=str(path),
            n_ctx=1024,
            n_gpu_layers=-1,
            n_threads=2,
            flash_attn=True,
            kv_type="q8_0",
        )
    )
    again = services.agents.get(agent.id)
    assert (again.n_ctx, again.n_gpu_layers, again.flash_attn, again.kv_type) == (
        1024,
        -1,
        True,
        "q8_0",
    )


def test_fresh_database_never_inherits_a_key_from_the_keyring(secret_service_env, tmp_path):
    """Endpoint ids restart at 1 in a new database (e.g. after `simi db move-aside`); the key of
    an old endpoint must not be sent to whatever host the new endpoint 1 points at."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    agent = Agent(name="R", kind="openai-compatible", base_url="https://a.example/v1", model="m")
    first = Services.open(AppPaths.from_env({"SIMI_HOME": str(tmp_path / "one")}))
    created = first.agents.create(agent, api_key="sk-old-database-key")
    first.close()
    second = Services.open(AppPaths.from_env({"SIMI_HOME": str(tmp_path / "two")}))
    other = second.agents.create(agent.with_changes(base_url="https://b.example/v1"))
    assert other.endpoint_id == created.endpoint_id
    assert second.agents.api_key(other) is None
    second.close()


def test_local_load_options_reach_llama_cpp_parameters(services) -> None:
    from desktop.chat.kinds import load_params_for

    agent = services.agents.by_name("SmolLM2 (local)").with_changes(
        n_batch=256, main_gpu=1, n_gpu_layers=-1, flash_attn=True, kv_type="q4_0", n_threads=3
    )
    params = load_params_for(agent)
    assert (params.n_batch, params.main_gpu, params.n_gpu_layers) == (256, 1, -1)
    assert (params.flash_attn, params.kv_type, params.n_threads) == (True, "q4_0", 3)
