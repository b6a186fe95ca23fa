"""Help → User guide: a short offline guide in a window of its own (first steps, agents, local
models, remote services, the API server, what the statistics mean, keyboard shortcuts, data and
privacy), with a table of contents and a search box.

The statistics' words and definitions are the timeline help's (``timeline_help``), the keys
the shortcut table's in the platform's own words (``shortcuts``), the privacy and data lines
Settings' own: one text each, shown in every place that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QTextBrowser,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from desktop.local.starter import STARTER_AGENT_NAME
from desktop.ui.kit import theme
from desktop.ui.kit.widgets import search_field
from desktop.ui.settings.dialog import AUTOMATIC_NOTE, DATA_NOTE, PRIVACY_TEXT
from desktop.ui.shell.shortcuts import SHORTCUTS, describe, native_text
from desktop.ui.stats.timeline_help import DEFINITIONS_HTML, TERMS_HTML


@dataclass(frozen=True, slots=True)
class Section:
    anchor: str
    title: str
    html: str


def _keys(name: str) -> str:
    """The keys of the shortcut table's entry ``name``, as this platform writes them."""
    found = next(s for s in SHORTCUTS if s.name == name)
    return f"<b>{escape(describe(found).split(', ')[0])}</b>"


def _shortcuts_table() -> str:
    rows = "".join(
        f"<tr><td>{escape(s.label)}</td><td><b>{escape(describe(s))}</b></td></tr>"
        for s in SHORTCUTS
    )
    return f'<table cellspacing="0" cellpadding="4">{rows}</table>'


