""" "How to read this": the reply timeline's help, in plain words, with the fixed definitions."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout, QWidget

# The words and the three definitions are the project's fixed ones (ARCHITECTURE.md,
# "What the statistics mean"); the user guide (help_guide.py) shows the same text.
TERMS_HTML = """
<ul>
<li><b>Tokens</b>: models read and write text in pieces called tokens, about three quarters
of a word each. Your conversation is the <i>prompt</i>; what the model writes is the
<i>output</i>.</li>
<li><b>Prefill</b>: before writing anything, the model reads the whole prompt. A long
conversation takes longer to read. Tokens it already read in an earlier call can be
<i>cached</i> and reused; only the <i>newly evaluated</i> ones cost time.</li>
<li><b>KV cache</b>: the model's notes about every token it has read (their attention keys and
values), kept in memory so each new token does not re-read the whole conversation. It grows
with the context size.</li>
<li><b>Prompt cache</b> (local models): when you return to a conversation, SIMI puts back the
notes it kept for it (<i>restored from the memory cache</i>) instead of reading it again; a
long system prompt's notes are also saved on disk, so the first message after a restart skips
it (<i>from the saved system prompt</i>). The timeline shows restoring as its own short part
before the prefill.</li>
<li><b>TTFT</b> (time to first token): how long you waited before the first word appeared.
It holds everything before it: queueing, starting and loading a local model, connecting to a
server, and the prefill.</li>
<li><b>Decode</b>: writing the reply, one token after another. Its speed (tokens per second)
decides how fast the text flows once it has begun.</li>
<li><b>Batching</b>: a model reads the prompt many tokens at a time (a batch), which is why
prefill is much faster per token than decode, which makes one token at a time. A server may
also batch several people's requests together: your request can wait in its queue.</li>
</ul>

"""

DEFINITIONS_HTML = """
<ul>
<li><b>TTFT</b> = from the request being sent to the first content token received.</li>
<li><b>Decode tok/s</b> = the tokens after the first / the time from the first token to the
last (or the backend's own decode counters, when it has them).</li>
<li><b>Prefill tok/s</b> = newly evaluated prompt tokens / prefill time. For a local model
llama.cpp's own counters measure it; for a server, its own timings when it reports them, else
it is marked <i>estimated from TTFT</i>: TTFT also holds the network and any queue, so the
true speed is at least the figure shown.</li>
</ul>
<p>A reply that arrived in one piece (not streamed), or a single token, has no decode speed:
there is nothing to time, so none is shown rather than an absurd one.</p>

"""

HELP_HTML = (
    """
<h3>How to read the reply timeline</h3>
<p>The bar is the call from the moment you pressed Send (left) to the end of the reply
(right), drawn to scale. Each coloured part is one thing the call waited for or did, with its
time. Parts too small to label are listed under the bar with their figures; hover a part to
read what it was.</p>

<h4>The words</h4>
"""
    + TERMS_HTML
    + "<h4>Definitions</h4>\n"
    + DEFINITIONS_HTML
    + """<h4>Who measured what</h4>
<p>The top lane is SIMI Multi's own clock: what you waited for. When a server reports its own
times (a llama.cpp server, for example), a second lane shows its prefill and decode inside
that span; the rest of the span, which the server did not account for, is <i>network and
queue</i>. The server says how long each part took, not when it began, so its prefill is drawn
ending at the first token.</p>
<p>An agent that searches knowledge collections does so after Send and before its call: the
<i>Knowledge search</i> lane shows embedding the question, searching the collections and reading
the passages, and the call's own parts begin where it ends (its time is part of the wait for
the first token).</p>
<p>Where a figure is missing, the panel says <i>not reported by</i> the provider: nothing is
guessed. A price shown comes from the provider itself, your own price for the agent, or the
genai-prices dataset, and says which.</p>

<h4>Replies that used tools</h4>
<p>An agent allowed tools may answer in several <i>model calls</i>: the first asks for a
tool, SIMI Multi runs it (after you allow it), and the next call reads its result. The
<i>Turn</i> lane at the top shows them in order, to scale: call 1, each tool with its run time,
call 2, and so on, with any time spent <i>waiting for your approval</i>. A tool call that never
ran (denied, refused, or invalid) is a thin mark with its status. Below it, choose a call to
see its own timeline. The totals add every call's time, tokens and cost; a cost stays unknown
when any call's price is unknown.</p>

<h4>Why did one reply feel slower?</h4>
<ul>
<li>A long first part before the first token on a local model: starting the worker or
loading the model (only the first call pays it).</li>
<li>A long prefill: a long conversation, or little of it cached.</li>
<li>A long <i>network and queue</i>: the server was busy or far away.</li>
<li>A slow decode: a large model, or a busy machine.</li>
</ul>
"""
)


class TimelineHelp(QDialog):
    """The help text in a small window of its own (selectable, copyable)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TimelineHelp")
        self.setWindowTitle("How to read the reply timeline")
        self.setModal(False)
        layout = QVBoxLayout(self)
        self.text = QTextBrowser()
        self.text.setObjectName("TimelineHelpText")
        self.text.setAccessibleName("How to read the reply timeline")
        self.text.setOpenLinks(False)
        self.text.setHtml(HELP_HTML)
        self.text.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        layout.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self.resize(560, 440)

    def plain_text(self) -> str:
        return self.text.toPlainText()
