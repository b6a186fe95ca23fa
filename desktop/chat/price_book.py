"""genai-prices for one app folder: the bundled prices, or the copy "Update prices" fetched
and saved under the folder; lookups for ``desktop.chat.pricing.price_call``.

``genai_prices`` (with pydantic) takes ~250 ms to import: it is imported by ``PriceBook.warm``
only, which refuses to run on an event loop's thread (``ChatService`` runs it on a worker
thread when a remote turn starts), never when this module is imported. Nothing is fetched
unless ``update`` is called (the person pressed "Update prices"); genai-prices' own
background updater is never started. Qt-free.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from desktop.chat.pricing import (
    DatasetCost,
    ModelPrices,
    PriceResult,
    ProviderRef,
    TokenUse,
    price_call,
    provider_ref,
)
from desktop.errors import UserError
from desktop.store.agents import Agent

if TYPE_CHECKING:  # types only: importing genai_prices for real is what warm() does
    from genai_prices.types import PriceCalculation

log = logging.getLogger("simi.chat.pricing")

PRICES_URL_ENV = "SIMI_PRICES_URL"  # where "Update prices" fetches from (tests: loopback)
PRICES_FILE = Path("prices") / "genai-prices.json"  # under the app's data folder
_FETCH_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class PricesInfo:
    """Which prices are in use: the ones bundled with the package, or a fetched copy."""

    version: str  # of the genai-prices package
    updated_at: datetime | None = None  # when "Update prices" fetched them; None: bundled
    note: str = ""  # e.g. the saved copy could not be read

    def describe(self) -> str:
        if self.updated_at is None:
            text = f"Prices bundled with genai-prices {self.version}"
        else:
            when = self.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
            text = f"Prices updated {when}"
        return f"{text}. {self.note}" if self.note else text


def refuse_on_loop(what: str) -> None:
    """A blocking call (importing genai-prices, fetching prices, tokenizing a conversation) made
    on a thread that runs an event loop is a bug: it would freeze the window, or every stream
    of the CLI, for as long as it takes."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread, or no loop at all
    raise RuntimeError(f"{what} blocks: call it off the event loop (asyncio.to_thread)")


