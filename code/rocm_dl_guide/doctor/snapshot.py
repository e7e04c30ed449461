"""Doctor snapshots: everything ``doctor``'s checks read, in one JSON file.

``doctor --collect FILE`` writes one (:func:`write`); a reader attaches it to a
bug report, and ``doctor --snapshot FILE`` replays every check on it
(:func:`load`) with the same report as on the machine itself. A snapshot holds
the tools' outputs verbatim (rocminfo; amd-smi or rocm-smi where installed), the
frameworks' build facts, ROCm's location and version, the kernel driver, the PCI
display devices, and :mod:`~rocm_dl_guide.doctor.hostfacts` (device nodes, groups,
container hints, a few named environment variables), and the reader's own texts
given with ``--log`` and ``--smi`` (which replaces the smi output doctor would
collect); nothing else of the environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import asdict, fields
from pathlib import Path

from rocm_dl_guide import __version__
from rocm_dl_guide.core import files

from . import frameworks, hostfacts, installed, rocminfo, samples, system, tools

FORMAT = "rocm-dl-guide-doctor-snapshot"
FORMAT_VERSION = 4
"""Bumped when the schema changes; :func:`load` migrates older versions
(:data:`MIGRATIONS`) and refuses newer ones."""


def _v1_to_v2(data: dict) -> dict:
    """Version 2 has every section, ``null`` where a fact was not collected. Version 1
    snapshots written before the GPU workload check, ``--log``, the account's groups
    or WSL detection lack those keys, and their absence means just that: unknown."""
    data = {**data, "format_version": 2}
    data.setdefault("gpu_workload", None)
    data.setdefault("log", None)
    if isinstance(data.get("host"), dict):
        data["host"] = {"account_groups": None, "wsl": None, **data["host"]}
    return data


def _v2_to_v3(data: dict) -> dict:
    """Version 3 adds ``smi``, the ``amd-smi``/``rocm-smi`` text given with ``--smi``
    or run by doctor (then with an ``error`` line, or null); a version 2 snapshot had none."""
    data = {**data, "format_version": 3}
    data.setdefault("smi", None)
    return data


def _v3_to_v4(data: dict) -> dict:
    """Version 4 says "not collected" explicitly: ``host.devices`` and ``host.groups``
    may be null (unknown), unlike an empty list of devices (no ``/dev/kfd``). In older
    snapshots a missing field is unknown, and so is an empty ``groups`` list: a
    process always has its primary group, so none listed means they were not read."""
    data = {**data, "format_version": 4}
    if isinstance(data.get("host"), dict):
        host = {"devices": None, "groups": None, **data["host"]}
        if host["groups"] == []:
            host["groups"] = None
        data["host"] = host
    return data


SECTIONS = (
    "rocm",
    "kernel_driver",
    "rocminfo",
    "pci_gpus",
    "frameworks",
    "gpu_workload",
    "log",
    "smi",
)
"""The sections every snapshot of the current version has (``host`` may be null)."""
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}
"""Format version -> the function that rewrites a snapshot of that version as the
next one; :func:`migrate` chains them up to :data:`FORMAT_VERSION`."""


class SnapshotError(ValueError):
    """A file that is not a readable snapshot of this format; the message says why."""


def to_dict(sysrep: system.SystemReport) -> dict:
    """The snapshot of already-collected facts."""
    cap = sysrep.rocminfo_capture or tools.Capture("rocminfo", error=sysrep.rocminfo.error)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "collected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "guide_version": __version__,
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        "rocm": asdict(sysrep.rocm),
        "kernel_driver": asdict(sysrep.kernel_driver),
        "rocminfo": {"source": sysrep.rocminfo_source, **asdict(cap)},
        "pci_gpus": sysrep.pci_gpus,
        "frameworks": {name: asdict(info) for name, info in sysrep.frameworks.items()},
        "host": sysrep.host.to_dict() if sysrep.host else None,
        "gpu_workload": sysrep.gpu_workload,
        "log": sysrep.log,
        "smi": sysrep.smi,
    }


def write(path: str | os.PathLike, sysrep: system.SystemReport | None = None) -> Path:
    """Collect this machine's facts (unless given) and write them to ``path``
    atomically; returns the path."""
    sysrep = sysrep or system.collect()
    path = Path(path)
    with files.atomic_write(path, "w") as fh:
        json.dump(to_dict(sysrep), fh, indent=1, sort_keys=False)
        fh.write("\n")
    return path


def _read_json(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SnapshotError(f"{path}: is a directory, not a snapshot file") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not raw.strip():
        raise SnapshotError(f"{path}: the file is empty")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SnapshotError(f"{path}: not a text file (a doctor snapshot is JSON)") from None
    except json.JSONDecodeError as exc:
        body = raw.strip()
        cut = body[:1] in (b"{", b"[") and body[-1:] not in (b"}", b"]")
        what = "ends early (truncated?)" if cut else "is not valid JSON"
        raise SnapshotError(
            f"{path}: {what}: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(data, dict):
        raise SnapshotError(f"{path}: not a doctor snapshot (the JSON is not an object)")
    return data


def migrate(data: dict, path: Path | str = "snapshot") -> dict:
    """``data`` in the current format: a snapshot of an older version goes through
    :data:`MIGRATIONS` one version at a time (the input is not modified); a newer
    version, or one no migration starts from, is a :class:`SnapshotError`."""
    if data.get("format") != FORMAT:
        raise SnapshotError(
            f'{path}: not a doctor snapshot (no "format": "{FORMAT}"); write one with '
            "python -m rocm_dl_guide doctor --collect FILE"
        )
    version = data.get("format_version")
    while isinstance(version, int) and version in MIGRATIONS and version < FORMAT_VERSION:
        data = MIGRATIONS[version](data)
        version = data["format_version"]
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        hint = "upgrade rocm_dl_guide to read it" if newer else "collect it again with this version"
        raise SnapshotError(
            f"{path}: snapshot format version {version!r}; this rocm_dl_guide reads versions "
            f"{min(MIGRATIONS, default=FORMAT_VERSION)} to {FORMAT_VERSION} ({hint})"
        )
    return data


def _build(cls, data, where: str):
    """``cls(**data)`` with the known fields; a SnapshotError naming ``where`` otherwise."""
    if not isinstance(data, dict):
        raise SnapshotError(f"{where}: expected an object")
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise SnapshotError(f"{where}: {exc}") from None


def _section(data: dict, key: str, path: Path):
    if key not in data:
        raise SnapshotError(f"{path}: not a complete snapshot (no {key!r} section)")
    return data[key]


def from_dict(data: dict, path: Path | str = "snapshot") -> system.SystemReport:
    """The :class:`~rocm_dl_guide.doctor.system.SystemReport` a snapshot describes."""
    path = Path(path)
    data = migrate(data, path)
    for key in SECTIONS:
        _section(data, key, path)
    ri = _section(data, "rocminfo", path)
    cap = _build(tools.Capture, ri, f"{path}: rocminfo")
    if cap.text is not None and not isinstance(cap.text, str):
        raise SnapshotError(f"{path}: rocminfo.text: expected a string")
    probed = _section(data, "frameworks", path)
    if not isinstance(probed, dict):
        raise SnapshotError(f"{path}: frameworks: expected an object")
    pci = _section(data, "pci_gpus", path)
    if not isinstance(pci, list) or not all(isinstance(g, dict) for g in pci):
        raise SnapshotError(f"{path}: pci_gpus: expected a list of objects")
    work = data["gpu_workload"]  # null: no kernel was run
    if work is not None and not (isinstance(work, list) and all(isinstance(r, dict) for r in work)):
        raise SnapshotError(f"{path}: gpu_workload: expected a list of objects")
    log = data["log"]  # null: no log was given
    if log is not None and not (isinstance(log, dict) and isinstance(log.get("text"), str)):
        raise SnapshotError(f"{path}: log: expected an object with a text")
    smi = data["smi"]  # null: no smi output was given or collected
    if smi is not None and not (isinstance(smi, dict) and isinstance(smi.get("text"), str)):
        raise SnapshotError(f"{path}: smi: expected an object with a text")
    if smi is not None and not isinstance(smi.get("error"), (str, type(None))):
        raise SnapshotError(f"{path}: smi.error: expected a string or null")
    host = data.get("host")
    try:
        host_facts = hostfacts.from_dict(host) if host is not None else None
    except (ValueError, TypeError) as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    return system.SystemReport(
        rocm=_build(installed.RocmInfo, _section(data, "rocm", path), f"{path}: rocm"),
        kernel_driver=_build(
            installed.KernelDriverInfo,
            _section(data, "kernel_driver", path),
            f"{path}: kernel_driver",
        ),
        rocminfo_source=f"{ri.get('source') or 'rocminfo'} (from snapshot {path.name})",
        rocminfo=rocminfo.report_from(cap),
        pci_gpus=pci,
        frameworks={
            name: _build(frameworks.FrameworkInfo, info, f"{path}: frameworks.{name}")
            for name, info in probed.items()
        },
        host=host_facts,
        rocminfo_capture=cap,
        gpu_workload=work,
        log=log,
        smi=smi,
    )


def load(path: str | os.PathLike) -> system.SystemReport:
    """Read a snapshot file; raises :class:`SnapshotError` with one clear sentence
    for a missing, empty, non-JSON, truncated, foreign or wrong-version file."""
    path = Path(path)
    return from_dict(_read_json(path), path)


# --------------------------------------------------------------------------- example snapshots

WHEEL_TARGETS = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100")
"""The GPU targets of PyTorch's ROCm 6.2 wheels as their users listed them
(pytorch/pytorch#132570): the build the example snapshots describe."""


def rocm_pytorch(
    gpus: int = 1,
    arch: tuple[str, ...] = WHEEL_TARGETS,
    version: str = "2.5.1+rocm6.2",
    devices: list[tuple[str, float]] | None = None,
    hip: str = "6.2.41133-dd7f95766",
) -> dict:
    """The framework facts of a ROCm build of PyTorch (by default 2.5.1 for ROCm
    6.2) seeing ``gpus`` GPUs, or the ``devices`` given as (name, GiB)."""
    seen = devices if devices is not None else [("AMD Radeon", 16.0)] * gpus
    listed = [{"name": name, "gfx": None, "memory_gib": gib} for name, gib in seen]
    details = {"hip": hip, "cuda": None, "arch_list": list(arch)}
    details.update(gpu_available=bool(listed), devices=listed)
    return {"name": "pytorch", "installed": True, "version": version, "details": details}


def cuda_pytorch() -> dict:
    """The framework facts of PyTorch 2.5.1 from PyPI (a CUDA 12.4 build)."""
    details = {"hip": None, "cuda": "12.4", "arch_list": ["sm_50", "sm_90"], "gpu_available": False}
    return {"name": "pytorch", "installed": True, "version": "2.5.1+cu124", "details": details}


def _node(path: str, accessible: bool, exists: bool = True) -> dict:
    if not exists:
        return {"path": path, "exists": False}
    return {"path": path, "exists": True, "char_device": True, "mode": "0660"} | {
        "owner": "root",
        "group": "render",
        "accessible": accessible,
    }


def compose(
    sample: str | None = "radeon",
    torch: dict | None = None,
    rocm: str = "6.2.2",
    pci: list | None = None,
    env: dict | None = None,
    kfd: bool = True,
    renders: int = 1,
    accessible: bool = True,
    groups: tuple[str, ...] | None = ("render", "video"),
    account_groups: tuple[str, ...] | None = None,
    wsl: dict | None = None,
    container: str | None = None,
    numa: str = "0",
    nofile: tuple[int, int] = (1048576, 1048576),
    pip: dict | None = None,
    workload: list[dict] | None = None,
) -> dict:
    """A snapshot of a machine described by its parts: the real ``rocminfo`` output
    ``sample`` (:func:`samples.load_sample`), the PyTorch facts (default
    :func:`rocm_pytorch`), ROCm's version and the host facts. For tests and for
    showing findings on machines the build does not have; labelled by
    ``rocminfo.source``."""
    text = samples.load_sample(sample) if sample else None
    devices = [_node("/dev/kfd", accessible, kfd)]
    devices += [_node(f"/dev/dri/renderD{128 + i}", accessible) for i in range(renders)]
    host = hostfacts.HostFacts(
        env=dict(env or {}),
        uid=1000,
        groups=None if groups is None else list(groups),
        account_groups=None if account_groups is None else list(account_groups),
        wsl=None if wsl is None else hostfacts.WslFacts(**wsl),
        container=container,
        container_hints=["/.dockerenv"] if container == "docker" else [],
        numa_balancing=numa,
        numa_nodes=2,
        nofile=list(nofile),
        pip_rocm=dict(pip or {}),
    ).to_dict()
    host["devices"] = devices
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "rocm": {"path": "/opt/rocm", "version": rocm, "layout": "/opt/rocm"},
        "kernel_driver": {"loaded": True, "note": "in-kernel amdgpu driver (no version reported)"},
        "rocminfo": {
            "source": f"rocminfo sample '{sample}'" if sample else "rocminfo",
            "executable": "rocminfo",
            "text": text,
            "returncode": 0 if text else None,
            "error": None if text else "rocminfo is not installed (not found on PATH).",
        },
        "pci_gpus": list(pci or []),
        "frameworks": {"pytorch": torch if torch is not None else rocm_pytorch()},
        "host": host,
        "gpu_workload": workload,
        "log": None,
        "smi": None,
    }


