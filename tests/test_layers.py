import subprocess
import sys


def test_qt_free_core_imports_no_pyside6() -> None:
    code = (
        "import sys\n"
        "import desktop.chat.services, desktop.chat.session, desktop.chat.agents\n"
        "import desktop.llm.openai_compat, desktop.local.provider, desktop.local.engine\n"
        "import desktop.store.db, desktop.settings.secrets, desktop.cli\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'qasync')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"Qt-free packages imported: {out.stdout}"
