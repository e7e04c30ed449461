"""What this machine has: ROCm, the kernel driver, GPUs, and the frameworks.

Every probe here is defensive: a missing tool, a tool that fails, a framework
that crashes at import, or output that makes no sense becomes a recorded
``error`` string, never an exception. Frameworks are probed in a child Python
process (with a time limit), so a framework that segfaults or hangs while
loading GPU libraries cannot take the caller down with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from . import agents, hostfacts, rocminfo, tools

PROBE_TIMEOUT_S = 120.0

# Each probe prints one JSON object on its last line of stdout.
_PROBES: dict[str, str] = {
    "pytorch": r"""
import json
import torch
info = {"version": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None)}
try:  # the GPU targets this build carries kernels for (gfx names on ROCm)
    info["arch_list"] = list(torch.cuda.get_arch_list())
except Exception as exc:
    info["arch_list_error"] = f"{type(exc).__name__}: {exc}"
try:
    info["gpu_available"] = bool(torch.cuda.is_available())
    devices = []
    for i in range(torch.cuda.device_count() if info["gpu_available"] else 0):
        p = torch.cuda.get_device_properties(i)
        arch = getattr(p, "gcnArchName", None)
        devices.append({"name": p.name, "gfx": arch.split(":")[0] if arch else None,
                        "memory_gib": round(p.total_memory / 2**30, 1)})
    info["devices"] = devices
except Exception as exc:
    info["gpu_error"] = f"{type(exc).__name__}: {exc}"
try:  # what distributed training (torchrun, DDP, FSDP) can use
    import glob, os
    import torch.distributed as dist
    d = {"available": dist.is_available()}
    if d["available"]:
        d["gloo"] = dist.is_gloo_available()
        d["nccl"] = dist.is_nccl_available()
    if d.get("nccl") and info.get("gpu_available"):
        d["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    d["visible_env"] = {k: os.environ[k] for k in
                        ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
                        if k in os.environ}
    if info.get("hip"):
        roots = [os.path.join(os.path.dirname(torch.__file__), "lib")]
        roots += [os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "lib")]
        roots += sorted(glob.glob("/opt/rocm*/lib")) + sorted(glob.glob("/opt/rocm/core*/lib"))
        d["rccl"] = sorted({p for r in roots for p in glob.glob(os.path.join(r, "librccl.so*"))})
    info["distributed"] = d
except Exception as exc:
    info["distributed"] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(info))
""",
    "tensorflow": r"""
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
info = {"version": tf.__version__, "built_with_rocm": bool(tf.test.is_built_with_rocm()),
        "built_with_cuda": bool(tf.test.is_built_with_cuda())}
