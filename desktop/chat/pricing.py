"""What a call cost, decided once when it ends and stored on its stats row (prices change
later; history must not).

Which price wins, first to last:

1. ``reported``: the provider said what the call cost (OpenRouter's ``usage.cost``). Its total
   stands; its parts (new input, cached input, output) are the dataset's prices for the call
   scaled to that total when the dataset knows the model, else NULL.
2. ``agent``: the agent's own price override, USD per million tokens
   (``Agent.price_input_per_m`` / ``price_output_per_m``). Cached input is charged at the
   override's input price (an override says "this is what I pay", discounts included). A side
   left empty takes the dataset's price; with no dataset price for it the cost is unknown.
3. ``genai-prices``: the bundled dataset of the ``genai-prices`` package (or the copy the
   person fetched with "Update prices"), with cached-input and reasoning prices where it has
   them, at the prices in force when the call started.
4. ``local``: a local (llama.cpp) agent costs 0.
5. Unknown: every cost field NULL and ``price_source`` NULL, never 0 (a total leaves it out).

Which provider a call is priced as: the OpenAI, Anthropic and Gemini kinds are their providers
by kind. Any other remote kind (``openai-compatible``) only when its base URL is a known hosted
API (the dataset's own URL patterns: api.groq.com, openrouter.ai, api.mistral.ai, …); a
self-hosted server (llama.cpp, vLLM, Ollama on this machine or the LAN) is never priced as
OpenAI just because it serves a model called "gpt-4o-mini".

The dataset is ``desktop.chat.price_book.PriceBook``; this module imports nothing of
genai-prices (``genai_prices`` with pydantic takes ~250 ms to import: only ``PriceBook.warm``
does, on a worker thread). Qt-free.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol
from urllib.parse import urlsplit

from desktop.store.agents import Agent

PRICE_SOURCES = ("reported", "agent", "genai-prices", "local")
# The kinds that are one provider whatever their URL, as genai-prices names it.
KIND_PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
_SELF_HOSTED_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa", ".localhost")
_DIGITS = 10  # USD rounded to 1e-10: a token of the cheapest model is ~1e-8


@dataclass(frozen=True, slots=True)
class PriceResult:
    """A call's cost in USD and where it came from (``price_source``, see the module doc)."""

    cost_usd: float | None
    cost_input_usd: float | None
    cost_cached_usd: float | None
    cost_output_usd: float | None
    price_source: str | None

    def fields(self) -> dict[str, Any]:
        """As stats row columns."""
        return asdict(self)


UNKNOWN = PriceResult(None, None, None, None, None)
LOCAL = PriceResult(0.0, 0.0, 0.0, 0.0, "local")


@dataclass(frozen=True, slots=True)
class TokenUse:
    """The tokens a call is charged for: ``prompt`` includes ``cached``; ``output`` includes
    ``reasoning``."""

    prompt: int
    cached: int
    output: int
    reasoning: int | None = None

    @property
    def new_input(self) -> int:
        return max(self.prompt - self.cached, 0)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TokenUse | None:
        """None when the row does not say how long the prompt was (nothing to price)."""
        prompt = row.get("prompt_tokens")
        if prompt is None:
            return None
        cached = min(int(row.get("cached_tokens") or 0), int(prompt))
        reasoning = row.get("reasoning_tokens")
        return cls(int(prompt), cached, int(row.get("output_tokens") or 0), reasoning)


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """A model's list prices in USD per million tokens (the editor's placeholders)."""

    provider_id: str
    model_id: str
    input_per_m: float | None
    cached_per_m: float | None
    output_per_m: float | None


@dataclass(frozen=True, slots=True)
class DatasetCost:
    """What the dataset says a call cost, and the prices it used."""

    total: float
    input: float
    cached: float
    output: float
    prices: ModelPrices


# which provider ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProviderRef:
    """How genai-prices is told the provider: by id, or by the API's URL (its patterns)."""

    provider_id: str | None = None
    api_url: str | None = None


