"""The host facts behind the setup failures readers report most: device nodes and
who may open them, the user's groups, containers, GPU-selection variables,
NUMA balancing, the open-file limit, and pip-installed ROCm packages.

Everything is read from files and the process itself (no GPU tool), never
raises, and keeps nothing private beyond what a check needs: only the
environment variables in :data:`ENV_VARS`, group names but no user name, no
home paths. :func:`collect` reads this machine; :func:`from_dict` rebuilds the
facts from a doctor snapshot.
"""

from __future__ import annotations

import glob
import os
import re
import stat
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

ENV_VARS = (
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "ROCM_PATH",
    "PYTORCH_ROCM_ARCH",
    "HSA_ENABLE_DXG_DETECTION",
)
"""The only environment variables a snapshot records: the ones the checks read."""

# cgroup path fragments of the usual container runtimes, in the order tried.
_CGROUP_HINTS = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("libpod", "podman"),
    ("containerd", "containerd"),
    ("lxc", "lxc"),
)


@dataclass
class DeviceNode:
    """One device file ROCm opens (``/dev/kfd``, ``/dev/dri/renderD*``)."""

    path: str
    exists: bool | None
    """Whether it exists; None: unknown (it could not be looked at, or was not collected)."""
    char_device: bool = False
    mode: str | None = None
    """Permission bits in octal, e.g. ``0660``."""
    owner: str | None = None
    group: str | None = None
    accessible: bool | None = None
    """Whether this process may open it for reading and writing (None: unknown)."""

    def describe(self) -> str:
        """``(root:render, mode 0660)``: what is known of its owner and mode, the
        unknown parts said so (never ``None:None``)."""
        if self.owner is None and self.group is None and self.mode is None:
            return "(owner and mode not collected)"
        owner = f"{self.owner or 'owner unknown'}:{self.group or 'group unknown'}"
        return f"({owner}, mode {self.mode or 'unknown'})"


@dataclass
class WslFacts:
    """What says this Linux is WSL 2, and whether ROCm's WSL path is in place."""

    kernel_release: str | None = None
    """``/proc/sys/kernel/osrelease`` (``...-microsoft-standard-WSL2`` under WSL 2)."""
    dxg: bool | None = None
    """Whether ``/dev/dxg``, the GPU paravirtualization device, exists."""
    librocdxg: str | None = None
    """Where ``librocdxg.so`` is installed (None: not found)."""
    dxcore: bool | None = None
    """Whether WSL's ``/usr/lib/wsl/lib/libdxcore.so`` exists."""

    @property
    def is_wsl(self) -> bool:
        release = (self.kernel_release or "").lower()
        return "microsoft" in release or bool(self.dxg)


def wsl_facts(
    root: str | os.PathLike = "/", rocm_root: str | os.PathLike | None = None
) -> WslFacts:
    """WSL's facts on this machine (``root`` moves ``/dev``, ``/proc``, ``/usr`` and ``/opt``)."""
    base = Path(root)
    try:
        release = (base / "proc/sys/kernel/osrelease").read_text().strip() or None
    except OSError:
        release = None
    rocm = Path(rocm_root) if rocm_root else base / "opt/rocm"
    candidates = [
        *glob.glob(str(rocm / "lib/librocdxg.so*")),
        *glob.glob(str(base / "usr/lib/librocdxg.so*")),
    ]
    return WslFacts(
        kernel_release=release,
        dxg=(base / "dev/dxg").exists(),
        librocdxg=sorted(candidates)[0] if candidates else None,
        dxcore=(base / "usr/lib/wsl/lib/libdxcore.so").exists(),
    )


