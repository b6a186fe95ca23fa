#!/usr/bin/env bash
# Build the one-folder bundle (dist/simi-multi/) and smoke-test it: version, a real reply from
# the bundled starter model through the bundled llama.cpp worker, and an offscreen window.
# Run after ./scripts/install-and-run (or ./scripts/test) has made .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/pip install --quiet --disable-pip-version-check "pyinstaller>=6,<7"
.venv/bin/pyinstaller packaging/simi.spec --noconfirm --distpath dist --workpath build/pyinstaller
app=dist/simi-multi/simi-multi
home=$(mktemp -d)
"$app" --version
SIMI_HOME="$home" "$app" ask --json "Say hi" | tail -1
SIMI_HOME="$home" QT_QPA_PLATFORM=offscreen SIMI_SCREENSHOT="$home/window.png" "$app"
test -s "$home/window.png"
du -sh dist/simi-multi
echo "bundle OK: $app"
