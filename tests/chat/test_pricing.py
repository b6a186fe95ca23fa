"""What a call cost, stored on its stats row when it ends: provider-reported cost, the agent's
override, the genai-prices dataset, local 0, or unknown (NULL, never 0). Turns run through the
real ChatService against loopback servers, into a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.format import stats_line
from desktop.chat.price_book import PRICES_URL_ENV, PriceBook
from desktop.chat.pricing import LOCAL, UNKNOWN, price_call, provider_ref
from desktop.errors import UserError
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from tests.helpers.cli import packages_loaded, run_text
from tests.helpers.fault_server import FaultServer, Reply, error_reply, replay

KEY = "sk-test-pricing-5e1f0a"


def openai_stream(
    model: str = "gpt-4o-mini-2024-07-18",
    prompt: int = 1000,
    cached: int = 400,
    output: int = 500,
) -> bytes:
    """An OpenAI Chat Completions stream: two text chunks, then the usage chunk."""

    def event(data: dict[str, Any]) -> str:
        return f"data: {json.dumps({'id': 'c1', 'model': model, **data})}\n\n"

    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return (
        event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}]})
        + event(
            {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]}
        )
        + event({"choices": [], "usage": usage})
        + "data: [DONE]\n\n"
    ).encode()


def _run(services: Any, agent: Agent, text: str = "hello?") -> Any:
    conv = services.conversations.create(agent.id)
    turn = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, text)))
    assert turn.status == "complete", turn.error
    return turn


def _remote(services: Any, server: FaultServer, kind: str = "openai", **fields: Any) -> Agent:
    fields.setdefault("model", "gpt-4o-mini")
    fields.setdefault("name", f"{kind} agent")
    base = server.url + "/v1"
    return services.agents.create(Agent(kind=kind, base_url=base, **fields), api_key=KEY)


def _costs(row: dict[str, Any]) -> tuple[Any, ...]:
    names = ("cost_usd", "cost_input_usd", "cost_cached_usd", "cost_output_usd", "price_source")
    return tuple(row[n] for n in names)


@pytest.fixture(autouse=True)
def bundled_prices() -> Iterator[None]:
    """Each test starts and ends on the bundled prices (an update is process-wide)."""
    yield
    from genai_prices import data_snapshot

    data_snapshot.set_custom_snapshot(None)


# through a real turn ---------------------------------------------------------------------------
def test_openai_gpt_4o_mini_is_priced_from_the_dataset_with_the_cached_input_price(
    services: Any,
) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
        turn = _run(services, _remote(services, server))
    row = services.stats.for_message(turn.assistant_message_id)
    # gpt-4o-mini: $0.15 / M input, $0.075 / M cached input, $0.60 / M output
    # 600 new input, 400 cached, 500 output
    assert _costs(row) == (0.00042, 0.00009, 0.00003, 0.0003, "genai-prices")
    assert _costs(turn.stats.as_row()) == _costs(row)
    assert "$0.0004" in stats_line(row, "openai agent", "gpt-4o-mini")


def test_anthropic_cache_reads_are_priced_at_the_cache_price(services: Any) -> None:
    with FaultServer(replay("anthropic_thinking.sse")) as server:
        turn = _run(services, _remote(services, server, "anthropic", model="claude-sonnet-4-5"))
    row = services.stats.for_message(turn.assistant_message_id)
    # claude-sonnet-4-5: $3 / M input, $0.30 / M cache read, $15 / M output;
    # 21 new input, 1,800 read from the cache, 42 output
    assert _costs(row) == (0.001233, 0.000063, 0.00054, 0.00063, "genai-prices")


def test_the_agents_own_price_wins_over_the_dataset(services: Any) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
        agent = _remote(services, server, price_input_per_m=1.0, price_output_per_m=2.0)
        turn = _run(services, agent)
    # cached input at the override's input price: (600 + 400) x $1 / M + 500 x $2 / M
    assert _costs(turn.stats.as_row()) == (0.002, 0.0006, 0.0004, 0.001, "agent")


def test_a_cost_the_provider_reports_wins_over_every_price(services: Any) -> None:
    with FaultServer(replay("openrouter_reasoning.sse")) as server:
        agent = _remote(services, server, "openai-compatible", price_input_per_m=5.0)
        turn = _run(services, agent)
    row = services.stats.for_message(turn.assistant_message_id)
    # a loopback server is no provider the dataset knows: the total only, no parts
    assert _costs(row) == (0.0000912, None, None, None, "reported")


def test_an_unknown_model_has_no_cost_and_is_not_counted_as_zero(services: Any) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream(model="my-own-finetune"))) as server:
        agent = _remote(services, server, model="my-own-finetune")
        turn = _run(services, agent)
    row = services.stats.for_message(turn.assistant_message_id)
    assert _costs(row) == (None, None, None, None, None)
    assert "—" in stats_line(row) and "$0" not in stats_line(row)
    (aggregate,) = services.stats.per_agent(agent.name)
    assert aggregate["cost_usd"] is None


def test_a_self_hosted_server_is_not_priced_as_openai(services: Any) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
        agent = _remote(services, server, "openai-compatible", name="vLLM box")
        turn = _run(services, agent)  # serves "gpt-4o-mini" on 127.0.0.1
    assert _costs(turn.stats.as_row()) == (None, None, None, None, None)
    # nothing to look up, so the turn neither loaded the price list nor waited for it
    assert not services.chat.prices.ready


def test_a_self_hosted_server_with_the_agents_own_price_is_priced_without_the_list(
    services: Any,
) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
        agent = _remote(
            services,
            server,
            "openai-compatible",
            name="Rented GPU",
            price_input_per_m=1.0,
            price_output_per_m=2.0,
        )
        turn = _run(services, agent)
    assert turn.stats.price_source == "agent" and turn.stats.cost_usd > 0
    assert not services.chat.prices.ready


def test_history_keeps_its_price_after_the_override_changes(services: Any) -> None:
    with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
        agent = _remote(services, server, price_input_per_m=1.0, price_output_per_m=2.0)
        first = _run(services, agent)
        agent = services.agents.update(agent.with_changes(price_output_per_m=20.0))
        second = _run(services, agent)
    assert services.stats.for_message(first.assistant_message_id)["cost_usd"] == 0.002
    assert services.stats.for_message(second.assistant_message_id)["cost_usd"] == 0.011


def test_a_local_agent_costs_nothing_and_says_local(services: Any) -> None:
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    row = {"prompt_tokens": 30, "output_tokens": 12, "finish_reason": "stop"}
    # no dataset needed: known at once, even before the price book is warm
    assert not services.chat.prices.ready
    assert services.chat.prices.price_if_ready(row, starter) == LOCAL
    assert LOCAL.fields()["cost_usd"] == 0.0 and LOCAL.fields()["price_source"] == "local"
    # free, so the footer does not repeat it on every local reply; never "—" or "$0"
    line = stats_line({**row, **LOCAL.fields()})
    assert line.endswith("30 → 12 tokens") and "—" not in line and "$" not in line


# the rules, without a turn --------------------------------------------------------------------
def _row(model: str, **extra: Any) -> dict[str, Any]:
    base = {"prompt_tokens": 1000, "cached_tokens": 400, "output_tokens": 500}
    return {**base, "model_requested": model, "started_at": "2026-12-01T11:16:16.123+00:00"} | extra


def _compatible(base_url: str, model: str) -> Agent:
    """An OpenAI-compatible agent at ``base_url`` asking for ``model``."""
    return Agent(name="agent", kind="openai-compatible", base_url=base_url, model=model)


def test_hosted_openai_compatible_services_are_priced_by_their_address(tmp_path: Path) -> None:
    book = PriceBook(tmp_path / "prices.json")
    groq = _compatible("https://api.groq.com/openai/v1", "llama-3.1-8b-instant")
    priced = book.price(_row("llama-3.1-8b-instant"), groq)
    assert priced.price_source == "genai-prices" and priced.cost_usd == 0.00009
    for url in (
        "http://localhost:11434/v1",
        "http://192.168.1.20:8000/v1",
        "https://10.0.0.5/v1",
        "https://gpu-box.lan/v1",
        "http://api.groq.com/openai/v1",  # not https: not the hosted API
    ):
        agent = groq.with_changes(base_url=url)
        assert provider_ref(agent.kind, url) is None, url
        assert book.price(_row("llama-3.1-8b-instant"), agent) == UNKNOWN, url


def test_openrouter_reported_cost_is_split_by_the_datasets_prices(tmp_path: Path) -> None:
    book = PriceBook(tmp_path / "prices.json")
    agent = _compatible("https://openrouter.ai/api/v1", "openai/gpt-4o-mini")
    row = _row("openai/gpt-4o-mini", cost_usd=0.00084, price_source="reported")
    priced = book.price(row, agent)
    assert priced.price_source == "reported" and priced.cost_usd == 0.00084
    parts = (priced.cost_input_usd, priced.cost_cached_usd, priced.cost_output_usd)
    assert parts == pytest.approx((0.00018, 0.00006, 0.0006))  # the dataset's split, doubled


def test_an_override_of_one_side_takes_the_other_from_the_dataset(tmp_path: Path) -> None:
    book = PriceBook(tmp_path / "prices.json")
    agent = Agent(name="a", kind="openai", model="gpt-4o-mini", price_output_per_m=1.0)
    priced = book.price(_row("gpt-4o-mini"), agent)
    # input and cached input from the dataset ($0.15, $0.075), output $1 / M
    assert (priced.cost_usd, priced.price_source) == (0.00062, "agent")
    unknown = agent.with_changes(model="my-own-finetune")
    assert book.price(_row("my-own-finetune"), unknown) == UNKNOWN
    assert price_call(_row("m"), agent.with_changes(price_input_per_m=1.0)).cost_usd == 0.0015


def test_a_call_without_token_counts_has_no_cost(tmp_path: Path) -> None:
    book = PriceBook(tmp_path / "prices.json")
    agent = Agent(name="a", kind="openai", model="gpt-4o-mini")
    assert book.price({"model_requested": "gpt-4o-mini", "finish_reason": "error"}, agent) == (
        UNKNOWN
    )


# updating the prices --------------------------------------------------------------------------
NEW_PRICES = [
    {
        "id": "openai",
        "name": "OpenAI",
        "api_pattern": "https://api\\.openai\\.com",
        "models": [
            {
                "id": "gpt-4o-mini",
                "match": {"starts_with": "gpt-4o-mini"},
                "prices": {"input_mtok": 1, "cache_read_mtok": 0.5, "output_mtok": 2},
            }
        ],
    }
]


def test_update_prices_fetches_once_saves_and_is_used_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(name="a", kind="openai", model="gpt-4o-mini")
    body = json.dumps(NEW_PRICES).encode()
    with FaultServer(lambda _r: Reply(body=body, content_type="application/json")) as server:
        monkeypatch.setenv(PRICES_URL_ENV, server.url + "/data.json")
        book = PriceBook(tmp_path / "prices" / "genai-prices.json")
        assert book.price(_row("gpt-4o-mini"), agent).cost_usd == 0.00042
        assert server.requests == []  # pricing never fetches
        assert book.info().updated_at is None
        info = book.update()
        assert len(server.requests) == 1
    assert info.updated_at is not None and "Prices updated" in info.describe()
    # 600 x $1 + 400 x $0.50 + 500 x $2, per million
    assert book.price(_row("gpt-4o-mini"), agent).cost_usd == 0.0018
    from genai_prices import data_snapshot

    data_snapshot.set_custom_snapshot(None)  # as a new process starts
    restarted = PriceBook(tmp_path / "prices" / "genai-prices.json")
    assert restarted.price(_row("gpt-4o-mini"), agent).cost_usd == 0.0018


def test_a_failed_update_says_why_and_keeps_the_prices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(name="a", kind="openai", model="gpt-4o-mini")
    book = PriceBook(tmp_path / "genai-prices.json")
    replies = [error_reply(503, {"error": "down"}), Reply(body=b"<html>", content_type="text/html")]
    with FaultServer(replies) as server:
        monkeypatch.setenv(PRICES_URL_ENV, server.url + "/data.json")
        with pytest.raises(UserError, match=r"answered HTTP 503\..*prices in use are kept"):
            book.update()
        with pytest.raises(UserError, match=r"not in the format.*prices in use are kept"):
            book.update()
    assert not book.prices_file.exists()
    assert book.price(_row("gpt-4o-mini"), agent).cost_usd == 0.00042


# never on the loop's thread -------------------------------------------------------------------
_TURN_SCRIPT = """
import asyncio, importlib.abc, json, sys, threading
main = threading.main_thread()
seen = []

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "genai_prices":
            seen.append([name, threading.current_thread() is main])
        return None