@dataclass
class HostFacts:
    env: dict[str, str] = field(default_factory=dict)
    devices: list[DeviceNode] | None = field(default_factory=list)
    """``/dev/kfd`` first, then every ``/dev/dri/renderD*``; None: not collected
    (unknown, as against a list without ``/dev/kfd``: there is none)."""
    uid: int | None = None
    groups: list[str] | None = field(default_factory=list)
    """The names of this process's groups (primary and supplementary); None: not
    collected (unknown, never "in no group")."""
    account_groups: list[str] | None = None
    """The groups the account is in now (``/etc/passwd`` and ``/etc/group``): a group
    added after this session began is here but not in :attr:`groups`. None: unknown."""
    container: str | None = None
    """``docker``, ``podman``, ``kubernetes``, ``containerd``, ``lxc``, or None."""
    container_hints: list[str] = field(default_factory=list)
    """What the guess rests on (``/.dockerenv``, a cgroup line ...)."""
    numa_balancing: str | None = None
    """``/proc/sys/kernel/numa_balancing`` as written (``0``, ``1`` ...), None if absent."""
    numa_nodes: int | None = None
    nofile: list[int] | None = None
    """The open-file limit ``[soft, hard]`` (``-1``: unlimited)."""
    pip_rocm: dict[str, str] = field(default_factory=dict)
    """ROCm runtime distributions installed with pip in this Python, name to version."""
    wsl: WslFacts | None = None
    """WSL 2's facts (None: not collected, as in older snapshots)."""

    @property
    def kfd(self) -> DeviceNode | None:
        """``/dev/kfd``'s facts; None where the device nodes were not collected
        (:attr:`devices` is None) or the list has no entry for it."""
        return next((d for d in self.devices or () if d.path.endswith("/kfd")), None)

    @property
    def render_nodes(self) -> list[DeviceNode]:
        return [d for d in self.devices or () if "/renderD" in d.path]

    def to_dict(self) -> dict:
        return asdict(self)


def _names() -> tuple:
    try:
        import grp
        import pwd
    except ImportError:  # pragma: no cover - not POSIX
        return None, None
    return grp, pwd


def _group_name(gid: int) -> str:
    grp, _ = _names()
    try:
        return grp.getgrgid(gid).gr_name if grp else str(gid)
    except KeyError:
        return str(gid)


def _owner_name(uid: int) -> str:
    _, pwd = _names()
    try:
        return pwd.getpwuid(uid).pw_name if pwd else str(uid)
    except KeyError:
        return str(uid)


def device_node(path: str | os.PathLike) -> DeviceNode:
    """Who owns ``path``, its mode, and whether this process can open it read-write."""
    p = Path(path)
    try:
        st = p.stat()
    except (FileNotFoundError, NotADirectoryError):
        return DeviceNode(path=str(p), exists=False)
    except OSError:  # it may exist: this process could not look (EACCES, EIO ...)
        return DeviceNode(path=str(p), exists=None)
    return DeviceNode(
        path=str(p),
        exists=True,
        char_device=stat.S_ISCHR(st.st_mode),
        mode=f"{stat.S_IMODE(st.st_mode):04o}",
        owner=_owner_name(st.st_uid),
        group=_group_name(st.st_gid),
        accessible=os.access(p, os.R_OK | os.W_OK),
    )


def _render_nodes(dev_root: Path) -> list[Path]:
    try:
        return sorted((dev_root / "dri").glob("renderD*"))
    except OSError:
        return []


def _container(root: Path, proc_root: Path) -> tuple[str | None, list[str]]:
    hints = [f"/{name}" for name in (".dockerenv", "run/.containerenv") if (root / name).exists()]
    kind = None
    if "/.dockerenv" in hints:
        kind = "docker"
    elif "/run/.containerenv" in hints:
        kind = "podman"
    try:
        cgroup = (proc_root / "1" / "cgroup").read_text(errors="replace")
    except OSError:
        cgroup = ""
    for fragment, name in _CGROUP_HINTS:
        line = next((ln for ln in cgroup.splitlines() if fragment in ln), None)
        if line:
            hints.append(f"/proc/1/cgroup: {line.strip()[:120]}")
            kind = kind or name
            break
    return kind, hints


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _numa_nodes(sys_root: Path) -> int | None:
    try:
        nodes = [
            p for p in (sys_root / "devices/system/node").glob("node*") if p.name[4:].isdigit()
        ]
    except OSError:
        return None
    return len(nodes) or None


def _nofile() -> list[int] | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    return [-1 if soft == inf else int(soft), -1 if hard == inf else int(hard)]


_ROCM_DIST = re.compile(r"^(rocm|rocm[-_]sdk[-_].+|hip[-_]python)$", re.I)