HIP_INVALID_DEVICE_FUNCTION = "\n".join(
    (
        "Traceback (most recent call last):",
        '  File "<string>", line 21, in <module>',
        "RuntimeError: HIP error: invalid device function",
        "HIP kernel errors might be asynchronously reported at some other API call, "
        "so the stacktrace below might be incorrect.",
        "For debugging consider passing AMD_SERIALIZE_KERNEL=3",
        "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
    )
)
"""What PyTorch's ROCm build prints when a GPU's first kernel has no code
object for its target (the message of pytorch/pytorch#132570 and of the
reports :data:`~rocm_dl_guide.doctor.rules.SOURCES` cites)."""


def workload_result(
    index: int = 0, name: str = "AMD Radeon", failure: str | None = None, stderr: str = ""
) -> dict:
    """One GPU's :func:`~rocm_dl_guide.doctor.workload.run_one` result, for
    composed snapshots: passed, or failed with ``failure``."""
    errors = {} if failure else {"elementwise": 0.0, "matmul": 1e-7, "conv2d": 1e-7}
    return {
        "index": index,
        "name": name,
        "ok": failure is None,
        "errors": errors,
        "failure": failure,
        "stderr": stderr,
    }


def _failed_first_kernel() -> list[dict]:
    return [
        workload_result(
            name="AMD Radeon RX 6600 XT",
            failure="HIP error: invalid device function (RuntimeError)",
            stderr=HIP_INVALID_DEVICE_FUNCTION,
        )
    ]


