"""Which llama.cpp build this process loads, when more than one is installed (issue 26).

A llama-cpp-python install carries one build, in ``llama_cpp/lib``: the one
``scripts/install-and-run`` compiled for this machine. SIMI's Linux package carries two: the
CPU build there and a Vulkan build beside it in ``llama_cpp/lib-vulkan``
(``packaging/build-bundle.sh``). The app picks one when it starts, before anything loads
llama.cpp, with ``SIMI_LLAMA_LIBS=auto|cpu|vulkan`` (default auto):

* auto takes the Vulkan build only when a probe finds a real Vulkan GPU: a GPU's device node
  (``/dev/dri/renderD*``, ``/dev/nvidia*``) must exist, and then a separate process loads the
  Vulkan build and lists ggml's devices (a driver that crashes takes the probe down, never the
  app). Mesa's software device (llvmpipe) does not count; ggml-vulkan hides CPU-type devices
  anyway unless ``GGML_VK_VISIBLE_DEVICES`` lists them. The answer is kept in the cache
  folder, keyed by the device nodes and the driver manifests, so a start with the same
  hardware does not probe again.
* cpu keeps the default build; vulkan takes the Vulkan build without probing (the GPU tests
  on lavapipe, or a person who knows better).

``use`` points llama-cpp-python at the chosen folder (``LLAMA_CPP_LIB_PATH``,
``MTMD_CPP_LIB``; the worker processes inherit them) and loads its ggml libraries by path,
leaves first, so that libllama links to those and not to same-named libraries earlier on the
search path (a PyInstaller bundle puts the default build's sonames at its top, and its
``LD_LIBRARY_PATH`` wins over the libraries' own ``$ORIGIN`` run path).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("simi.local")

ENV_CHOICE = "SIMI_LLAMA_LIBS"
CHOICES = ("auto", "cpu", "vulkan")
# Leaves first: each library's NEEDED entries are loaded before it (matched by soname).
_LOAD_ORDER = (
    "ggml-base",
    "ggml-cpu",
    "ggml-vulkan",
    "ggml-cuda",
    "ggml-hip",
    "ggml-metal",
    "ggml",
    "llama",
)
PROBE_TIMEOUT_S = 30.0
_preloaded: list[ctypes.CDLL] = []  # kept for the life of the process


@dataclass(frozen=True, slots=True)
class Choice:
    """The build a process uses: ``name`` "cpu" (the default folder, whatever it holds) or
    "vulkan"; ``folder`` its libraries; ``why`` one line for the log and ``simi --version
    --verbose``."""

    name: str
    folder: Path | None
    why: str


def package_folder() -> Path | None:
    """The llama_cpp package's folder, found without importing it (importing loads the
    default build, which is what must not happen before the choice)."""
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            if Path(folder, "lib").is_dir():
                return Path(folder)
    bundle = getattr(sys, "_MEIPASS", None)  # a PyInstaller bundle
    if bundle and Path(bundle, "llama_cpp", "lib").is_dir():
        return Path(bundle, "llama_cpp")
    return None


def builds() -> dict[str, Path]:
    """The builds installed: {"cpu": llama_cpp/lib, "vulkan": llama_cpp/lib-vulkan}, each
    present only when its folder holds a libllama."""
    package = package_folder()
    if package is None:
        return {}
    found = {}
    for name, sub in (("cpu", "lib"), ("vulkan", "lib-vulkan")):
        folder = package / sub
        if _library(folder, "llama") is not None:
            found[name] = folder
    return found


def active_folder() -> Path | None:
    """The folder this process loads llama.cpp from: the chosen one, else the default."""
    chosen = os.environ.get("LLAMA_CPP_LIB_PATH")
    if chosen:
        return Path(chosen)
    return builds().get("cpu")


def choose(environ: os._Environ[str] | dict[str, str] | None = None) -> Choice:
    """Which build to use (see the module's docstring). Probes at most once per hardware."""
    env = os.environ if environ is None else environ
    found = builds()
    wanted = (env.get(ENV_CHOICE) or "auto").strip().lower()
    default = Choice("cpu", found.get("cpu"), "the build installed with llama-cpp-python")
    if wanted not in CHOICES:
        log.warning("%s=%s: use auto, cpu or vulkan; using auto", ENV_CHOICE, wanted)
        wanted = "auto"
    if "vulkan" not in found:
        if wanted == "vulkan":
            log.warning("%s=vulkan, but this install has no Vulkan build", ENV_CHOICE)
        return default
    if wanted == "cpu":
        return Choice("cpu", found.get("cpu"), f"{ENV_CHOICE}=cpu")
    if wanted == "vulkan":
        return Choice("vulkan", found["vulkan"], f"{ENV_CHOICE}=vulkan")
    nodes = gpu_device_nodes()
    if not nodes:
        return Choice(
            "cpu", found.get("cpu"), "no GPU device node (/dev/dri/renderD*, /dev/nvidia*)"
        )
    gpus = probe_cached(found["vulkan"], nodes)
    if gpus:
        return Choice("vulkan", found["vulkan"], f"Vulkan GPU {', '.join(gpus)}")
    return Choice("cpu", found.get("cpu"), "the Vulkan build lists no GPU here")


def use(choice: Choice) -> None:
    """Make this process, and the workers it starts, load ``choice``'s libraries."""
    if choice.folder is None or choice.name == "cpu":
        return
    os.environ["LLAMA_CPP_LIB_PATH"] = str(choice.folder)
    os.environ["MTMD_CPP_LIB"] = str(choice.folder)
    preload(choice.folder)


def preload(folder: Path) -> None:
    """Load ``folder``'s ggml and llama libraries, leaves first, once per process."""
    if _preloaded:
        return
    mode = getattr(ctypes, "RTLD_GLOBAL", 0)
    if _library(folder, "ggml-vulkan") is not None and sys.platform.startswith("linux"):
        # what a failed load would not say in a bundle (PyInstaller rewrites the message)
        try:
            _preloaded.append(ctypes.CDLL("libvulkan.so.1", mode=mode))
        except OSError:
            raise OSError(
                "the Vulkan loader libvulkan.so.1 is not installed (apt install libvulkan1)"
            ) from None
    for stem in _LOAD_ORDER:
        path = _library(folder, stem)
        if path is not None:
            _preloaded.append(ctypes.CDLL(str(path), mode=mode))


def preload_from_env() -> None:
    """In a worker: load the libraries the app chose (it set ``LLAMA_CPP_LIB_PATH``)."""
    chosen = os.environ.get("LLAMA_CPP_LIB_PATH")
    if chosen:
        preload(Path(chosen))


def choose_at_start() -> Choice:
    """Choose and use, once per process; what ``simi`` does before anything else. Never
    fails: a build that cannot be used falls back to the default with a log line."""
    global _started
    if _started is not None:
        return _started
    choice = choose()
    try:
        use(choice)
    except OSError as exc:
        log.warning(
            "the %s build of llama.cpp does not load (%s); using the CPU build", choice.name, exc
        )
        os.environ.pop("LLAMA_CPP_LIB_PATH", None)
        os.environ.pop("MTMD_CPP_LIB", None)
        choice = Choice("cpu", builds().get("cpu"), f"the {choice.name} build does not load: {exc}")
    if choice.name != "cpu" or len(builds()) > 1:
        log.info("llama.cpp build: %s (%s)", choice.name, choice.why)
    _started = choice
    return choice


_started: Choice | None = None


def gpu_device_nodes(dev: Path = Path("/dev")) -> list[str]:
    """The GPU device nodes here: DRM render nodes and NVIDIA's; empty on a machine (or a
    container) that has no GPU, where the probe is not worth a process."""
    names = [p.name for p in (dev / "dri").glob("renderD*")] if (dev / "dri").is_dir() else []
    names += [p.name for p in dev.glob("nvidia[0-9]*")]
    return sorted(names)


def _fingerprint(folder: Path, nodes: list[str]) -> str:
    """What the probe's answer depends on: the build, the device nodes, the drivers."""
    parts = [str(folder), _mtime(folder / "libggml-vulkan.so"), *nodes]
    manifests = []
    for env in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "GGML_VK_VISIBLE_DEVICES"):
        parts.append(f"{env}={os.environ.get(env, '')}")
    for root in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"):
        if os.path.isdir(root):
            manifests += [f"{e.path}:{_mtime(Path(e.path))}" for e in os.scandir(root)]
    return hashlib.sha256("\n".join(parts + sorted(manifests)).encode()).hexdigest()[:16]