sys.meta_path.insert(0, Spy())
from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.store.agents import Agent
from tests.chat.test_pricing import KEY, openai_stream
from tests.helpers.fault_server import FaultServer, Reply

services = Services.open(AppPaths.from_env())
with FaultServer(lambda _r: Reply(body=openai_stream())) as server:
    agent = services.agents.create(
        Agent(name="GPT", kind="openai", base_url=server.url + "/v1", model="gpt-4o-mini"),
        api_key=KEY,
    )
    conv = services.conversations.create(agent.id)
    turn = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "hi")))
services.close()
print(json.dumps({"seen": seen, "source": turn.stats.price_source}))
"""


def test_genai_prices_is_imported_on_a_worker_thread_never_the_loops(
    cli_env: dict[str, str],
) -> None:
    done = run_text([sys.executable, "-c", _TURN_SCRIPT], cli_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["source"] == "genai-prices"
    assert report["seen"], "genai_prices was never imported"
    on_main = [name for name, main in report["seen"] if main]
    assert on_main == [], f"imported on the event loop's thread: {on_main}"


def test_window_and_cli_start_up_do_not_import_genai_prices() -> None:
    code = (
        "import desktop.cli, desktop.cli_ask, desktop.ui.shell.main_window, desktop.app\n"
        "import desktop.chat.services, desktop.chat.pricing, desktop.chat.price_book"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    assert packages_loaded(code, ("genai_prices", "pydantic"), env) == []