def sections() -> list[Section]:
    """The guide, section by section (built when the window opens: keys need the platform)."""
    enter = f"<b>{escape(native_text('Return'))}</b>"
    new_line = f"<b>{escape(native_text('Shift+Return'))}</b>"
    return [
        Section(
            "first-steps",
            "First steps",
            f"""
<p>SIMI Multi lets you talk to many AI models from one window. Each model you talk to is set
up as an <i>agent</i>. The window opens with <b>{escape(STARTER_AGENT_NAME)}</b>, a small
model that runs on your own computer: no account, key or network needed.</p>
<ul>
<li>Type in the message box at the bottom and press {enter} to send ({new_line} starts a new
line). While the reply is being written, <b>Send</b> becomes <b>Stop</b> ({_keys("stop")}).</li>
<li>{_keys("new_chat")} starts a new conversation; {_keys("focus_search")} searches every
conversation. Conversations are listed in the sidebar: rename, pin or delete them there
(a deleted one can be brought back with Undo).</li>
<li>Under each reply: <b>Copy</b>, <b>Regenerate</b> (earlier versions are kept: ‹ 1/3 ›),
<b>Continue</b> for a reply cut short, and a line of statistics (see
<a href="#statistics">What the statistics mean</a>). Editing a question starts a new branch
and keeps the old one.</li>
<li><b>File → Export as Markdown…</b> or <b>as JSON…</b> saves a conversation;
<b>File → Import conversation…</b> reads one back.</li>
</ul>""",
        ),
        Section(
            "agents",
            "Agents",
            """
<p>An agent is everything needed to get an answer: where the model runs (a file on this
computer or a service on the internet or your network), which model, its instructions (the
<i>system prompt</i>) and its settings (temperature, the longest reply, and so on).</p>
<ul>
<li><b>+ New</b> in the sidebar's Agents list makes one; <b>Edit</b>, <b>Clone</b> and
<b>Delete</b> under the list (or a right click) act on the selected agent.</li>
<li>Choosing an agent in the sidebar starts a new conversation with it. <b>Switch agent ▾</b>
in a conversation's header changes who answers the next messages; <b>Regenerate with…</b>
under a reply asks another agent for its version.</li>
<li>Several conversations can be answered at once. The local model answers one conversation
at a time; another one says it is <i>queued</i> until its turn.</li>
<li>From a terminal, <code>simi agents add</code>, <code>edit</code>, <code>clone</code> and
<code>remove</code> do the same; the open window shows the change.</li>
</ul>""",
        ),
        Section(
            "local-models",
            "Local models",
            f"""
<p>A local agent runs a model file (GGUF) with llama.cpp on this computer, in a process of
its own: if it fails or runs out of memory, the reply says so and the next message starts it
again.</p>
<ul>
<li>The <b>Models</b> page, <b>On this computer</b>, lists the model files in the app's
models folder and in folders you add (<b>Add folder…</b>; files are never copied), with what
each file says about itself (size, quantization, the context it was trained for), the agents
that use it and whether it is loaded. Select one for <b>New agent from this model</b> (load
settings that fit this computer), <b>Load</b> / <b>Unload</b>, <b>Open folder</b>, or
<b>Delete…</b> for a file the app downloaded (a file in a folder you linked is never
deleted). <b>Find models</b> searches the Hugging Face Hub.</li>
<li><b>Context</b> is how much conversation (in tokens) the model can hold at once. A bigger
context takes more memory: the agent editor estimates the memory before anything is loaded.
{escape(AUTOMATIC_NOTE)} (Settings → Local models.)</li>
<li>When a conversation outgrows the context, the reply says it is too long and offers
<b>Raise context</b>, with the memory each size needs.</li>
<li><b>GPU layers</b> (-1 = all) moves the model to a graphics card, when the installed
llama.cpp was built for one. Settings → <b>Unload when idle</b> frees the memory of a model
that has not been used for a while.</li>
</ul>""",
        ),
        Section(
            "remote",
            "Remote services",
            """
<p>A remote agent talks to a service over the network: OpenAI, Anthropic, Google Gemini, or
any server that speaks OpenAI's protocol (Groq, OpenRouter, Mistral, Ollama, LM Studio,
llama.cpp's server, vLLM…).</p>
<ul>
<li>In the agent editor, choose the service; its address is filled in (change it for a
server of your own). Give the API key if the service needs one.</li>
<li><b>Fetch models</b> lists the models the service offers; pick one from the list.
<b>Test connection</b> checks the address and the key and says what is wrong, in words.</li>
<li>API keys are kept in your system's keyring, one per service address. Pointing an agent
at another address asks for a key again.</li>
<li>Costs are counted with the prices bundled with the app (Settings → <b>Update prices</b>
fetches newer ones when you ask). A server of your own has no price: give one in the
agent editor's <b>Price</b> section, or its cost shows as <b>—</b> (unknown, never $0).</li>
</ul>""",
        ),
        Section(
            "server",
            "Use your agents from other apps",
            """
<p>The <b>Server</b> page serves your agents to editors, scripts and other apps through an
OpenAI-compatible API. Each agent is a model: its system prompt, settings and model apply, and
every call is measured like a chat (the Stats page can show only the calls other apps made).</p>
<ul>
<li>Press <b>Start server</b>, then <b>Copy address</b> and give it to the app as its base URL
(<code>http://127.0.0.1:7464/v1</code>), with the agent's model id from the Agents table.</li>
<li>By default only apps on this computer can reach it. <b>Other devices on the network</b>
needs an API key: <b>New key…</b> makes one and copies it; apps send it as a bearer token.
Keys stay in your system's keyring; <b>Revoke</b> stops one at once.</li>
<li>Web pages cannot call the server unless you list their exact address.</li>
<li>Local agents share the model with your chats: an app's request waits its turn, and the
<b>Requests</b> list shows it waiting. Double-click a request for its timeline.</li>
<li>The same server runs without the window: <code>simi serve</code>.</li>
</ul>""",
        ),
        Section(
            "statistics",
            "What the statistics mean",
            f"""
<p>Every reply is measured. The line under it shows the agent and the model, the time to the
first token (<b>TTFT</b>), the writing speed in tokens per second, the tokens read and
written (<i>cached</i> ones were reused), the cost (<b>local</b> for a model on this
computer, <b>—</b> when unknown) and why the reply ended. Hover the line for the whole record;
<b>Timeline</b> draws the call to scale and shows where the time went.</p>
<p>The <b>Stats</b> page ({_keys("show_stats")}) sums them up per agent over the days you
choose: calls, errors, tokens, cost, and TTFT and speed as <b>p50</b> (the median: half of the
calls did better, half worse) and <b>p95</b> (only one call in twenty did worse).</p>
<h4>The words</h4>
{TERMS_HTML}
<h4>Definitions</h4>
{DEFINITIONS_HTML}""",
        ),
        Section(
            "shortcuts",
            "Keyboard shortcuts",
            f"""
<p>{new_line} adds a new line in the message box. Help → Keyboard shortcuts shows this list
on its own.</p>
{_shortcuts_table()}""",
        ),
        Section(
            "data",
            "Your data and privacy",
            f"""
<p>{escape(PRIVACY_TEXT)}</p>
<p>{escape(DATA_NOTE)} Settings → <b>Data</b> shows where the folder is, with
<b>Open folder</b>; Help → About copies it with the versions for a bug report.</p>""",
        ),
    ]


