"""What lies under the frameworks: ROCm's trees and version, the amdgpu kernel driver,
the GPUs on the PCI bus, and where ROCm's tools are.

Everything is read from files (``.info/version``, a Core SDK directory's
``core-N.N`` name, a pip-installed ``rocm`` distribution's metadata, sysfs)
and never raises: what cannot be read becomes a recorded ``error`` or
``note``. :func:`rocm_roots` is the order the ROCm trees are looked at in
(``$ROCM_PATH``, the Core SDK's ``/opt/rocm/core-N.N`` and ``/opt/rocm/core``,
the legacy ``/opt/rocm``); the inference chapter finds MIGraphX's libraries
by it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .tools import short

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
            info.error = f"{candidate} does not contain a version number: {short(text, 80)!r}"
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
        note=None if match else f"unreadable driver version {short(text, 60)!r}",
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


# Tools ---------------------------------------------------------------------


def find_tool(name: str, env: dict | None = None) -> str | None:
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
