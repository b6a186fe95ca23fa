#!/usr/bin/env bash
# Build the one-folder bundle (dist/simi-multi/) and smoke-test it: version and identity, that
# genai-prices loads inside it, a real reply from the bundled starter model through the bundled
# llama.cpp worker, its stats row (cost "local"), and an offscreen window.
# Run after ./scripts/install-and-run (or ./scripts/test) has made .venv.
#
#   packaging/build-bundle.sh              # bundles .venv (llama.cpp built for THIS CPU)
#   PORTABLE=1 packaging/build-bundle.sh   # bundles build/bundle-venv with a portable llama.cpp
#
# PORTABLE=1: llama-cpp-python is compiled with -DGGML_NATIVE=OFF (generic x86-64 plus AVX2,
# FMA, F16C: any x86-64 CPU from about 2013 on, Haswell / Zen 1) into its own venv, so the
# bundle runs on machines other than the build machine. The wheel is cached per flag set
# (about 5 minutes on 2 cores the first time), as scripts/lib.sh does for .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

venv=.venv
dist="${DIST:-dist}"  # where the bundle goes (dist/simi-multi/)
work=build/pyinstaller
if [[ "${PORTABLE:-0}" == 1 ]]; then
  venv=build/bundle-venv
  work=build/pyinstaller-portable
  if [[ ! -x "$venv/bin/python" ]]; then
    step "Creating $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  fi
  if [[ $(uname -m) == x86_64 ]]; then
    portable="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  else
    portable="-DGGML_NATIVE=OFF"
  fi
  # install_llama_cpp keys its wheel cache by CPU flags and CMAKE_ARGS; the marker file says
  # which flags this venv's build has.
  if [[ "$(cat "$venv/.llama-cpp-flags" 2>/dev/null)" != "$portable" ]]; then
    rm -f "$venv/.llama-cpp-built-here"
  fi
  VENV="$venv" CMAKE_ARGS="$portable ${CMAKE_ARGS:-}" install_llama_cpp
  echo "$portable" >"$venv/.llama-cpp-flags"
  "$venv/bin/pip" install --quiet --disable-pip-version-check .
  VENV="$venv" install_starter_model
fi

"$venv/bin/pip" install --quiet --disable-pip-version-check "pyinstaller>=6,<7"
start=$(date +%s)
"$venv/bin/pyinstaller" packaging/simi.spec --noconfirm --distpath "$dist" --workpath "$work"
echo "built in $(($(date +%s) - start)) s"

# llama-cpp-python's wheel holds every library three times (libX.so, libX.so.0, libX.so.0.N.M:
# copies, not links) and PyInstaller puts the sonames the others link to at the top level as
# well. Keep one file each: the rest become symbolic links to it (the loader then also maps
# each library once).
lib="$dist/simi-multi/_internal/llama_cpp/lib"
for f in "$lib"/lib*.so*; do
  [[ -L "$f" ]] && continue
  name=$(basename "$f")
  soname=$(objdump -p "$f" | awk '/SONAME/ {print $2}')
  stem="${name%%.so*}.so"
  if [[ -n "$soname" && -f "$lib/../../$soname" && ! -L "$lib/../../$soname" ]] \
    && cmp -s "$f" "$lib/../../$soname"; then
    ln -sf "../../$soname" "$f"
  elif [[ "$name" != "$stem" && -f "$lib/$stem" && ! -L "$lib/$stem" ]] && cmp -s "$f" "$lib/$stem"; then
    ln -sf "$stem" "$f"
  fi
done

# VULKAN=1: the Vulkan build of the same llama-cpp-python beside the CPU one, in
# llama_cpp/lib-vulkan; the app loads it when it finds a real Vulkan GPU at start
# (desktop/local/libraries.py), else the CPU build in llama_cpp/lib. Built once into the wheel
# cache (scripts/lib.sh llama_wheel: about 11 minutes on 2 cores), portable when PORTABLE=1.
if [[ "${VULKAN:-0}" == 1 ]]; then
  missing=$(vulkan_missing_packages)
  # shellcheck disable=SC2086  # one word per package
  [[ -z "$missing" ]] || install_system_packages $missing
  vk_cmake=""
  [[ "${PORTABLE:-0}" != 1 ]] || vk_cmake=$(portable_cmake_args)
  wheel=$(VENV="$venv" llama_wheel vulkan "$vk_cmake")
  have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))')
  if [[ $(basename "$wheel") != "llama_cpp_python-$have-"* ]]; then
    echo "build-bundle: the Vulkan wheel $(basename "$wheel") is not llama-cpp-python $have, the version of the bundle's Python code" >&2
    exit 1
  fi
  rm -rf "$dist/simi-multi/_internal/llama_cpp/lib-vulkan"
  python3 packaging/unpack-libs.py "$wheel" "$dist/simi-multi/_internal/llama_cpp/lib-vulkan"
fi

# Debug info out of the libraries that carry it (libpython: ~18 MiB). Never numpy.libs: a
# stripped OpenBLAS fails to load ("ELF load command address/offset not page-aligned").
find "$dist/simi-multi/_internal" -type f -name '*.so*' ! -path '*/numpy.libs/*' -print0 \
  | xargs -0 file | awk -F: '/with debug_info/ {print $1}' \
  | while read -r f; do strip --strip-debug "$f"; done

app="$dist/simi-multi/simi-multi"
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
"$app" --version
SIMI_SELF_CHECK=1 SIMI_HOME="$home" "$app" --version --verbose | tee "$home/identity.txt"
grep -q '^Build: bundle (PyInstaller)$' "$home/identity.txt"
grep -q '^Price check: gpt-4o-mini.*= \$0.0001272' "$home/identity.txt"
SIMI_HOME="$home" "$app" ask --json "Say hi" | tail -1 >"$home/ask.json"
python3 - "$home/ask.json" <<'EOF'
import json, sys
row = json.loads(open(sys.argv[1]).read())
assert row["provider_kind"] == "local" and row["output_tokens"] > 0, row
EOF
SIMI_HOME="$home" "$app" stats --rows --json >"$home/stats.json"
python3 - "$home/stats.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 1 and rows[0]["price_source"] == "local" and rows[0]["cost_usd"] == 0, rows
print(f"stats row: {rows[0]['agent_name']}, {rows[0]['output_tokens']} tokens, cost local")
EOF
SIMI_HOME="$home" QT_QPA_PLATFORM=offscreen SIMI_SCREENSHOT="$home/window.png" "$app"
test -s "$home/window.png"
SIMI_HOME="$home" QT_QPA_PLATFORM=offscreen SIMI_EXIT_AFTER_FIRST_PAINT=1 "$app"
if [[ -d "$dist/simi-multi/_internal/llama_cpp/lib-vulkan" ]]; then
  # Two builds: with no GPU here the start keeps the CPU one (the reply above); forced, the
  # Vulkan one loads where the Vulkan loader is installed.
  SIMI_HOME="$home" "$app" --version --verbose | grep '^Backend: CPU (of cpu, vulkan: '
  if ldconfig -p | grep -q 'libvulkan\.so\.1 '; then
    SIMI_LLAMA_LIBS=vulkan SIMI_HOME="$home" "$app" --version --verbose \
      | grep '^Backend: Vulkan (of cpu, vulkan: SIMI_LLAMA_LIBS=vulkan)$'
  fi
  du -sm "$dist/simi-multi/_internal/llama_cpp/lib-vulkan"
fi
du -sm "$dist/simi-multi"
echo "bundle OK: $app"