# the dataset ---------------------------------------------------------------------------------
class PriceBook:
    """genai-prices for one app folder: the bundled prices, or those "Update prices" saved
    under the folder (``prices_file``), loaded at the first ``warm``.

    ``warm`` (import, load, one lookup) blocks for a few hundred ms and refuses to run on an
    event loop's thread; after it, a lookup takes about a millisecond and imports nothing, so
    ``price_if_ready`` may run on the loop. Thread-safe.

    The prices in use are genai-prices' process-wide snapshot (``set_custom_snapshot``, as its
    own updater installs one), so every book of the folder sees an update at once.
    """

    def __init__(self, prices_file: Path, *, update_url: str | None = None) -> None:
        self.prices_file = prices_file
        self._update_url = update_url
        self._lock = threading.Lock()
        self._ready = False
        self._note = ""

    @classmethod
    def in_folder(cls, data_dir: Path) -> PriceBook:
        return cls(data_dir / PRICES_FILE)

    @property
    def ready(self) -> bool:
        """Warm: lookups import nothing and take about a millisecond."""
        return self._ready

    def warm(self) -> None:
        """Import genai-prices, use the saved update if there is one, and price one call so
        the next lookups are quick. Blocking; off the event loop only."""
        if self._ready:
            return
        refuse_on_loop("PriceBook.warm")
        with self._lock:
            if self._ready:
                return
            # what the first lookup imports, so that no later lookup imports anything
            import genai_prices
            import genai_prices.decompose
            import genai_prices.units
            import genai_prices.validation
            from genai_prices import data_snapshot

            data_snapshot.set_custom_snapshot(self._load_saved())
            try:
                use = genai_prices.Usage(input_tokens=1, cache_read_tokens=1, output_tokens=1)
                genai_prices.calc_price(use, "gpt-4o-mini", provider_id="openai")
            except LookupError:
                pass
            self._ready = True

    def _load_saved(self) -> Any:
        """The snapshot of the saved update; None (the bundled prices) without a usable one."""
        from genai_prices import data_snapshot
        from genai_prices.types import _providers_from_raw

        self._note = ""
        try:
            saved = json.loads(self.prices_file.read_text("utf-8"))
            providers = _providers_from_raw(saved["data"])
            fetched = datetime.fromisoformat(saved["fetched_at"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("the saved prices %s cannot be used: %s", self.prices_file, exc)
            self._note = "The saved update could not be read; press Update prices again."
            return None
        return data_snapshot.DataSnapshot(providers, from_auto_update=True, timestamp=fetched)

    def price_if_ready(self, row: Mapping[str, Any], agent: Agent) -> PriceResult | None:
        """``price_call`` when it can run without importing (local agents always can);
        None when the book is not warm."""
        if not agent.is_local and not self._ready:
            return None
        return price_call(row, agent, self)

    def price(self, row: Mapping[str, Any], agent: Agent) -> PriceResult:
        """``price_call`` with this book's prices (warms it first when needed)."""
        if not agent.is_local:
            self.warm()
        return price_call(row, agent, self)

    def lookup(
        self, ref: ProviderRef, model: str, use: TokenUse, at: datetime
    ) -> DatasetCost | None:
        """The dataset's cost of ``use`` for ``model`` at ``ref``; None when it does not know
        the provider or the model."""
        self.warm()
        calc = self._calc(ref, model, use, at)
        if calc is None:
            return None
        from genai_prices.types import calc_unit_price

        price = calc.model_price
        cached_price = price.cache_read_mtok
        if cached_price is None:
            cached_price = price.input_mtok
        cached = calc_unit_price(cached_price, use.cached, use.prompt, 1_000_000)
        return DatasetCost(
            total=float(calc.total_price),
            input=max(float(calc.input_price - cached), 0.0),
            cached=float(cached),
            output=float(calc.output_price),
            prices=_model_prices(calc),
        )

    def _calc(
        self, ref: ProviderRef, model: str, use: TokenUse, at: datetime
    ) -> PriceCalculation | None:
        from genai_prices import Usage, calc_price

        usage = Usage(
            input_tokens=use.prompt,
            cache_read_tokens=use.cached or None,
            output_tokens=use.output,
            output_reasoning_tokens=use.reasoning or None,
        )
        try:
            if ref.provider_id is not None:
                return calc_price(
                    usage, model, provider_id=ref.provider_id, genai_request_timestamp=at
                )
            return calc_price(
                usage, model, provider_api_url=ref.api_url, genai_request_timestamp=at
            )
        except LookupError:
            return None
        except ValueError as exc:  # usage the dataset's model cannot price
            log.warning("genai-prices cannot price %s: %s", model, exc)
            return None

    def model_prices(self, kind: str, base_url: str | None, model: str) -> ModelPrices | None:
        """The dataset's prices for an agent's model (None: not a known provider or model).
        Blocking when not warm."""
        ref = provider_ref(kind, base_url)
        if ref is None or not model.strip() or kind == "local":
            return None
        self.warm()
        calc = self._calc(ref, model.strip(), TokenUse(1, 0, 1), datetime.now(UTC))
        return _model_prices(calc) if calc is not None else None

    # which prices, and updating them -------------------------------------------------------
    def info(self) -> PricesInfo:
        """Which prices are in use (reads the saved file's date; imports nothing)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            package = version("genai-prices")
        except PackageNotFoundError:
            package = "?"
        try:
            saved = json.loads(self.prices_file.read_text("utf-8"))
            return PricesInfo(package, datetime.fromisoformat(saved["fetched_at"]))
        except FileNotFoundError:
            return PricesInfo(package, note=self._note)
        except (OSError, ValueError, KeyError, TypeError):
            note = "The saved update could not be read; press Update prices again."
            return PricesInfo(package, note=note)

    def update_url(self) -> str:
        url = self._update_url or os.environ.get(PRICES_URL_ENV)
        if url:
            return url
        from genai_prices.update_prices import DEFAULT_UPDATE_URL

        return DEFAULT_UPDATE_URL

    def update(self) -> PricesInfo:
        """Fetch the latest prices once, save them under the app folder and use them from now
        on. Blocking (the network); off the event loop only. A ``UserError`` says what went
        wrong; the prices in use stay as they were."""
        refuse_on_loop("PriceBook.update")
        import httpx

        self.warm()
        from genai_prices import data_snapshot
        from genai_prices.types import _providers_from_raw

        url = self.update_url()
        host = urlsplit(url).hostname or url
        kept = "The prices in use are kept."
        try:
            timeout = httpx.Timeout(_FETCH_TIMEOUT_S, connect=5.0)
            response = httpx.get(url, timeout=timeout, follow_redirects=True)
            response.raise_for_status()
            raw = json.loads(response.content)
            if not isinstance(raw, list) or not raw:
                raise ValueError("expected a list of providers")
            providers = _providers_from_raw(raw)
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            raise UserError(
                f"Could not download new prices: {host} answered HTTP {status}. {kept} "
                "Try again later."
            ) from exc
        except httpx.HTTPError as exc:
            raise UserError(
                f"Could not reach {host} to download new prices ({type(exc).__name__}). "
                f"Check the network connection and try again. {kept}"
            ) from exc
        except ValueError as exc:
            raise UserError(
                f"The price list from {host} is not in the format SIMI Multi reads. {kept}"
            ) from exc
        fetched = datetime.now(UTC)
        self._save({"fetched_at": fetched.isoformat(), "url": url, "data": raw})
        with self._lock:
            data_snapshot.set_custom_snapshot(
                data_snapshot.DataSnapshot(providers, from_auto_update=True, timestamp=fetched)
            )
            self._note = ""
        log.info("prices updated from %s: %d providers", url, len(providers))
        return self.info()

    def _save(self, payload: dict[str, Any]) -> None:
        path = self.prices_file
        partial = path.with_name(path.name + ".partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(payload), "utf-8")
            os.replace(partial, path)
        except OSError as exc:
            raise UserError(
                f"Could not save the new prices to {path} ({exc.strerror or exc}). "
                "The prices in use are kept; free some space or fix the folder's permissions."
            ) from exc


def _model_prices(calc: PriceCalculation) -> ModelPrices:
    price = calc.model_price
    return ModelPrices(
        provider_id=calc.provider.id,
        model_id=calc.model.id,
        input_per_m=_per_m(price.input_mtok),
        cached_per_m=_per_m(price.cache_read_mtok),
        output_per_m=_per_m(price.output_mtok),
    )


def _per_m(value: object) -> float | None:
    """A dataset price per million tokens; a tiered one by its base (first) tier."""
    if value is None:
        return None
    base = getattr(value, "base", value)
    return float(base) if isinstance(base, Decimal | int | float) else None