try:
    info["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
except Exception as exc:
    info["gpu_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
""",
    "onnxruntime": r"""
import json
import onnxruntime as ort
print(json.dumps({"version": ort.__version__,
                  "providers": list(ort.get_available_providers())}))
""",
    "migraphx": r"""
import json
import migraphx
version = getattr(migraphx, "__version__", None)
if version is None:
    try:
        from importlib.metadata import version as _v
        version = _v("migraphx")
    except Exception:
        version = None
print(json.dumps({"version": version, "module": getattr(migraphx, "__file__", None)}))
""",
}

FRAMEWORKS = tuple(_PROBES)


@dataclass
class FrameworkInfo:
    """What a child process learned about one framework."""

    name: str
    installed: bool = False
    version: str | None = None
    details: dict = field(default_factory=dict)
    error: str | None = None
    """Why nothing (or not everything) could be learned; ``None`` when all went well."""


def _last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def probe_framework(
    name: str, python: str | None = None, timeout: float = PROBE_TIMEOUT_S
) -> FrameworkInfo:
    """Import framework ``name`` in a child ``python`` and report what it says."""
    if name not in _PROBES:
        raise ValueError(f"unknown framework {name!r}: choose one of {', '.join(_PROBES)}")
    python = python or sys.executable
    info = FrameworkInfo(name=name)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(
            [python, "-c", _PROBES[name]],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        info.error = f"the Python interpreter {python!r} was not found"
        return info
    except PermissionError:
        info.error = f"the Python interpreter {python!r} cannot be executed"
        return info
    except subprocess.TimeoutExpired:
        info.error = f"importing {name} did not finish within {timeout:.0f} s"
        return info
    except OSError as exc:
        info.error = f"could not start {python!r}: {exc}"
        return info

    result = _last_json_line(proc.stdout)
    if proc.returncode == 0 and result is not None:
        info.installed = True
        info.version = result.pop("version", None)
        info.details = result
        if "gpu_error" in result:
            info.error = f"the GPU query failed: {result['gpu_error']}"
        return info
    if "ModuleNotFoundError" in proc.stderr or "No module named" in proc.stderr:
        info.error = "not installed"
        return info
    if proc.returncode < 0:
        info.error = f"importing {name} crashed the process (signal {-proc.returncode})"
    elif proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        info.error = f"importing {name} failed: {_short(last[0])}"
    else:
        info.error = (
            f"the {name} probe printed output that could not be read: {_short(proc.stdout)!r}"
        )
    return info


# ROCm itself ---------------------------------------------------------------

_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)?")


OPT_ROOT = Path("/opt")
"""Where the ROCm trees are looked for (``<OPT_ROOT>/rocm``, ``.../rocm/core-N.N``)."""

_CORE_DIR_RE = re.compile(r"core(?:-(\d+(?:\.\d+){0,2}))?$")


def rocm_root(env: dict | None = None) -> Path:
    """``$ROCM_PATH`` or ``/opt/rocm``."""
    env = os.environ if env is None else env
    return Path(env.get("ROCM_PATH") or "/opt/rocm")


def _core_key(path: Path) -> tuple[int, ...]:
    m = _CORE_DIR_RE.match(path.name)
    return tuple(int(x) for x in m.group(1).split(".")) if m and m.group(1) else ()


def rocm_roots(env: dict | None = None, opt_root: str | os.PathLike | None = None) -> list[Path]:
    """The ROCm trees to look at, in order: ``$ROCM_PATH`` alone when it is set;
    else the ROCm Core SDK's ``/opt/rocm/core-N.N`` (newest first) and
    ``/opt/rocm/core``, then the legacy ``/opt/rocm``."""
    env = os.environ if env is None else env
    if env.get("ROCM_PATH"):
        return [Path(env["ROCM_PATH"])]
    base = Path(OPT_ROOT if opt_root is None else opt_root) / "rocm"
    try:
        cores = [p for p in base.glob("core-*") if _CORE_DIR_RE.match(p.name)]
    except OSError:
        cores = []
    cores.sort(key=_core_key, reverse=True)
    return cores + [base / "core", base]


def stream_hint(root: Path) -> str | None:
    """``core-sdk`` for a Core SDK directory (``core`` or ``core-N.N``); else None
    (``/opt/rocm`` can hold either stream: the Core SDK links its files there)."""
    return "core-sdk" if _CORE_DIR_RE.match(Path(root).name) else None


@dataclass
class RocmInfo:
    path: str
    version: str | None = None
    source: str | None = None
    error: str | None = None
    layout: str | None = None
    """``ROCM_PATH``, ``/opt/rocm``, ``core-sdk`` (``/opt/rocm/core*``) or ``pip``."""
    stream: str | None = None
    """``core-sdk`` where the layout shows it; the doctor fills in the rest from the data."""


def _read_version_file(root: Path, info: RocmInfo) -> bool:
    """Fill ``info`` from ``<root>/.info/version``; True when that settled it."""
    for candidate in (root / ".info" / "version", root / ".info" / "version-dev"):
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            info.error = f"could not read {candidate}: {exc.strerror or exc}"
            return True
        match = _VERSION_RE.search(text)
        if match:
            info.version, info.source = match.group(0), str(candidate)
        else:
            info.error = f"{candidate} does not contain a version number: {_short(text, 80)!r}"
        return True
    return False


def _rocm_tree(root: Path, layout: str) -> RocmInfo:
    info = RocmInfo(path=str(root), layout=layout, stream=stream_hint(root))
    if _read_version_file(root, info):
        return info
    key = _core_key(root)
    if key and root.is_dir():
        info.version = ".".join(map(str, key))
        info.source = f"directory name {root.name}"
        return info
    if root.exists():
        info.error = f"{root} exists but has no .info/version file"
    else:
        info.error = f"ROCm is not installed at {root} (set ROCM_PATH if it lives elsewhere)"
    return info


def pip_rocm(site_dirs: list | None = None) -> RocmInfo | None:
    """ROCm installed with pip (the ``rocm`` distribution of TheRock's wheels, whose
    ``rocm_sdk`` module and ``rocm-sdk version`` report the version) in
    ``site_dirs`` (default: this interpreter's ``sys.path``), or None."""
    for entry in sys.path if site_dirs is None else site_dirs:
        try:
            dists = sorted(Path(entry).glob("rocm-*.dist-info"))
        except (OSError, TypeError):
            continue
        for dist in dists:
            try:
                meta = (dist / "METADATA").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            name = re.search(r"^Name:\s*(\S+)", meta, re.M)
            version = re.search(r"^Version:\s*(\S+)", meta, re.M)
            if name and name.group(1).lower() == "rocm" and version:
                return RocmInfo(
                    path=str(Path(entry) / "rocm_sdk"),
                    version=version.group(1),
                    source=str(dist / "METADATA"),
                    layout="pip",
                )
    return None


def rocm_version(
    env: dict | None = None,
    opt_root: str | os.PathLike | None = None,
    site_dirs: list | None = None,
) -> RocmInfo:
    """The installed ROCm: its path, version, layout and (where the layout shows
    it) stream. Looks at :func:`rocm_roots` (reading ``.info/version``, or a
    Core SDK directory's ``core-N.N`` name), then at a pip-installed ROCm."""
    env = os.environ if env is None else env
    roots = rocm_roots(env, opt_root)
    for root in roots:
        layout = "ROCM_PATH" if env.get("ROCM_PATH") else "/opt/rocm"
        info = _rocm_tree(root, "core-sdk" if stream_hint(root) else layout)
        if info.version or (info.error and root.exists()):
            return info
        if env.get("ROCM_PATH"):
            return info
    pip = pip_rocm(site_dirs)
    if pip is not None:
        return pip
    base = roots[-1]
    return RocmInfo(
        path=str(base),
        layout="/opt/rocm",
        error=f"ROCm is not installed at {base}, {base}/core or {base}/core-N.N, nor with "
        "pip in this Python (set ROCM_PATH if it lives elsewhere)",
    )


@dataclass
class KernelDriverInfo:
    loaded: bool | None
    version: str | None = None
    note: str | None = None


def kernel_driver(sys_root: str = "/sys") -> KernelDriverInfo:
    """Whether the amdgpu kernel module is loaded, and its version if it reports one.

    The DKMS driver from AMD's packages reports a version in
    ``/sys/module/amdgpu/version``; the driver that ships inside a distribution's
    kernel does not (it then matches the kernel release).
    """
    module = Path(sys_root) / "module" / "amdgpu"
    kfd = Path("/dev/kfd")
    if not module.exists():
        note = "the amdgpu kernel module is not loaded"
        if kfd.exists():
            note += " (but /dev/kfd exists, e.g. inside a container)"
        return KernelDriverInfo(loaded=False if not kfd.exists() else None, note=note)
    try:
        text = (module / "version").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return KernelDriverInfo(loaded=True, note="in-kernel amdgpu driver (no version reported)")
    match = _VERSION_RE.search(text)
    return KernelDriverInfo(
        loaded=True,
        version=match.group(0) if match else None,
        note=None if match else f"unreadable driver version {_short(text, 60)!r}",
    )


# PCI devices -------------------------------------------------------------

PCI_VENDORS = {"0x1002": "AMD", "0x10de": "NVIDIA", "0x8086": "Intel"}
# Display controllers (0x03xxxx) and processing accelerators (0x12xxxx).
_GPU_CLASSES = ("0x03", "0x12")


def pci_gpus(sys_root: str = "/sys") -> list[dict]:
    """Display controllers and accelerators on the PCI bus, read from sysfs (no tools needed)."""
    found = []
    base = Path(sys_root) / "bus" / "pci" / "devices"
    try:
        devices = sorted(base.iterdir())
    except OSError:
        return found
    for dev in devices:
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
            klass = (dev / "class").read_text().strip().lower()
            device = (dev / "device").read_text().strip().lower()
        except OSError:
            continue
        if klass.startswith(_GPU_CLASSES):
            found.append(
                {
                    "address": dev.name,
                    "vendor": PCI_VENDORS.get(vendor, vendor),
                    "device_id": device,
                    "class": klass,
                }
            )
    return found


# Everything together -----------------------------------------------------


@dataclass
class SystemReport:
    rocm: RocmInfo
    kernel_driver: KernelDriverInfo
    rocminfo_source: str
    rocminfo: agents.RocminfoReport
    pci_gpus: list[dict]
    frameworks: dict[str, FrameworkInfo]
    host: hostfacts.HostFacts | None = None
    """Device nodes, groups, container, host settings (None: not collected)."""
    rocminfo_capture: tools.Capture | None = None
    """rocminfo's output verbatim, when it was run here or read from a snapshot."""
    gpu_workload: list[dict] | None = None
    """The real workload's result per visible GPU (:mod:`~rocm_dl_guide.doctor.workload`);
    ``None``: not run (PyTorch saw no GPU, or a snapshot from before the check)."""
    log: dict | None = None
    """The reader's own error text (``doctor --log``): ``{"source", "text"}``."""
    smi: dict | None = None
    """``amd-smi``/``rocm-smi`` output, read by :mod:`~rocm_dl_guide.doctor.smi`:
    ``{"source", "text"}`` from the reader (``doctor --smi``), or what :func:`collect_smi`
    ran here, with ``"error"`` (one line, or None); ``None``: not collected."""

    def with_rocminfo(self, text: str, source: str = "saved rocminfo output") -> SystemReport:
        """The same facts with ``text`` (a saved ``rocminfo`` output) in place of
        this machine's: what the checks see on another node, without probing
        every framework again."""
        cap = tools.Capture("rocminfo", text=text)
        return replace(
            self, rocminfo_source=source, rocminfo=rocminfo.report_from(cap), rocminfo_capture=cap
        )

    def gpus(self) -> list[dict]:
        """GPUs from ``rocminfo``; failing that, the GPUs PyTorch sees."""
        gpus = [
            {
                "gfx": a.gfx,
                "marketing_name": a.marketing_name or None,
                "compute_units": a.compute_units,
                "vendor": a.vendor or None,
                "source": self.rocminfo_source,
            }
            for a in self.rocminfo.gpus
        ]
        if gpus:
            return gpus
        torch_info = self.frameworks.get("pytorch")
        for dev in (torch_info.details.get("devices") or []) if torch_info else []:
            gpus.append(
                {
                    "gfx": dev.get("gfx"),
                    "marketing_name": dev.get("name"),
                    "compute_units": None,
                    "vendor": None,
                    "source": "pytorch",
                }
            )
        return gpus

    def to_dict(self) -> dict:
        return {
            "rocm": asdict(self.rocm),
            "kernel_driver": asdict(self.kernel_driver),
            "rocminfo": {
                "source": self.rocminfo_source,
                "runtime_version": self.rocminfo.runtime_version,
                "kernel_module_loaded": self.rocminfo.kernel_module_loaded,
                "agents": len(self.rocminfo.agents),
                "error": self.rocminfo.error,
            },
            "gpus": self.gpus(),
            "pci_gpus": self.pci_gpus,
            "frameworks": {k: asdict(v) for k, v in self.frameworks.items()},
            "gpu_workload": self.gpu_workload,
        }


def collect(
    rocminfo_text: str | None = None,
    rocminfo_source: str | None = None,
    python: str | None = None,
    frameworks: tuple[str, ...] = FRAMEWORKS,
    env: dict | None = None,
    run_smi: bool = True,
) -> SystemReport:
    """Gather everything. ``rocminfo_text`` replaces running ``rocminfo``;
    ``run_smi=False`` skips ``amd-smi``/``rocm-smi`` (:func:`collect_smi`)."""
    if rocminfo_text is None:
        cap = tools.capture(_find_rocminfo(env))
        source = "rocminfo"
    else:
        cap = tools.Capture("rocminfo", text=rocminfo_text)
        source = rocminfo_source or "saved rocminfo output"
    from . import workload

    found = _probe_all(frameworks, python)
    torch_info = found.get("pytorch")
    seen = torch_info.details.get("devices") if torch_info and torch_info.installed else None
    return SystemReport(
        rocm=rocm_version(env),
        kernel_driver=kernel_driver(),
        rocminfo_source=source,
        rocminfo=rocminfo.report_from(cap),
        pci_gpus=pci_gpus(),
        frameworks=found,
        host=hostfacts.collect(env=env),
        rocminfo_capture=cap,
        gpu_workload=workload.run_all(len(seen), python) if seen else None,
        smi=collect_smi(env) if run_smi else None,
    )


def _probe_all(frameworks: tuple[str, ...], python: str | None) -> dict[str, FrameworkInfo]:
    """Probe the frameworks in parallel child processes (each import takes seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(frameworks))) as pool:
        futures = {name: pool.submit(probe_framework, name, python) for name in frameworks}
        return {name: fut.result() for name, fut in futures.items()}


def _find_tool(name: str, env: dict | None = None) -> str | None:
    """``name`` on PATH, else the copy in the ROCm tree; None where neither has it."""
    import shutil

    env = os.environ if env is None else env
    found = shutil.which(name, path=env.get("PATH"))
    if found:
        return found
    for root in rocm_roots(env):
        bundled = root / "bin" / name
        if bundled.exists():
            return str(bundled)
    return None


def _find_rocminfo(env: dict | None = None) -> str:
    """``rocminfo`` on PATH, else the copy in the ROCm tree, else the bare name."""
    return _find_tool("rocminfo", env) or "rocminfo"


SMI_TIMEOUT_S = 20.0
SMI_COMMANDS = (
    ("amd-smi", (("static", "--partition"), ("list",))),
    (
        "rocm-smi",
        (("--showbus", "--showcomputepartition", "--showmemorypartition"), ("--showtopo",)),
    ),
)
"""The commands :func:`collect_smi` runs, tool by tool: ``amd-smi`` (ROCm 6.x and
later), else (not installed, or every command failed) ``rocm-smi`` (older installs)."""


def _smi_run(path: str, args: tuple[str, ...], timeout: float) -> tuple[str, str | None]:
    """One smi command: what it printed (may be empty) and, where it failed, one line."""
    cap = tools.capture(path, timeout, args)
    if cap.text is None:
        return "", cap.error
    if not cap.returncode:
        return cap.text, None
    last = [line for line in cap.text.splitlines() if line.strip()][-1:] or ["no output"]
    shown = " ".join((path, *args))
    return cap.text, f"{shown} {tools.exit_status(cap.returncode)}: {_short(last[0], 160)}"


def collect_smi(env: dict | None = None, timeout: float = SMI_TIMEOUT_S) -> dict | None:
    """Run :data:`SMI_COMMANDS` where the tool is on PATH or in the ROCm tree (each
    within ``timeout`` seconds) and keep their outputs one after another, each under
    a ``$ command`` line: ``{"source", "text", "error"}``, ``error`` one line naming
    the commands that failed or timed out (None when none did). None: neither tool
    is installed."""
    ran, texts, errors = [], [], []
    for name, commands in SMI_COMMANDS:
        path = _find_tool(name, env)
        if path is None:
            continue
        worked = False
        for args in commands:
            text, error = _smi_run(path, args, timeout)
            shown = " ".join((name, *args))
            ran.append(shown)
            if text.strip():
                texts.append(f"$ {shown}\n{text.rstrip()}\n")
            errors += [error.rstrip(".")] if error else []
            worked = worked or error is None
        if worked:
            break
    if not ran:
        return None
    return {
        "source": "; ".join(ran) + " (run by doctor)",
        "text": "\n".join(texts),
        "error": "; ".join(errors) or None,
    }


# A reader-facing view of the GPUs ------------------------------------------


def gpu_inventory(sysrep: SystemReport | None = None) -> list[dict]:
    """Every GPU this machine shows, one row per (source, device).

    Three independent views are listed side by side because each can fail on
    its own: the PCI bus (hardware present), ``rocminfo`` (ROCm's runtime sees
    it) and PyTorch (the framework can compute on it).
    """
    if sysrep is None:
        sysrep = collect(frameworks=("pytorch",), run_smi=False)
    rows = []
    for dev in sysrep.pci_gpus:
        rows.append(
            {
                "seen by": "PCI bus (sysfs)",
                "device": f"{dev['vendor']} device {dev['device_id']}",
                "detail": f"PCI {dev['address']}, class {dev['class']}",
            }
        )
    for agent in sysrep.rocminfo.gpus:
        cu = f", {agent.compute_units} CUs" if agent.compute_units else ""
        rows.append(
            {
                "seen by": "ROCm runtime (rocminfo)",
                "device": agent.marketing_name or agent.name,
                "detail": f"{agent.gfx or 'gfx unknown'}{cu}",
            }
        )
    torch_info = sysrep.frameworks.get("pytorch")
    if torch_info and torch_info.installed:
        for dev in torch_info.details.get("devices") or []:
            arch = dev.get("gfx") or ""
            rows.append(
                {
                    "seen by": "PyTorch",
                    "device": dev.get("name"),
                    "detail": ", ".join(x for x in (arch, f"{dev.get('memory_gib')} GiB") if x),
                }
            )
    return rows


def gpu_inventory_summary(sysrep: SystemReport, rows: list[dict]) -> str:
    """One plain paragraph about :func:`gpu_inventory`'s rows."""
    if rows:
        sources = sorted({r["seen by"] for r in rows})
        return f"{len(rows)} GPU sighting(s), from: {', '.join(sources)}."
    torch_info = sysrep.frameworks.get("pytorch")
    if torch_info and torch_info.installed:
        torch_says = "PyTorch sees no GPU"
    else:
        why = torch_info.error if torch_info else "not checked"
        torch_says = f"PyTorch could not be asked ({why})"
    return (
        "No GPU found on this machine. The PCI bus shows no display controller or "
        f"accelerator. ROCm: {sysrep.rocminfo.error or 'rocminfo lists no GPU agent.'} "
        f"{torch_says}. The examples in this build ran on the CPU."
    )