def provider_ref(kind: str, base_url: str | None) -> ProviderRef | None:
    """The provider a remote agent's calls are priced as; None when it cannot be told (a
    self-hosted server, an unknown kind without a hosted URL)."""
    if kind in KIND_PROVIDERS:
        return ProviderRef(provider_id=KIND_PROVIDERS[kind])
    if base_url and is_hosted_api(base_url):
        return ProviderRef(api_url=base_url.strip().rstrip("/"))
    return None


def is_hosted_api(url: str) -> bool:
    """An https:// URL on a public host name: a service one pays for may be behind it. A
    machine on this computer or the local network never is."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
    except ValueError:
        return False
    if parts.scheme != "https" or not host or host == "localhost":
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." in host and not host.endswith(_SELF_HOSTED_SUFFIXES)
    return address.is_global


class PriceLookup(Protocol):
    """Where dataset prices come from (``desktop.chat.price_book.PriceBook``)."""

    def lookup(
        self, ref: ProviderRef, model: str, use: TokenUse, at: datetime
    ) -> DatasetCost | None: ...


# the order -----------------------------------------------------------------------------------
def price_call(
    row: Mapping[str, Any], agent: Agent, book: PriceLookup | None = None
) -> PriceResult:
    """The cost of the call ``row`` (a stats row: tokens, model, started_at, and a
    provider-reported ``cost_usd`` with ``price_source`` 'reported') made by ``agent``.

    ``book``: where dataset prices come from (None: no dataset; only reported costs, the
    override and local are known). Blocking when the book is not warm (see ``PriceBook``).
    """
    if agent.is_local:
        return LOCAL
    use = TokenUse.from_row(row)
    reported = row.get("cost_usd") if row.get("price_source") == "reported" else None
    model = str(row.get("model_reported") or row.get("model_requested") or agent.model or "")
    ref = provider_ref(agent.kind, agent.base_url)
    dataset = None
    if book is not None and use is not None and ref is not None and model:
        dataset = book.lookup(ref, model, use, _started(row))
    if reported is not None:
        return _reported(float(reported), dataset)
    overridden = agent.price_input_per_m is not None or agent.price_output_per_m is not None
    if overridden:
        return _override(agent, use, dataset)
    if dataset is not None:
        return _result(dataset.total, dataset.input, dataset.cached, dataset.output, "genai-prices")
    return UNKNOWN


def _reported(total: float, dataset: DatasetCost | None) -> PriceResult:
    """The provider's total; the dataset's split of it (each part's share of the dataset's
    own total), so the parts add up to what was billed."""
    if dataset is None or dataset.total <= 0:
        return PriceResult(_usd(total), None, None, None, "reported")
    share = total / dataset.total
    return _result(
        total, dataset.input * share, dataset.cached * share, dataset.output * share, "reported"
    )


def _override(agent: Agent, use: TokenUse | None, dataset: DatasetCost | None) -> PriceResult:
    listed = dataset.prices if dataset is not None else None
    input_per_m = agent.price_input_per_m
    cached_per_m = input_per_m
    if input_per_m is None and listed is not None:
        input_per_m = listed.input_per_m
        cached_per_m = listed.cached_per_m if listed.cached_per_m is not None else input_per_m
    output_per_m = agent.price_output_per_m
    if output_per_m is None and listed is not None:
        output_per_m = listed.output_per_m
    if use is None or input_per_m is None or output_per_m is None or cached_per_m is None:
        return UNKNOWN
    new = use.new_input * input_per_m / 1e6
    cached = use.cached * cached_per_m / 1e6
    output = use.output * output_per_m / 1e6
    return _result(new + cached + output, new, cached, output, "agent")


def _result(total: float, new: float, cached: float, output: float, source: str) -> PriceResult:
    return PriceResult(_usd(total), _usd(new), _usd(cached), _usd(output), source)


def _usd(value: float | Decimal) -> float:
    return round(float(value), _DIGITS)


def _started(row: Mapping[str, Any]) -> datetime:
    """When the call started (prices in force then); now when the row does not say."""
    text = row.get("started_at")
    if isinstance(text, str):
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return datetime.now(UTC)