def _mtime(path: Path) -> str:
    try:
        return str(path.stat().st_mtime_ns)
    except OSError:
        return "-"


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "simi-multi", "llama-build-choice.json")


def probe_cached(folder: Path, nodes: list[str]) -> list[str]:
    """``probe`` through the cache file (one entry per fingerprint)."""
    key = _fingerprint(folder, nodes)
    cache = _cache_file()
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), list):
        return [str(name) for name in known[key]]
    gpus = probe(folder)
    if gpus is not None:  # a probe that failed is tried again next start
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({key: gpus}), encoding="utf-8")
        except OSError:
            pass
    return gpus or []


def probe(folder: Path, timeout: float = PROBE_TIMEOUT_S) -> list[str] | None:
    """The real GPUs the build in ``folder`` lists ("Vulkan0 · NVIDIA H200"), from a process
    of its own; None when the probe crashed or hung (then the CPU build is used)."""
    import multiprocessing  # here: most starts read the probe's answer from its cache

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_probe_main, args=(str(folder), send), daemon=True)
    process.start()
    send.close()
    try:
        if receive.poll(timeout):
            answer: Any = receive.recv()
            return [str(name) for name in answer] if isinstance(answer, list) else None
        log.warning("the Vulkan probe did not answer within %.0f s", timeout)
        return None
    except (EOFError, OSError):
        log.warning("the Vulkan probe stopped (exit code %s)", process.exitcode)
        return None
    finally:
        receive.close()
        process.join(2)
        if process.is_alive():
            process.kill()


def _probe_main(folder: str, conn: Any) -> None:
    """In the probe process: load the build and name its real GPUs."""
    use(Choice("vulkan", Path(folder), "probe"))
    from desktop.local.devices import list_devices

    found = list_devices(Path(folder))
    conn.send([f"{d.name} · {d.label}" for d in found if d.kind != "CPU" and not d.software])
    conn.close()


def _library(folder: Path, stem: str) -> Path | None:
    for name in (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        if (folder / name).exists():
            return folder / name
    return None