def guide_html(parts: list[Section]) -> str:
    return "".join(f'<h2><a name="{s.anchor}"></a>{escape(s.title)}</h2>{s.html}' for s in parts)


class UserGuide(QDialog):
    """The guide: contents on the left, the text on the right, a search box above."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("UserGuide")
        self.setWindowTitle("SIMI Multi user guide")
        self.setModal(False)
        self.sections = sections()
        self.search = search_field("GuideSearch", "Search the guide", "Search the guide")
        self.search.textChanged.connect(self.find_words)
        self.search.returnPressed.connect(self.find_next)
        self.found = QLabel("")
        self.found.setObjectName("DialogNote")
        self.contents = QListWidget()
        self.contents.setObjectName("GuideContents")
        self.contents.setAccessibleName("Contents")
        self.contents.setSpacing(2)
        for section in self.sections:
            self.contents.addItem(section.title)
        self.contents.currentRowChanged.connect(self.show_section)
        self.contents.setMaximumWidth(self.contents.sizeHintForColumn(0) + 32)
        self.text = QTextBrowser()
        self.text.setObjectName("GuideText")
        self.text.setAccessibleName("User guide")
        self.text.setOpenLinks(False)
        self.text.anchorClicked.connect(lambda url: self.text.scrollToAnchor(url.fragment()))
        self.text.document().setDocumentMargin(12)
        self.text.setHtml(guide_html(self.sections))

        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.found)
        middle = QHBoxLayout()
        middle.addWidget(self.contents)
        middle.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(middle, 1)
        layout.addWidget(buttons)
        self.resize(820, 600)
        self.search.setFocus()

    def show_section(self, index: int) -> None:
        if 0 <= index < len(self.sections):
            self.text.scrollToAnchor(self.sections[index].anchor)

    def plain_text(self) -> str:
        return self.text.toPlainText()

    # search -----------------------------------------------------------------------------------
    def _matches(self, words: str) -> list[QTextCursor]:
        document = self.text.document()
        found: list[QTextCursor] = []
        cursor = QTextCursor(document)
        while words:
            cursor = document.find(words, cursor)
            if cursor.isNull():
                break
            found.append(QTextCursor(cursor))
        return found

    def find_words(self, words: str | None = None) -> int:
        """Mark every place the words occur and go to the first; returns how many."""
        words = (self.search.text() if words is None else words).strip()
        matches = self._matches(words)
        marks: list[QTextEdit.ExtraSelection] = []
        look = QTextCharFormat()
        look.setBackground(QColor(theme.current_colors().selection))
        for cursor in matches:
            mark = QTextEdit.ExtraSelection()
            mark.cursor = cursor
            mark.format = look
            marks.append(mark)
        self.text.setExtraSelections(marks)
        if not words:
            self.found.setText("")
        elif not matches:
            self.found.setText("Not in the guide")
        else:
            self.found.setText(f"{len(matches)} found" if len(matches) > 1 else "1 found")
            self.text.setTextCursor(matches[0])
            self.text.ensureCursorVisible()
        return len(matches)

    def find_next(self) -> None:
        words = self.search.text().strip()
        if not words:
            return
        document = self.text.document()
        cursor = document.find(words, self.text.textCursor())
        if cursor.isNull():  # past the last one: from the top again
            cursor = document.find(words, QTextCursor(document))
        if not cursor.isNull():
            self.text.setTextCursor(cursor)
            self.text.ensureCursorVisible()


def open_guide(window: QWidget) -> UserGuide:
    """Help → User guide: the window's guide, raised if it is already open."""
    guide = window.findChild(UserGuide)
    if guide is None:
        guide = UserGuide(window)
        guide.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    guide.show()
    guide.raise_()
    guide.activateWindow()
    return guide
