"""Add or edit one MCP server: a command (stdio) or a URL (streamable HTTP).

stdio: the command (Browse…), its arguments on one line (split like a shell, ``shlex``), the
working folder and environment rows (name, value, secret). A secret value goes to the keyring
and is never shown back: an existing one reads "stored in the keyring" and is replaced only
when something is typed over it. http: the URL and an optional bearer key (a password field,
kept in the keyring). Field errors (``McpConfig``'s ``ValidationError``) appear under their
field and nothing typed is lost. Saving (``desktop.chat.mcp_servers.store_server``: the
keyring, then the record) runs off the GUI thread (``async_door.run_blocking``); a renamed
server is not supported by the store (its keyring entries are named after it), so the name is
fixed once saved.
"""

from __future__ import annotations

import asyncio
import shlex

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QBoxLayout,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.mcp_servers import ServerChanges, store_server
from desktop.errors import UserError, ValidationError
from desktop.store.tools import DEFAULT_TIMEOUT_S, McpServer
from desktop.tools.config import McpConfig, validate_server
from desktop.ui.agents.form import FieldForm, WrapLabel, column, line, row, say
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import plain

TRANSPORTS = (("stdio", "Command (stdio)"), ("http", "URL (streamable HTTP)"))
STORED = "stored in the keyring — type to replace"


