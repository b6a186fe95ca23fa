"""The agent editor's probes: "Fetch models" (fills the model box) and "Test connection".

Both run as coroutines on the qasync loop, with a throwaway provider built from the fields as
they are now (saved or not) by the same factory a turn uses (``desktop.chat.endpoint_probe``).
The saved key goes along only where the endpoint section (``desktop.ui.agents.endpoint``) says
it may follow the URL as typed; it is read from the keyring off the GUI thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QLineEdit,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
)

from desktop.chat.agent_rules import host_of
from desktop.chat.agents import AgentService
from desktop.chat.endpoint_probe import check_endpoint, endpoint_models
from desktop.chat.kinds import ProviderKind, kind_label
from desktop.errors import UserError
from desktop.llm.connection import ConnectionReport
from desktop.store.agents import Agent
from desktop.ui.agents.endpoint import EndpointSection
from desktop.ui.agents.form import FieldForm, WrapLabel, row, say, shown_text
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import push_button

# The endpoint fields checked before connecting.
ENDPOINT_FIELDS = ("kind", "base_url", "stall_timeout_s", "ca_bundle")


@dataclass(frozen=True, slots=True)
class EndpointFields:
    """What "Fetch models" and "Test connection" connect to: ``agent``, the fields as typed
    (not saved). ``typed_key``: the key in the key field; ``saved_key_agent``: the stored agent
    whose key may be used instead (only when it may follow), read through the async door."""

    agent: Agent
    host: str
    label: str
    typed_key: str | None
    saved_key_agent: Agent | None


class EndpointProbe(QObject):
    """The model row's "Fetch models" and the "Test connection" row, for one editor.

    ``typed()`` gives the agent as the whole form describes it, with messages for fields that
    do not parse. Signals: models_fetched(object), connection_tested(object); see
    ``AgentEditorDialog``.
    """

    models_fetched = Signal(object)
    connection_tested = Signal(object)

    def __init__(
        self,
        agents: AgentService,
        form: FieldForm,
        endpoint: EndpointSection,
        *,
        model: QComboBox,
        name: QLineEdit,
        typed: Callable[[], tuple[Agent, dict[str, str]]],
    ) -> None:
        super().__init__(endpoint)
        self._agents, self._form, self._endpoint = agents, form, endpoint
        self._model, self._name, self._typed = model, name, typed
        self._fetch_task: asyncio.Task[tuple[str, ...] | None] | None = None
        self._test_task: asyncio.Task[ConnectionReport | None] | None = None
        self.fetch_button = push_button(
            "Fetch models", self.fetch_models, tip="Ask the server which models it offers"
        )
        self.models_status = WrapLabel()
        self.models_status.hide()
        self.test_button = push_button(
            "Test connection",
            self.test_connection,
            tip="List the server's models once: reachability, key, latency",
        )
        self.test_result = WrapLabel()
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.hide()
        endpoint.changed.connect(self.invalidate)
        model.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """A click on the empty model list's arrow fetches the list (and then opens it):
        the person asked to see the models; an arrow that does nothing looks broken."""
        if (
            event.type() == QEvent.Type.MouseButtonPress
            and watched is getattr(self, "_model", None)  # (None while being torn down)
            and isinstance(event, QMouseEvent)
            and self._model.count() == 0
            and self.fetch_button.isVisibleTo(self._model.window())
            and self.fetch_button.isEnabled()
            and _on_arrow(self._model, event)
        ):
            self.fetch_models()
            return True
        return False

    def add_rows(self, basics: QGroupBox) -> None:
        """The model box with "Fetch models", then the "Test connection" row."""
        model_row = row(self._model, self.fetch_button)
        self._form.add(basics, "model", "Model", model_row, extra=self.models_status)
        test_row = row(self.test_button, stretch=True)
        for fixed in (model_row, test_row):
            fixed.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self._form.add(basics, "connection", "", test_row, extra=self.test_result)

    def show_for(self, kind: ProviderKind | None) -> None:
        """Offered for remote kinds whose servers list their models."""
        listing = kind is not None and kind.remote and kind.capabilities.model_listing
        self._form.set_row_visible("connection", listing)
        self.fetch_button.setVisible(listing)
        if not listing:
            self.models_status.hide()
            self.test_result.hide()

    def invalidate(self) -> None:
        """The endpoint changed: running probes stop and an older result no longer shows."""
        for task in (self._fetch_task, self._test_task):
            if task is not None and not task.done():
                task.cancel()
        self.test_result.hide()

    def endpoint_fields(self) -> EndpointFields | None:
        """The endpoint as typed now; None (with messages shown) when it cannot be used."""
        agent, errors = self._typed()
        checked = self._agents.validate(agent)
        problems = {f: m for f, m in {**checked, **errors}.items() if f in ENDPOINT_FIELDS}
        self._form.show_errors(problems, only=ENDPOINT_FIELDS)
        if problems:
            return None
        endpoint = self._endpoint
        url = endpoint.effective_base_url()
        chosen = endpoint.current_preset
        if chosen is not None and chosen.id != "custom":
            label = chosen.name
        else:
            label = self._name.text().strip() or kind_label(endpoint.current_kind)
        follows = endpoint.key_left_behind() is None
        return EndpointFields(
            agent=agent.with_changes(base_url=url),
            host=host_of(url) or "the server",
            label=label,
            typed_key=endpoint.typed_key(),
            saved_key_agent=endpoint.saved_key_endpoint() if follows else None,
        )

    async def _key_for(self, spec: EndpointFields) -> str | None:
        """The key typed, else the saved one where it may follow (the keyring: off the GUI
        thread)."""
        key = spec.typed_key
        if key is None and spec.saved_key_agent is not None:
            key = await run_blocking(self._agents.api_key, spec.saved_key_agent)
        return key

    def fetch_models(self) -> asyncio.Task[tuple[str, ...] | None] | None:
        """Start listing the endpoint's models (slot of "Fetch models"); returns the task."""
        spec = self.endpoint_fields()
        if spec is None:
            say(self.models_status, "Fix the marked fields first.", "error")
            self.models_fetched.emit(None)
            return None
        if self._fetch_task is not None and not self._fetch_task.done():
            self._fetch_task.cancel()
        self._fetch_task = start(self._fetch(spec), name="agent editor: fetch models")
        return self._fetch_task

    async def _fetch(self, spec: EndpointFields) -> tuple[str, ...] | None:
        self.fetch_button.setEnabled(False)
        self.fetch_button.setText("Loading…")
        say(self.models_status, f"Loading models from {spec.host}…", "muted")
        result: tuple[str, ...] | None = None
        try:
            key = await self._key_for(spec)
            result = await endpoint_models(spec.agent, key, spec.label)
        except UserError as exc:  # a ValidationError's text joins its field messages
            say(self.models_status, exc.user_message, "error")
        else:
            self._show_models(result, spec.host)
        finally:
            self.fetch_button.setEnabled(True)
            self.fetch_button.setText("Fetch models")
        if result and self._model.isVisible():
            self._model.setFocus()
            self._model.showPopup()  # the list the message points to, open to pick from
        self.models_fetched.emit(result)
        return result

    def _show_models(self, models: tuple[str, ...], host: str) -> None:
        typed = self._model.currentText()
        self._model.clear()
        self._model.addItems(list(models))
        self._model.setEditText(typed or (models[0] if models else ""))
        if models:
            text = f"{len(models)} model(s) from {host}: pick one from the list or type a name."
        else:
            text = f"{host} lists no models. Load or pull a model on the server, or type its name."
        say(self.models_status, text, "muted")

    def test_connection(self) -> asyncio.Task[ConnectionReport | None] | None:
        """Start "Test connection" (its button's slot); returns the task."""
        spec = self.endpoint_fields()
        if spec is None:
            say(self.test_result, "Fix the marked fields first.", "error")
            return None
        if self._test_task is not None and not self._test_task.done():
            self._test_task.cancel()
        self._test_task = start(self._test(spec), name="agent editor: test connection")
        return self._test_task

    async def _test(self, spec: EndpointFields) -> ConnectionReport | None:
        self.test_button.setEnabled(False)
        say(self.test_result, f"Testing {spec.host}…", "muted")
        report: ConnectionReport | None = None
        try:
            key = await self._key_for(spec)
            report = await check_endpoint(spec.agent, key, spec.label)
        except UserError as exc:  # unusable settings, or the keyring could not be read
            say(self.test_result, exc.user_message, "error")
        finally:
            self.test_button.setEnabled(True)
        if report is not None:
            say(self.test_result, describe(report), "ok" if report.ok else "error")
            if report.ok and report.models:
                self._show_models(report.models, spec.host)
            self.connection_tested.emit(report)
        return report

    @property
    def test_result_text(self) -> str:
        return shown_text(self.test_result)

    @property
    def models_status_text(self) -> str:
        return shown_text(self.models_status)

    def cancel(self) -> None:
        """The dialog closes: no probe runs on."""
        for task in (self._fetch_task, self._test_task):
            if task is not None and not task.done():
                task.cancel()


def _on_arrow(combo: QComboBox, event: QMouseEvent) -> bool:
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    hit = combo.style().hitTestComplexControl(
        QStyle.ComplexControl.CC_ComboBox, option, event.position().toPoint(), combo
    )
    return hit == QStyle.SubControl.SC_ComboBoxArrow


def describe(report: ConnectionReport) -> str:
    if report.ok:
        return report.message
    if report.reachable and report.auth_ok is False:
        latency = f" in {report.latency_ms:.0f} ms" if report.latency_ms is not None else ""
        return f"Reached the server{latency}, but it refused the key: {report.message}"
    if report.reachable:
        return f"The server answered, but: {report.message}"
    return f"Could not reach the server: {report.message}"
