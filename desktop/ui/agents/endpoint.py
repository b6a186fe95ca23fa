"""The agent editor's endpoint section: service presets, base URL, API key, and the
connection options (stall timeout, CA bundle). "Fetch models" and "Test connection" are
``desktop.ui.agents.probe``; the price override is ``desktop.ui.agents.price``.

Keys follow ``desktop.chat.agent_rules``: a key belongs to the host of its endpoint. When an
existing agent is pointed at another host, its saved key is not used for probing (nor, on
saving, carried to the new endpoint); the section asks for the new host's key instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGroupBox,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agent_rules import host_of, is_plain_http_remote, key_left_behind
from desktop.chat.kinds import DEFAULT_STALL_TIMEOUT_S, ProviderKind, find_kind
from desktop.chat.price_book import PriceBook
from desktop.llm.presets import Preset
from desktop.llm.presets import preset as preset_by_id
from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SecretStore
from desktop.store.agents import Agent
from desktop.ui.agents.form import (
    FieldForm,
    WrapLabel,
    column,
    line,
    restyle,
    row,
    show_value,
    shown_text,
)
from desktop.ui.agents.price import PriceSection
from desktop.ui.kit.async_door import run_blocking, start

PLAIN_HTTP_WARNING = (
    "This address uses plain http:// to another machine: the API key and your messages "
    "travel unencrypted. Use https:// unless you trust the network."
)
_REMOTE_ROWS = ("preset", "base_url", "api_key")


class EndpointSection(QObject):
    """Owns the endpoint widgets and their logic for one editor; ``relayout()`` is called
    when a preset changed the kind.

    Signals: changed(): the address, key or TLS settings changed (older probe results no
    longer apply); keyring_checked(bool): see ``AgentEditorDialog``.
    """

    changed = Signal()
    keyring_checked = Signal(bool)

    def __init__(
        self,
        secrets: SecretStore,
        form: FieldForm,
        *,
        kind: QComboBox,
        relayout: Callable[[], None],
        original: Agent | None,
        parent: QWidget,
        model: QComboBox | None = None,
        prices: PriceBook | None = None,
    ) -> None:
        super().__init__(parent)
        self._secrets, self._form = secrets, form
        self._kind, self._relayout = kind, relayout
        self._original = original
        self._parent = parent
        self._syncing = False
        self._probe_task: asyncio.Task[bool] | None = None

        self.preset = QComboBox()
        self.preset.setToolTip("Fills in the service's usual address; you can still edit it.")
        self.base_url = QLineEdit()
        self.base_url_warning = WrapLabel(PLAIN_HTTP_WARNING, "FieldWarning")
        self.base_url_warning.hide()
        self.api_key = QLineEdit()
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_note = WrapLabel(object_name="DialogNote")
        self.key_note.hide()
        self.memory_key = QCheckBox("Keep the key in memory for this run only")
        self.memory_key.setToolTip(secrets.unavailable_message())
        self.memory_key.hide()  # shown once the keyring probe says there is none

        self.group: QGroupBox = form.group("Connection")  # filled by add_connection_group
        self.stall_timeout = line(f"{DEFAULT_STALL_TIMEOUT_S:.0f}  (default)")
        self.stall_timeout.setToolTip(
            "Give up when the server sends nothing for this many seconds (1 – 3,600)."
        )
        self.ca_bundle = line("Optional: PEM file of a private CA")
        self.ca_bundle.setToolTip(
            "Trust servers whose certificate comes from your own certificate authority; "
            "verification stays on."
        )
        self.ca_browse = QPushButton("Browse…")
        self.ca_browse.clicked.connect(self._browse_ca)

        # The price override (its placeholders follow the model: ``model``, the editor's).
        book = prices or PriceBook.in_folder(AppPaths.from_env().data_dir)
        self.price = PriceSection(form, book, parent)
        self.price_input, self.price_output = self.price.price_input, self.price.price_output
        self._model = model
        if model is not None:
            model.currentTextChanged.connect(self._price_context_changed)

        self.preset.currentIndexChanged.connect(self._preset_changed)
        for edit in (self.base_url, self.api_key, self.ca_bundle):
            edit.textChanged.connect(self.edited)

    def add_rows(self, basics: QGroupBox) -> None:
        """Service, base URL and API key."""
        form = self._form
        form.add(basics, "preset", "Service", self.preset)
        form.add(basics, "base_url", "Base URL", self.base_url, extra=self.base_url_warning)
        form.add(
            basics, "api_key", "API key", self.api_key, extra=column(self.key_note, self.memory_key)
        )

    def add_connection_group(self) -> QWidget:
        """The "Connection" group's rows (stall timeout, CA bundle) and the "Price" group;
        returns both, one above the other."""
        self._form.add(self.group, "stall_timeout_s", "Stall timeout (s)", self.stall_timeout)
        ca_row = row(self.ca_bundle, self.ca_browse)
        self._form.add(self.group, "ca_bundle", "CA bundle", ca_row)
        self.groups = QWidget()
        stack = QVBoxLayout(self.groups)
        stack.setContentsMargins(0, 0, 0, 0)
        stack.setSpacing(12)  # as the editor spaces its groups
        stack.addWidget(self.group)
        stack.addWidget(self.price.group)
        return self.groups

    # kind, preset, URL ---------------------------------------------------------------------
    @property
    def syncing(self) -> bool:
        return self._syncing

    @contextlib.contextmanager
    def sync(self) -> Iterator[None]:
        """Programmatic changes to kind/preset: their change slots do nothing meanwhile."""
        was = self._syncing
        self._syncing = True
        try:
            yield
        finally:
            self._syncing = was

    @property
    def current_kind(self) -> str:
        return str(self._kind.currentData())

    def _current(self) -> ProviderKind | None:
        return find_kind(self.current_kind)

    @property
    def current_preset(self) -> Preset | None:
        """The chosen preset; None for local agents and kinds without presets."""
        kind = self._current()
        preset_id = self.preset.currentData()
        if kind is None or not kind.remote or not preset_id:
            return None
        return preset_by_id(str(preset_id))

    def _offered(self) -> tuple[Preset, ...]:
        kind = self._current()
        return kind.presets() if kind is not None else ()

    def fill_presets(self, select_id: str | None) -> None:
        kind = self._current()
        with self.sync():
            self.preset.clear()
            for p in self._offered():
                self.preset.addItem(p.name, p.id)
            index = self.preset.findData(select_id) if select_id else -1
            if index < 0 and kind is not None and kind.default_preset:
                index = self.preset.findData(kind.default_preset)
            self.preset.setCurrentIndex(max(0, index))

    def kind_changed(self) -> None:
        """The person picked a kind: offer its presets (keeping one that fits it)."""
        kind = self._current()
        if kind is None or not kind.remote:
            return
        before = self.preset.currentData()
        # The kind and the preset agree: the OpenAI preset is the ``openai`` kind, every
        # other preset of the shared list is ``openai-compatible``.
        keep = before if before and preset_by_id(str(before)).kind == kind.name else None
        self.fill_presets(keep or kind.default_preset)
        chosen = self.current_preset
        if chosen is not None and chosen.id != before:
            self._apply_preset_url(chosen)

    def _preset_changed(self) -> None:
        if self._syncing:
            return
        chosen = self.current_preset
        if chosen is None:
            return
        if chosen.kind != self.current_kind:
            with self.sync():
                self._kind.setCurrentIndex(self._kind.findData(chosen.kind))
            self._relayout()
        self._apply_preset_url(chosen)
        self.edited()

    def _apply_preset_url(self, chosen: Preset) -> None:
        if chosen.base_url:
            self.base_url.setText(chosen.base_url)
        elif self.base_url.text().strip().rstrip("/") in {p.base_url for p in self._offered()}:
            self.base_url.clear()  # "Custom URL": do not leave another service's address
        if chosen.id == "custom":
            self.base_url.setFocus()

    def show_for(self, kind: ProviderKind | None) -> None:
        """Rows and hints for ``kind`` (all hidden for a local one)."""
        remote = kind is not None and kind.remote
        for field in _REMOTE_ROWS:
            self._form.set_row_visible(field, remote)
        self.group.setVisible(remote)
        self.price.group.setVisible(remote)
        self.base_url.setPlaceholderText(kind.url_placeholder if kind else "https://…")

    def effective_base_url(self) -> str | None:
        """The URL the agent will use: the field, or the kind's default when it is empty."""
        kind = self._current()
        text = self.base_url.text().strip().rstrip("/")
        return text or (kind.default_base_url if kind is not None else None)

    def edited(self) -> None:
        """The address, key or TLS settings changed: older results no longer apply."""
        kind = self._current()
        remote = kind is not None and kind.remote
        url = self.base_url.text().strip()
        self.base_url_warning.setVisible(remote and is_plain_http_remote(url))
        self._update_key_note()
        self._price_context_changed()
        self.changed.emit()

    def _price_context_changed(self) -> None:
        kind = self._current()
        if kind is None or not kind.remote:
            return
        model = self._model.currentText() if self._model is not None else ""
        self.price.context_changed(kind.name, self.effective_base_url(), model)

    def load(self, agent: Agent) -> None:
        """Fill the fields from ``agent`` (its kind is already chosen)."""
        if not agent.is_local:
            self.fill_presets(_initial_preset(agent))
        with self.sync():
            self.base_url.setText(agent.base_url or "")
        seconds = agent.stall_timeout_s  # 30.0 reads as 30; 2.5 stays
        if seconds is not None and float(seconds).is_integer():
            self.stall_timeout.setText(str(int(seconds)))
        else:
            self.stall_timeout.setText(show_value(seconds))
        self.ca_bundle.setText(agent.ca_bundle or "")
        self.price.load(agent)

    def values(self) -> dict[str, str | None]:
        """Base URL, preset and CA bundle as ``Agent`` changes (the stall timeout parses with
        the other numbers: ``number_texts``)."""
        chosen = self.current_preset
        return {
            "base_url": self.base_url.text().strip() or None,
            "preset": None if chosen is None else chosen.id,
            "ca_bundle": self.ca_bundle.text().strip() or None,
        }

    def number_texts(self) -> dict[str, str]:
        return {"stall_timeout_s": self.stall_timeout.text(), **self.price.number_texts()}

    def typed_key(self) -> str | None:
        return self.api_key.text().strip() or None

    # keys ----------------------------------------------------------------------------------
    def saved_key_endpoint(self) -> Agent | None:
        """The stored agent whose endpoint may hold a key (None for new and local agents)."""
        original = self._original
        if original is None or original.id is None or original.is_local:
            return None
        return original if original.key_ref else None

    def key_left_behind(self) -> str | None:
        """Why the saved key is not used with the URL as typed (None: it is, or there is
        none)."""
        saved = self.saved_key_endpoint()
        if saved is None:
            return None
        return key_left_behind(saved.base_url, self.effective_base_url())

    def _update_key_note(self) -> None:
        kind = self._current()
        if kind is None or not kind.remote:
            return
        chosen = self.current_preset
        editing = self.saved_key_endpoint() is not None
        why = self.key_left_behind()
        note = ""
        if why is not None:
            note = why
            if chosen is not None and chosen.local:
                note += f". {chosen.name} usually needs none: leave it empty."
            host = host_of(self.effective_base_url()) or "the new address"
            placeholder = f"API key for {host}"
        elif chosen is not None and chosen.local:
            note = f"{chosen.name} runs on your own machine and needs no API key; leave it empty."
            placeholder = "Not needed"
        elif chosen is not None and chosen.id == "custom" and not editing:
            note = "Only if the server asks for one."
            placeholder = "Optional; kept in the system keyring"
        elif editing:
            placeholder = "Leave empty to keep the saved key"
        elif chosen.needs_key if chosen is not None else kind.needs_key:
            placeholder = "Paste the key; it is kept in the system keyring"
        else:
            placeholder = "Optional; kept in the system keyring"
        self.api_key.setPlaceholderText(placeholder)
        self.key_note.setText(note)
        restyle(self.key_note, "FieldWarning" if why is not None else "DialogNote")
        self.key_note.setVisible(bool(note))

    def start_keyring_probe(self) -> None:
        self._probe_task = start(self._probe_keyring(), name="agent editor: keyring probe")

    async def _probe_keyring(self) -> bool:
        # ``SecretStore.available`` asks D-Bus whether Secret Service runs: not on this thread.
        available = await run_blocking(lambda: self._secrets.available)
        if not available or self._secrets.memory_only:
            self.memory_key.show()
        self.keyring_checked.emit(available)
        return available

    @property
    def key_note_text(self) -> str:
        return shown_text(self.key_note)

    def _browse_ca(self) -> None:
        current = self.ca_bundle.text().strip()
        start_dir = str(Path(current).expanduser().parent) if current else str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self._parent,
            "Choose a CA bundle",
            start_dir,
            "PEM certificates (*.pem *.crt *.cer);;All files (*)",
        )
        if path:
            self.ca_bundle.setText(path)

    def cancel(self) -> None:
        """The dialog closes: nothing of it runs on."""
        if self._probe_task is not None and not self._probe_task.done():
            self._probe_task.cancel()
        self.price.cancel()


def _initial_preset(agent: Agent) -> str | None:
    """The stored preset when it fits the kind; else one whose URL matches; else None."""
    kind = find_kind(agent.kind)
    candidates = [p for p in (kind.presets() if kind else ()) if p.kind == agent.kind]
    if agent.preset and any(p.id == agent.preset for p in candidates):
        return agent.preset
    url = (agent.base_url or "").rstrip("/")
    for p in candidates:
        if p.base_url and p.base_url == url:
            return p.id
    return None