class EnvRow(QWidget):
    """One environment variable: name, value, secret; an existing secret is not shown."""

    def __init__(self, name: str = "", value: str = "", secret: bool = False, stored: bool = False):
        super().__init__()
        self.stored = stored  # a secret already in the keyring
        self.name = line("NAME")
        self.name.setText(name)
        self.name.setAccessibleName("Variable name")
        self.name.setMinimumWidth(self.name.fontMetrics().horizontalAdvance("W" * 12))
        self.value = line(STORED if stored else "value")
        self.value.setText(value)
        self.value.setAccessibleName("Variable value")
        self.secret = QCheckBox("secret")
        self.secret.setChecked(secret)
        self.secret.setToolTip("Kept in the system keyring, never in the app's files")
        self.secret.toggled.connect(self._secret_toggled)
        self.remove = QPushButton("Remove")
        self.remove.setAccessibleName("Remove this variable")
        host = row(self.name, self.value, self.secret, self.remove)
        line_up = host.layout()
        assert isinstance(line_up, QBoxLayout)  # row() lays its widgets out in a QHBoxLayout
        line_up.setStretchFactor(self.value, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(host)
        self._secret_toggled(secret)

    def _secret_toggled(self, secret: bool) -> None:
        self.value.setEchoMode(QLineEdit.EchoMode.Password if secret else QLineEdit.EchoMode.Normal)


class McpServerDialog(QDialog):
    """``saved`` holds the stored server after Save; ``save_finished(bool)`` tells each try."""

    save_finished = Signal(bool)

    def __init__(
        self, config: McpConfig, server: McpServer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("McpServerDialog")
        self._config = config
        self._original = server
        self.saved: McpServer | None = None
        self._task: asyncio.Task[bool] | None = None
        self.setWindowTitle(f"Edit server {server.name}" if server else "Add MCP server")
        self._form = FieldForm()
        self.env_rows: list[EnvRow] = []

        basics = self._form.group("Server")
        self.name = line("e.g. files")
        self._form.add(basics, "name", "Name", self.name)
        self.transport = QComboBox()
        for value, words in TRANSPORTS:
            self.transport.addItem(words, value)
        self._form.add(basics, "transport", "Runs as", self.transport)
        self.timeout = QSpinBox()
        self.timeout.setRange(1, 3600)
        self.timeout.setSuffix(" s")
        self.timeout.setValue(int(DEFAULT_TIMEOUT_S))
        self.timeout.setToolTip("How long one tool call may take before it is cancelled")
        self._form.add(basics, "timeout_s", "Call timeout", self.timeout)
        self.enabled = QCheckBox("Enabled")
        self.enabled.setChecked(True)
        self.enabled.setToolTip("A server turned off is never started; agents cannot use it")
        self._form.add(basics, "enabled", "", self.enabled)

        self.stdio_group = self._form.group("Command")
        self.command = line("e.g. npx, uvx or /usr/local/bin/my-server")
        self.command_browse = QPushButton("Browse…")
        self.command_browse.setAccessibleName("Choose the command's file")
        self.command_browse.clicked.connect(self._browse_command)
        command = row(self.command, self.command_browse)
        self._form.add(self.stdio_group, "command", "Command", command)
        self.args = line("e.g. -y @modelcontextprotocol/server-filesystem ~/Documents")
        self.args.setToolTip("Split like a shell: quote an argument that has spaces")
        self._form.add(self.stdio_group, "args", "Arguments", self.args)
        self.cwd = line("the app's folder")
        self.cwd_browse = QPushButton("Browse…")
        self.cwd_browse.setAccessibleName("Choose the working folder")
        self.cwd_browse.clicked.connect(self._browse_cwd)
        self._form.add(self.stdio_group, "cwd", "Working folder", row(self.cwd, self.cwd_browse))
        self.env_box = column()
        self.add_env = QPushButton("Add variable")
        self.add_env.clicked.connect(lambda: self.add_env_row())
        env_note = WrapLabel(
            "The server gets only PATH, HOME, LANG, TMPDIR and these, never the app's own "
            "environment.",
            "DialogNote",
        )
        env = column(self.env_box, row(self.add_env, stretch=True), env_note)
        self._form.add(self.stdio_group, "env", "Environment", env)

        self.http_group = self._form.group("URL")
        self.url = line("https://example.com/mcp")
        self._form.add(self.http_group, "url", "URL", self.url)
        self.bearer = line("optional")
        self.bearer.setEchoMode(QLineEdit.EchoMode.Password)
        self.bearer.setToolTip("Sent as Authorization: Bearer …; kept in the system keyring")
        self._form.add(self.http_group, "bearer", "Bearer key", self.bearer)

        self.general_error = WrapLabel(object_name="FieldError")
        self.general_error.hide()
        self.status = plain(QLabel())  # what the server said when tried
        self.status.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setObjectName("PrimaryButton")
        self.save_button.clicked.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (basics, self.stdio_group, self.http_group, self.general_error):
            layout.addWidget(widget)
        layout.addStretch(1)
        layout.addWidget(row(self.status, self.buttons))
        self.transport.currentIndexChanged.connect(self._transport_changed)
        self._load(server)
        self.resize(760, self.sizeHint().height())

    # loading ----------------------------------------------------------------------------------
    def _load(self, server: McpServer | None) -> None:
        if server is None:
            self._transport_changed()
            return
        self.name.setText(server.name)
        self.name.setReadOnly(True)
        self.name.setToolTip("A server keeps its name (remove it and add it again to rename it)")
        self.transport.setCurrentIndex(max(0, self.transport.findData(server.transport)))
        self.timeout.setValue(round(server.timeout_s))
        self.enabled.setChecked(server.enabled)
        self.command.setText(server.command)
        self.args.setText(shlex.join(server.args))
        self.cwd.setText(server.cwd or "")
        for var, value in server.env.items():
            self.add_env_row(var, value)
        for var in server.secret_env:
            self.add_env_row(var, "", secret=True, stored=True)
        self.url.setText(server.url)
        if server.bearer:
            self.bearer.setPlaceholderText(STORED)
        self._transport_changed()

    def add_env_row(
        self, name: str = "", value: str = "", secret: bool = False, stored: bool = False
    ) -> EnvRow:
        env_row = EnvRow(name, value, secret, stored)
        env_row.remove.clicked.connect(lambda: self._remove_env_row(env_row))
        self.env_rows.append(env_row)
        layout = self.env_box.layout()
        assert layout is not None
        layout.addWidget(env_row)
        return env_row

    def _remove_env_row(self, env_row: EnvRow) -> None:
        self.env_rows.remove(env_row)
        env_row.hide()
        env_row.deleteLater()

    def _transport_changed(self) -> None:
        stdio = self.transport.currentData() == "stdio"
        self.stdio_group.setVisible(stdio)
        self.http_group.setVisible(not stdio)

    def _browse_command(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "The server's command")
        if path:
            self.command.setText(path)

    def _browse_cwd(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "The server's working folder")
        if path:
            self.cwd.setText(path)

    # collecting -------------------------------------------------------------------------------
    def collect(self) -> ServerChanges:
        """The server the fields describe; ``ValidationError`` for what does not parse."""
        stdio = self.transport.currentData() == "stdio"
        try:
            args = tuple(shlex.split(self.args.text())) if stdio else ()
        except ValueError as exc:
            problem = f"The arguments do not split like a shell: {exc}."
            raise ValidationError({"args": problem}) from None
        env: dict[str, str] = {}
        secret_names: list[str] = []
        secrets: dict[str, str] = {}
        for env_row in self.env_rows if stdio else []:
            var = env_row.name.text().strip()
            value = env_row.value.text()
            if not var and not value:
                continue
            if not var:
                raise ValidationError({"env": "Give every environment value a name."})
            if env_row.secret.isChecked():
                secret_names.append(var)
                if value:
                    secrets[var] = value
                elif not (env_row.stored and self._stored_secret(var)):
                    raise ValidationError({"secret_env": f"Give the secret value of {var}."})
            else:
                env[var] = value
        old = self._original
        bearer = self.bearer.text() if not stdio else ""
        server = McpServer(
            name=self.name.text().strip(),
            transport="stdio" if stdio else "http",
            command=self.command.text().strip() if stdio else "",
            args=args,
            cwd=(self.cwd.text().strip() or None) if stdio else None,
            env=env,
            secret_env=tuple(secret_names),
            url=self.url.text().strip() if not stdio else "",
            bearer=bool(bearer) or bool(not stdio and old is not None and old.bearer),
            timeout_s=float(self.timeout.value()),
            enabled=self.enabled.isChecked(),
        )
        validate_server(server)
        dropped = [v for v in (old.secret_env if old else ()) if v not in secret_names]
        return ServerChanges(server, secrets, dropped, bearer or None)

    def _stored_secret(self, var: str) -> bool:
        return self._original is not None and var in self._original.secret_env

    # saving -----------------------------------------------------------------------------------
    def show_errors(self, errors: dict[str, str]) -> None:
        errors = dict(errors)
        secret = errors.pop("secret_env", "")
        if secret:  # plain and secret variables share one row
            errors["env"] = " ".join(filter(None, (errors.get("env"), secret)))
        unplaced = self._form.show_errors(errors)
        self.general_error.setText("\n".join(unplaced))
        self.general_error.setVisible(bool(unplaced))

    def error_text(self, field: str) -> str:
        return self._form.error_text("env" if field == "secret_env" else field)

    @property
    def saving(self) -> bool:
        return self._task is not None and not self._task.done()

    def save(self) -> asyncio.Task[bool] | None:
        if self.saving:
            return self._task
        try:
            changes = self.collect()
        except ValidationError as exc:
            self.show_errors(exc.fields)
            self.save_finished.emit(False)
            return None
        self._task = start(self._save(changes), name="server dialog: save")
        return self._task

    async def _save(self, changes: ServerChanges) -> bool:
        self.save_button.setEnabled(False)
        say(self.status, "Saving…", "muted")
        saved: McpServer | None = None
        try:
            saved = await run_blocking(store_server, self._config, self._original, changes)
        except ValidationError as exc:
            self.show_errors(exc.fields)
        except UserError as exc:
            self.show_errors({"general": exc.user_message})
        finally:
            self.save_button.setEnabled(True)
            say(self.status, "", "muted")
        if saved is None:
            self.save_finished.emit(False)
            return False
        self.saved = saved
        self.show_errors({})
        self.accept()
        self.save_finished.emit(True)
        return True

    def reject(self) -> None:
        if not self.saving:
            super().reject()