EXAMPLES = {
    "apu-igpu": (
        "Ryzen 7 7800X3D + Radeon RX 7900 GRE: ROCm lists the CPU's integrated GPU too",
        {"sample": "apu-igpu", "torch": rocm_pytorch(gpus=2)},
    ),
    "rx6600xt": (
        "Radeon RX 6600 XT (gfx1032) with PyTorch's ROCm 6.2 wheel",
        {"sample": "rx6600xt", "torch": rocm_pytorch(gpus=0)},
    ),
    "first-kernel": (
        "Radeon RX 6600 XT (gfx1032): PyTorch sees the GPU, its first kernel fails",
        {
            "sample": "rx6600xt",
            "torch": rocm_pytorch(gpus=1),
            "workload": _failed_first_kernel(),
        },
    ),
    "cuda-wheel": (
        "Radeon RX 7900 XTX, PyTorch from a plain pip install torch, user not in the render group",
        {
            "sample": "radeon",
            "torch": cuda_pytorch(),
            "accessible": False,
            "groups": ("users", "video"),
        },
    ),
}
"""Example snapshots: (what the machine is, :func:`compose` arguments). The
rocminfo outputs are real (see the samples' README); the rest is the situation
readers report with them."""


def example(name: str) -> dict:
    """The example snapshot ``name`` (one of :data:`EXAMPLES`)."""
    if name not in EXAMPLES:
        raise ValueError(f"unknown example {name!r}: choose one of {', '.join(EXAMPLES)}")
    return compose(**EXAMPLES[name][1])


INSTINCT_GPUS = (
    ("AMD Instinct MI210", 64.0),
    ("AMD Instinct MI50/MI60", 32.0),
    ("AMD Instinct MI100", 32.0),
    ("AMD Instinct MI210", 64.0),
    ("AMD Instinct MI210", 64.0),
)
"""The GPUs of the ``mi-instinct`` rocminfo sample, in its order, with their memory."""


def instinct_node() -> dict:
    """A self-consistent GPU node: the saved ``mi-instinct`` rocminfo output (three
    MI210, an MI100 and an MI50), ROCm 6.2.4, a PyTorch 2.3 built for it (a version
    AMD's matrix lists for 6.2.4) seeing the five GPUs, a render node per GPU open
    to the user, and the first kernel passing on each GPU. Every fact in it
    describes that one machine."""
    gpus = list(INSTINCT_GPUS)
    return compose(
        sample="mi-instinct",
        torch=rocm_pytorch(version="2.3.0+rocm6.2.4", devices=gpus, hip="6.2.41134"),
        rocm="6.2.4",
        renders=len(gpus),
        workload=[workload_result(i, name) for i, (name, _) in enumerate(gpus)],
    )