def pip_rocm_packages(site_dirs: list | None = None) -> dict[str, str]:
    """``rocm``, ``rocm-sdk-*`` and similar distributions installed with pip."""
    import sys

    found: dict[str, str] = {}
    for entry in sys.path if site_dirs is None else site_dirs:
        try:
            metas = sorted(Path(entry).glob("*.dist-info/METADATA"))
        except (OSError, TypeError):
            continue
        for meta in metas:
            try:
                head = meta.read_text(errors="replace")[:2000]
            except OSError:
                continue
            name = re.search(r"^Name:\s*(\S+)", head, re.M)
            version = re.search(r"^Version:\s*(\S+)", head, re.M)
            if name and version and _ROCM_DIST.match(name.group(1)):
                found.setdefault(name.group(1).lower(), version.group(1))
    return found


def account_groups(uid: int | None) -> list[str] | None:
    """The groups ``/etc/passwd`` and ``/etc/group`` give the account ``uid`` now
    (None where the account is not listed there, as in many containers)."""
    grp, pwd = _names()
    if grp is None or uid is None:
        return None
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return None
    names = {_group_name(entry.pw_gid)}
    names |= {g.gr_name for g in grp.getgrall() if entry.pw_name in g.gr_mem}
    return sorted(names)


def _groups() -> tuple[int | None, list[str] | None]:
    if not hasattr(os, "getgroups"):  # pragma: no cover - not POSIX
        return None, None
    gids = [os.getgid(), *os.getgroups()]
    return os.getuid(), sorted({_group_name(g) for g in gids})


def collect(
    root: str | os.PathLike = "/",
    env: dict | None = None,
    site_dirs: list | None = None,
) -> HostFacts:
    """This machine's facts (``root`` moves ``/dev``, ``/proc`` and ``/sys`` for tests)."""
    base = Path(root)
    dev, proc, sys_root = base / "dev", base / "proc", base / "sys"
    env = os.environ if env is None else env
    kind, hints = _container(base, proc)
    uid, groups = _groups()
    return HostFacts(
        env={k: env[k] for k in ENV_VARS if k in env},
        devices=[device_node(dev / "kfd"), *map(device_node, _render_nodes(dev))],
        uid=uid,
        groups=groups,
        account_groups=account_groups(uid),
        container=kind,
        container_hints=hints,
        numa_balancing=_read(proc / "sys/kernel/numa_balancing"),
        numa_nodes=_numa_nodes(sys_root),
        nofile=_nofile(),
        pip_rocm=pip_rocm_packages(site_dirs),
        wsl=wsl_facts(base),
    )


def from_dict(data: dict) -> HostFacts:
    """Rebuild :class:`HostFacts` from :meth:`HostFacts.to_dict`; raises ``ValueError``
    naming the first field of the wrong type."""
    if not isinstance(data, dict):
        raise ValueError("host: expected an object")
    known = {f.name for f in fields(HostFacts)}
    values = {k: v for k, v in data.items() if k in known}
    expect = {"env": dict, "container_hints": list, "pip_rocm": dict}
    for key, kind in expect.items():
        if key in values and not isinstance(values[key], kind):
            raise ValueError(f"host.{key}: expected {kind.__name__}")
    # Absent or null: not collected (unknown), never "no device" or "in no group".
    for key in ("devices", "groups", "account_groups"):
        values[key] = values.get(key)
        if values[key] is not None and not isinstance(values[key], list):
            raise ValueError(f"host.{key}: expected list or null (unknown)")
    if values["devices"] is not None:
        values["devices"] = [_node_from(i, node) for i, node in enumerate(values["devices"])]
    return HostFacts(**values | {"wsl": _wsl_from(values.get("wsl"))})


def _node_from(i: int, node) -> DeviceNode:
    if not isinstance(node, dict) or not isinstance(node.get("path"), str):
        raise ValueError(f"host.devices[{i}]: expected an object with a path")
    names = {f.name for f in fields(DeviceNode)}
    return DeviceNode(**{"exists": None} | {k: v for k, v in node.items() if k in names})


def _wsl_from(wsl) -> WslFacts | None:
    if wsl is None:
        return None
    if not isinstance(wsl, dict):
        raise ValueError("host.wsl: expected an object or null (unknown)")
    names = {f.name for f in fields(WslFacts)}
    return WslFacts(**{k: v for k, v in wsl.items() if k in names})
