"""The rules behind ``doctor``'s checks of what actually breaks ROCm setups.

Each rule reads a :class:`~rocm_dl_guide.doctor.system.SystemReport` (collected here or
replayed from a snapshot) and returns :class:`Check` objects: a stable ``id``,
a status, one plain-language sentence, the fix, and the sources the rule
rests on (:data:`SOURCES`). The rules are the failures readers report on
ROCm's and PyTorch's issue trackers: a GPU target the PyTorch build lacks,
``HSA_OVERRIDE_GFX_VERSION``, an integrated GPU enumerated first, device
permissions and containers, the wrong PyTorch build, host settings for
multi-GPU training, and PyTorch seeing no GPU although ROCm does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from . import compat_data, workload

if TYPE_CHECKING:  # pragma: no cover
    from .rocminfo import Agent
    from .system import SystemReport

# Check statuses, from best to worst.
OK, INFO, UNKNOWN, WARN, FAIL = "ok", "info", "unknown", "warn", "fail"


def slug(name: str) -> str:
    """``Kernel driver`` -> ``kernel-driver``: the default check id."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class Check:
    name: str
    status: str
    message: str
    sources: tuple[str, ...] = ()
    id: str = ""
    """Stable identifier for scripts (``arch-mismatch``, ``device-access`` ...)."""
    fix: str = ""
    """What to do about it, when there is something to do."""

    def __post_init__(self) -> None:
        self.id = self.id or slug(self.name)


RULES_FILE = "data/doctor-rules.json"
"""The facts the rules rest on, as data, each with its sources (package data)."""


def _rules() -> dict:
    text = resources.files("rocm_dl_guide").joinpath(RULES_FILE).read_text(encoding="utf-8")
    return json.loads(text)


_RULES = _rules()

SOURCES: dict[str, str] = _RULES["sources"]
"""Every source a check cites, by key (an issue, a release note, a documentation page)."""

OVERRIDE_FAMILIES: dict[str, tuple[str, ...]] = {
    value: tuple(targets) for value, targets in _RULES["override_families"].items()
}
"""Consumer GPUs whose family has a supported sibling target with the same
instruction set: the documented (unofficial) ``HSA_OVERRIDE_GFX_VERSION`` values."""

NO_OVERRIDE: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    gfx: (e["known"], e["index"], tuple(e["sources"])) for gfx, e in _RULES["no_override"].items()
}
"""Targets for which the sources say no ``HSA_OVERRIDE_GFX_VERSION`` works (the fix
is a PyTorch build that has the target): gfx -> (what is known, TheRock's nightly
index for it, source keys)."""

IGPU_TARGETS = frozenset(_RULES["igpu_targets"])
"""Integrated GPUs of AMD APUs (besides what the compatibility data lists)."""

ERROR_MESSAGES: dict[str, tuple[str, ...]] = {
    message: tuple(ids) for message, ids in _RULES["error_messages"].items()
}
"""What readers see, and the checks that explain it (the troubleshooting page's table)."""


def cite(*keys: str) -> tuple[str, ...]:
    return tuple(SOURCES[k] for k in keys)


def native_build_fix(gfx: str) -> str:
    """The fix for a GPU that no override helps: a PyTorch build that has its target."""
    index = NO_OVERRIDE.get(gfx, ("", None, ()))[1]
    where = f" (pip install --pre torch --index-url {index})" if index else ""
    return (
        f"install a PyTorch build that has {gfx}: AMD's TheRock nightly wheels{where} or a "
        f"ROCm 7.x+ wheel whose torch.cuda.get_arch_list() lists {gfx}; "
        f"HSA_OVERRIDE_GFX_VERSION does not work for {gfx}"
    )


# --------------------------------------------------------------------------- helpers


def override_target(value: str | None) -> str | None:
    """``10.3.0`` -> ``gfx1030``, ``9.4.2`` -> ``gfx942``, ``9.0.10`` -> ``gfx90a``;
    None when ``value`` is not ``MAJOR.MINOR.STEPPING``."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value or "")
    if not m:
        return None
    major, minor, step = (int(x) for x in m.groups())
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def _torch(sysrep: SystemReport):
    info = sysrep.frameworks.get("pytorch")
    return info if info and info.installed else None


def arch_list(sysrep: SystemReport) -> list[str]:
    """The gfx targets the installed PyTorch carries kernels for
    (``gfx90a:xnack-`` -> ``gfx90a``)."""
    info = _torch(sysrep)
    raw = (info.details.get("arch_list") or []) if info else []
    return sorted({str(a).split(":")[0] for a in raw if str(a).startswith("gfx")})


def host_env(sysrep: SystemReport) -> dict[str, str]:
    return dict(sysrep.host.env) if sysrep.host else {}


def _amd_gpu_evidence(sysrep: SystemReport) -> str | None:
    """Why we believe an AMD GPU is here (rocminfo, the PCI bus, /dev/kfd), or None."""
    if sysrep.rocminfo.gpus:
        return f"rocminfo lists {len(sysrep.rocminfo.gpus)} GPU(s)"
    amd = [g for g in sysrep.pci_gpus if g.get("vendor") == "AMD"]
    if amd:
        return f"the PCI bus shows an AMD display device ({amd[0]['device_id']})"
    kfd = sysrep.host.kfd if sysrep.host else None
    if kfd is not None and kfd.exists:
        return "/dev/kfd exists"
    return None


def is_integrated(agent: Agent) -> bool:
    """An APU's integrated GPU: rocminfo says ``Memory Properties: APU``, or its
    target is an APU target (the compatibility data's or :data:`IGPU_TARGETS`)."""
    if "APU" in (agent.extra.get("Memory Properties") or "").upper():
        return True
    apu_targets = {a["gfx"] for a in compat_data.apus()} | IGPU_TARGETS
    return (agent.gfx or "") in apu_targets


def _indices(value: str) -> list[int] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def visible_gpus(sysrep: SystemReport) -> list[tuple[int, Agent]]:
    """(HIP device number, agent) for the rocminfo GPUs a HIP program would see.

    rocminfo already obeys ``ROCR_VISIBLE_DEVICES``; ``HIP_VISIBLE_DEVICES`` (or
    ``CUDA_VISIBLE_DEVICES``) then selects by index among what is left.
    """
    gpus = list(sysrep.rocminfo.gpus)
    env = host_env(sysrep)
    chosen = env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES"))
    if chosen is None:
        return list(enumerate(gpus))
    idx = _indices(chosen)
    if idx is None:
        return []
    picked = [gpus[i] for i in idx if 0 <= i < len(gpus)]
    return list(enumerate(picked))


def _label(n: int, agent: Agent) -> str:
    return f"GPU {n} ({agent.marketing_name or agent.name}, {agent.gfx or 'gfx unknown'})"


# --------------------------------------------------------------------------- 1 + 2: targets


def _sibling_override(gfx: str, built: list[str]) -> str | None:
    """The documented override value that maps ``gfx`` onto a target in ``built``
    (never for a target of :data:`NO_OVERRIDE`)."""
    if gfx in NO_OVERRIDE:
        return None
    for value, family in OVERRIDE_FAMILIES.items():
        if gfx in family and override_target(value) in built:
            return value
    return None


def gpus_seen(sysrep: SystemReport) -> list[tuple[int, Agent]]:
    """:func:`visible_gpus`; when rocminfo lists no GPU, the GPUs PyTorch sees, with the
    target its ``gcnArchName`` gave (a snapshot without rocminfo)."""
    if sysrep.rocminfo.gpus:
        return visible_gpus(sysrep)
    from .rocminfo import Agent

    info = _torch(sysrep)
    devices = (info.details.get("devices") or []) if info else []
    return [
        (i, Agent(i, d["gfx"], d.get("name") or "", "AMD", "GPU", None, d["gfx"], None))
        for i, d in enumerate(devices)
        if isinstance(d, dict) and d.get("gfx")
    ]


def known_targets(sysrep: SystemReport) -> tuple[list[str], str, tuple[str, ...]]:
    """(targets, where they come from, sources): the PyTorch build's arch list; without
    one (no ROCm PyTorch, e.g. TensorFlow only), the targets the compatibility data lists
    for the installed ROCm release."""
    built = arch_list(sysrep)
    if built:
        return built, "this PyTorch build", cite("get-arch-list")
    version = sysrep.rocm.version if sysrep.rocm else None
    res = compat_data.resolve(version, "gfx") if version else None
    if not res or res.unknown or not res.rel.get("gfx"):
        return [], "", ()
    urls = tuple(compat_data.sources().get(k, {}).get("url", k) for k in res.sources)
    basis = f"ROCm {version}'s supported targets (no PyTorch arch list)"
    return sorted(res.rel["gfx"]), basis, urls


def _hip_index(sysrep: SystemReport, n: int, agent: Agent) -> int:
    """The number to give HIP_VISIBLE_DEVICES for ``agent`` (its place among rocminfo's
    GPUs; ``n`` when rocminfo does not list it)."""
    for i, a in enumerate(sysrep.rocminfo.gpus):
        if a is agent:
            return i
    return n


def override_plan(sysrep: SystemReport, gfx: str, built: list[str]):
    """For a GPU of target ``gfx`` that ``built`` lacks: (value, the visible GPUs it
    suits, the visible GPUs it would also run as another chip), or None."""
    value = _sibling_override(gfx, built)
    if not value:
        return None
    family = set(OVERRIDE_FAMILIES[value]) | {override_target(value)}
    gpus = gpus_seen(sysrep)
    suits = [(n, a) for n, a in gpus if a.gfx in family]
    others = [(n, a) for n, a in gpus if a.gfx not in family]
    return value, suits, others


def _override_fix(sysrep: SystemReport, plan) -> str:
    """How to use the override of ``plan`` (see :func:`override_plan`), naming the GPUs."""
    value, suits, others = plan
    target = override_target(value)
    if not others:
        return (
            f"export HSA_OVERRIDE_GFX_VERSION={value} before starting Python: it runs "
            f"{', '.join(_label(n, a) for n, a in suits)} as {target} (unsupported by AMD)"
        )
    keep = ",".join(str(_hip_index(sysrep, n, a)) for n, a in suits)
    rest = ",".join(str(_hip_index(sysrep, n, a)) for n, a in others)
    return (
        f"HSA_OVERRIDE_GFX_VERSION applies to every GPU the process sees, so to use "
        f"{', '.join(_label(n, a) for n, a in suits)} with it hide the others: export "
        f"HIP_VISIBLE_DEVICES={keep} HSA_OVERRIDE_GFX_VERSION={value} (unsupported by AMD); "
        f"to use {', '.join(_label(n, a) for n, a in others)} instead, leave it unset and "
        f"export HIP_VISIBLE_DEVICES={rest}"
    )


def arch_checks(sysrep: SystemReport) -> list[Check]:
    """Each visible GPU's target (after any override) against the PyTorch build's targets."""
    info = _torch(sysrep)
    gpus = gpus_seen(sysrep)
    if not info or not info.details.get("hip") or not gpus:
        return []
    built = arch_list(sysrep)
    name = "GPU targets in PyTorch"
    if not built:
        why = info.details.get("arch_list_error") or "torch.cuda.get_arch_list() returned nothing"
        return [
            Check(
                name,
                UNKNOWN,
                f"could not read this build's GPU targets ({why})",
                id="arch-mismatch",
            )
        ]
    override = override_target(host_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION"))
    missing, fine = [], []
    for n, agent in gpus:
        runs_as = override or agent.gfx
        (fine if runs_as in built else missing).append((n, agent, runs_as))
    if not missing:
        shown = ", ".join(f"{_label(n, a)} as {t}" for n, a, t in fine) or "no visible GPU"
        return [Check(name, OK, f"{shown}: in this build's targets", id="arch-mismatch")]
    n, agent, runs_as = missing[0]
    keys = ("get-arch-list", "wheel-lacks-arch", "tensile-missing", "tensile-then-nobinary")
    sources = cite(*keys, "nobinary-gfx1032")
    plan = override_plan(sysrep, agent.gfx or "", built)
    fix = (
        f"install a PyTorch wheel or rocm/pytorch image built for {agent.gfx} (check with "
        "python -c 'import torch; print(torch.cuda.get_arch_list())'), or build PyTorch from "
        f"source with PYTORCH_ROCM_ARCH={agent.gfx}"
    )
    if agent.gfx in NO_OVERRIDE:
        fix = native_build_fix(agent.gfx)
        sources += cite(*NO_OVERRIDE[agent.gfx][2])
    elif plan and not override:
        fix += "; unofficially: " + _override_fix(sysrep, plan)
    runs = f" (run as {runs_as} by HSA_OVERRIDE_GFX_VERSION)" if override else ""
    message = (
        f"{_label(n, agent)}{runs} is not among the targets this PyTorch was built for "
        f"({', '.join(built)}): its first kernel fails with 'HIP error: invalid device "
        "function' or 'hipErrorNoBinaryForGpu', and rocBLAS with 'Cannot read "
        "TensileLibrary.dat'"
    )
    if len(missing) > 1:
        message += f" ({len(missing)} GPUs affected)"
    return [Check(name, FAIL, message, sources, "arch-mismatch", fix)]


def _unset_override_check(sysrep: SystemReport) -> Check:
    """``HSA_OVERRIDE_GFX_VERSION`` not set: would one help, which GPUs, or nothing will."""
    name, cid = "HSA_OVERRIDE_GFX_VERSION", "hsa-override"
    built, basis, basis_sources = known_targets(sysrep)
    lacking = [(n, a) for n, a in gpus_seen(sysrep) if a.gfx and a.gfx not in built]
    if not built or not lacking:
        return Check(name, OK, "not set", id=cid)
    blocked = [(n, a) for n, a in lacking if a.gfx in NO_OVERRIDE]
    if blocked:
        n, a = blocked[0]
        why, _, keys = NO_OVERRIDE[a.gfx]
        msg = (
            f"not set, and no value would help: {_label(n, a)} has no kernels in {basis}, "
            f"and for {a.gfx} {why}"
        )
        return Check(name, WARN, msg, basis_sources + cite(*keys), cid, native_build_fix(a.gfx))
    plans = [override_plan(sysrep, a.gfx or "", built) for _, a in lacking]
    plans = [p for p in plans if p]
    if not plans:
        return Check(name, OK, "not set", id=cid)
    value, suits, others = plans[0]
    target = override_target(value)
    msg = (
        f"not set; {', '.join(_label(n, a) for n, a in suits)}: no kernels in {basis}, but "
        f"{target} of the same family has them: HSA_OVERRIDE_GFX_VERSION={value} is the "
        "documented, unofficial workaround"
    )
    if others:
        msg += (
            f"; it applies to every GPU the process sees, so it would also run "
            f"{', '.join(_label(n, a) for n, a in others)} as {target}, with another chip's kernels"
        )
    sources = cite("override-what", "override-gfx1031", "override-unofficial-780m")
    sources += basis_sources + cite("override-gfx1036", "override-gfx1151")
    return Check(name, INFO, msg, sources, cid, _override_fix(sysrep, plans[0]))


def override_check(sysrep: SystemReport) -> list[Check]:
    """``HSA_OVERRIDE_GFX_VERSION``: set or not, what it maps onto, and the risk."""
    name, cid = "HSA_OVERRIDE_GFX_VERSION", "hsa-override"
    value = host_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION")
    sources = cite("override-what", "override-gfx1031", "override-unofficial-780m")
    built = arch_list(sysrep)
    gpus = [a for _, a in gpus_seen(sysrep)]
    if value is None:
        return [_unset_override_check(sysrep)]
    target = override_target(value)
    if target is None:
        msg = f"set to {value!r}, which is not MAJOR.MINOR.STEPPING (for example 10.3.0)"
        return [Check(name, FAIL, msg, sources, cid, "unset it, or give a value such as 10.3.0")]
    natives = sorted({a.gfx for a in gpus if a.gfx})
    risk = (
        "it applies to every GPU of the process, is not supported by AMD, and a GPU that "
        "lacks an instruction the target's kernels use crashes or computes wrong results"
    )
    blocked = [g for g in natives if g in NO_OVERRIDE and g != target]
    if blocked:
        why, _, keys = NO_OVERRIDE[blocked[0]]
        msg = f"set to {value}: {blocked[0]} runs as {target}, and for {blocked[0]} {why}"
        return [Check(name, FAIL, msg, sources + cite(*keys), cid, native_build_fix(blocked[0]))]
    native = ", ".join(natives) or "no GPU listed"
    msg = f"set to {value}: every GPU runs as {target} ({native} natively); {risk}"
    if built and target not in built:
        fix = f"unset it, or choose a value whose target this build has ({', '.join(built)})"
        msg = f"set to {value} ({target}), which this PyTorch has no kernels for either"
        return [Check(name, FAIL, msg, sources, cid, fix)]
    if natives and all(g in built or g == target for g in natives):
        msg = f"set to {value} ({target}) although every GPU's own target is in this build; {risk}"
        fix = "unset it: these GPUs are supported as they are"
        return [Check(name, WARN, msg, sources + cite("override-not-needed"), cid, fix)]
    return [Check(name, WARN, msg, sources + cite("override-wrong-kernels"), cid)]


# --------------------------------------------------------------------------- 3: iGPU


def _gib(kib: int) -> str:
    return f"{kib / 1024**2:.1f} GiB"


def apu_memory(sysrep: SystemReport, igpu: Agent) -> str:
    """What decides what fits on an APU's integrated GPU, with the sizes rocminfo shows."""
    from .rocminfo import global_pool_kib

    facts = (
        "it has no memory of its own: it uses system RAM, the UMA frame buffer set in the "
        "BIOS plus GTT, which the amdgpu driver sizes by default to half of system RAM "
        "(amdgpu.gttsize, or the ttm module's pages_limit, changes it)"
    )
    cap = sysrep.rocminfo_capture
    pools = global_pool_kib(cap.text if cap else None)
    ram = max((pools.get(c.index, 0) for c in sysrep.rocminfo.cpus), default=0)
    mine = pools.get(igpu.index, 0)
    if ram and mine:
        facts += f"; rocminfo shows {_gib(ram)} of system memory and {_gib(mine)} for this GPU"
    elif ram:
        facts += f"; rocminfo shows {_gib(ram)} of system memory"
    return facts


def igpu_check(sysrep: SystemReport) -> list[Check]:
    """An APU's integrated GPU enumerated next to a discrete GPU."""
    name, cid = "Integrated GPU", "igpu"
    gpus = list(sysrep.rocminfo.gpus)
    integrated = [(i, a) for i, a in enumerate(gpus) if is_integrated(a)]
    if not integrated:
        return []
    sources = cite("igpu-prerequisites", "igpu-hip-visible", "igpu-device0", "gpu-isolation")
    sources += cite("apu-gttsize", "apu-uma-gtt", "no-override-gfx1151")
    discrete = [(i, a) for i, a in enumerate(gpus) if not is_integrated(a)]
    i, igpu = integrated[0]
    if not discrete:
        msg = (
            f"the only GPU is an APU's integrated GPU ({igpu.gfx}); check that ROCm supports "
            f"it; {apu_memory(sysrep, igpu)}"
        )
        return [Check(name, INFO, msg, sources, cid)]
    visible = {id(a) for _, a in visible_gpus(sysrep)}
    keep = ",".join(str(j) for j, _ in discrete)
    if id(igpu) not in visible:
        msg = f"integrated GPU {i} ({igpu.gfx}) is hidden from HIP programs by HIP_VISIBLE_DEVICES"
        return [Check(name, OK, msg, sources, cid)]
    first = " as device 0, so cuda:0 is the iGPU" if i == 0 else ""
    msg = (
        f"an integrated GPU ({igpu.marketing_name or igpu.name}, {igpu.gfx}) is enumerated "
        f"next to the discrete {discrete[0][1].marketing_name or discrete[0][1].gfx}{first}: "
        "ROCm does not support most integrated GPUs, and programs that touch it fail ('invalid "
        "device function', 'No HIP GPUs are available') or crash; if you use it, "
        + apu_memory(sysrep, igpu)
    )
    fix = (
        f"disable the integrated GPU in the BIOS (AMD's advice), or hide it: export "
        f"HIP_VISIBLE_DEVICES={keep} (ROCR_VISIBLE_DEVICES={keep} hides it from every ROCm "
        "program) before starting Python"
    )
    return [Check(name, WARN, msg, sources, cid, fix)]


# --------------------------------------------------------------------------- 4: permissions


def _access_fix(sysrep: SystemReport, node) -> str:
    """What to do about ``node`` refusing this user, from every place the groups show:
    this process's groups, the account's groups now, and rocminfo's own line."""
    group = node.group or "render"
    host = sysrep.host
    member = sysrep.rocminfo.group_membership
    in_session = bool(host and group in host.groups) or (member == (group, True))
    if in_session:
        where = (
            "the container's device list or cgroup: start it with --device=/dev/kfd "
            "--device=/dev/dri (or --privileged), and check that the group's id inside matches "
            "the host's"
            if host and host.container
            else f"the device's permissions (mode {node.mode}): check the udev rule for it"
        )
        return f"this user is in {group} already (adding it again changes nothing); look at {where}"
    if host and host.account_groups is not None and group in host.account_groups:
        return (
            f"the account is in {group} but this session is not (it was added after the login): "
            f"log out and in again, or run newgrp {group}"
        )
    if host and host.container:
        return (
            f"start the container with --group-add {group} (the group that owns {node.path}; "
            f"by number if the image lacks it: --group-add $(getent group {group} | cut -d: -f3)) "
            "and --group-add video"
        )
    return (
        "sudo usermod -a -G render,video $LOGNAME, then log out and in again "
        "(groups apply at login)"
    )


def device_access_check(sysrep: SystemReport) -> list[Check]:
    """``/dev/kfd`` and ``/dev/dri/renderD*``: present, and openable by this user."""
    name, cid = "Device access", "device-access"
    host = sysrep.host
    if host is None:
        return []
    if host.wsl is not None and host.wsl.is_wsl:
        msg = "WSL 2: the GPU is /dev/dxg here, not /dev/kfd and /dev/dri (see the WSL 2 check)"
        return [Check(name, INFO, msg, id=cid)]
    sources = cite("groups", "docker", "docker-render-gid", "docker-group-add-render")
    kfd, renders = host.kfd, host.render_nodes
    evidence = _amd_gpu_evidence(sysrep)
    where = f" inside a {host.container} container" if host.container else ""
    if kfd is None or not kfd.exists:
        if host.container:
            fix = (
                "docker run --device=/dev/kfd --device=/dev/dri --group-add video "
                "--group-add render ..."
            )
            if evidence:
                msg = f"no /dev/kfd{where} although {evidence}: the GPU was not passed in"
                return [Check(name, FAIL, msg, sources, cid, fix)]
            msg = f"no /dev/kfd{where}: no AMD GPU was passed in (if the host has one, pass it in)"
            return [Check(name, INFO, msg, sources, cid, fix)]
        if evidence:
            msg = f"no /dev/kfd although {evidence}: the amdgpu kernel driver is not loaded"
            fix = "install the AMD GPU driver (amdgpu-dkms) and reboot; see the install chapter"
            return [Check(name, FAIL, msg, sources, cid, fix)]
        return [Check(name, INFO, "no /dev/kfd: no AMD GPU driver on this machine", id=cid)]
    groups = ", ".join(host.groups) or "none"
    if not kfd.accessible:
        msg = (
            f"/dev/kfd ({kfd.owner}:{kfd.group}, mode {kfd.mode}) cannot be opened read-write "
            f"by this user (groups: {groups}){where}: ROCm says 'Unable to open /dev/kfd "
            "read-write: Permission denied'"
        )
        return [Check(name, FAIL, msg, sources, cid, _access_fix(sysrep, kfd))]
    if not renders:
        msg = f"/dev/kfd is usable but there is no /dev/dri/renderD* node{where}"
        fix = (
            "pass the render nodes too: --device=/dev/dri"
            if host.container
            else "check the amdgpu driver"
        )
        return [Check(name, FAIL, msg, sources, cid, fix)]
    blocked = [r for r in renders if not r.accessible]
    if blocked:
        r = blocked[0]
        msg = (
            f"{len(blocked)} of {len(renders)} render node(s) cannot be opened: {r.path} "
            f"({r.owner}:{r.group}, mode {r.mode}); this user's groups: {groups}"
        )
        return [Check(name, FAIL, msg, sources, cid, _access_fix(sysrep, r))]
    msg = (
        f"/dev/kfd and {len(renders)} render node(s) are readable and writable by this user{where}"
    )
    return [Check(name, OK, msg, sources, cid)]


# --------------------------------------------------------------------------- 5: the build


def _rocm_index_hint(sysrep: SystemReport) -> str:
    ver = sysrep.rocm.version
    mm = ".".join(compat_data.normalize_version(ver).split(".")[:2]) if ver else "X.Y"
    return (
        "pip install torch torchvision --index-url https://download.pytorch.org/whl/"
        f"rocm{mm} (pick the exact command on pytorch.org), or use the rocm/pytorch container"
    )


def pytorch_build_checks(sysrep: SystemReport) -> list[Check]:
    """A CUDA or CPU-only PyTorch where an AMD GPU is; pip ROCm next to /opt/rocm."""
    checks = []
    info, evidence = _torch(sysrep), _amd_gpu_evidence(sysrep)
    if info and evidence and not info.details.get("hip"):
        cuda = info.details.get("cuda")
        build = f"a CUDA {cuda} build" if cuda else "a CPU-only build"
        msg = (
            f"{evidence}, but PyTorch {info.version} is {build}: the usual result of "
            "'pip install torch' without the ROCm index (PyPI's Linux wheels are CUDA builds), "
            "or of a later install replacing the ROCm wheel"
        )
        sources = cite(
            "pytorch-get-started", "pypi-is-cuda", "pip-replaces-rocm-wheel", "hip-notes"
        )
        checks.append(
            Check("PyTorch build", FAIL, msg, sources, "pytorch-build", _rocm_index_hint(sysrep))
        )
    checks += _hip_window_check(sysrep, info)
    pip = sysrep.host.pip_rocm if sysrep.host else {}
    system = sysrep.rocm.version if sysrep.rocm.layout != "pip" else None
    if pip and system:
        mm = ".".join(compat_data.normalize_version(system).split(".")[:2])
        other = {
            k: v for k, v in pip.items() if not compat_data.normalize_version(v).startswith(mm)
        }
        if other:
            listed = ", ".join(f"{k} {v}" for k, v in sorted(other.items()))
            msg = (
                f"ROCm {system} at {sysrep.rocm.path} and pip-installed ROCm packages of another "
                f"release ({listed}) in this Python: which libraries a program loads then "
                "depends on the search order"
            )
            fix = "keep one ROCm per environment: uninstall the pip packages or use a clean venv"
            checks.append(Check("ROCm from pip", WARN, msg, (), "rocm-pip-mix", fix))
    return checks


def release_distance(a: str, b: str) -> int | None:
    """How many ROCm releases (major.minor) lie between ``a`` and ``b``, by the
    compatibility data's list (a release older than all it lists counts as one
    past the oldest, so the distance is then a lower bound); None when unknown."""
    order = list(dict.fromkeys(compat_data.major_minor(v) for v in compat_data.rocm_releases()))
    ma, mb = compat_data.major_minor(a), compat_data.major_minor(b)
    if not ma or not mb or not order:
        return None

    def index(mm: str) -> int | None:
        if mm in order:
            return order.index(mm)
        oldest = tuple(int(x) for x in order[-1].split("."))
        # older than anything the data lists: count it as one release past the oldest
        return len(order) if tuple(int(x) for x in mm.split(".")) < oldest else None

    ia, ib = index(ma), index(mb)
    return None if ia is None or ib is None else abs(ia - ib)


def _hip_window_check(sysrep: SystemReport, info) -> list[Check]:
    """A ROCm PyTorch built for another ROCm release than the one installed."""
    hip = info.details.get("hip") if info else None
    system = sysrep.rocm.version
    if not hip or not system or compat_data.major_minor(hip) == compat_data.major_minor(system):
        return []
    gap = release_distance(hip, system)
    policy = (compat_data.data().get("kernel_driver_policy") or {}).get("text", "")
    src = compat_data.sources().get("amdgpu-driver-compat-matrix", {}).get("url")
    sources = (src,) if src else ()
    head = (
        f"PyTorch carries the ROCm {compat_data.major_minor(hip)} libraries (HIP {hip}) while ROCm "
        f"{system} is installed: the wheel uses its own libraries, and what must match is the "
        "kernel driver"
    )
    if gap is None or gap <= 2:
        return [Check("PyTorch's ROCm", INFO, f"{head}. {policy}", sources, "pytorch-hip-window")]
    fix = "install the PyTorch wheel for the ROCm release you run, or a driver within its window"
    msg = f"{head}; they are {gap} releases apart, outside the support window. {policy}"
    return [Check("PyTorch's ROCm", WARN, msg, sources, "pytorch-hip-window", fix)]


# --------------------------------------------------------------------------- 6: host settings


NOFILE_GUIDE = 1048576
"""The open-file limit the guide sets for MIGraphX tuning (``ulimit -n 1048576``)."""


def host_checks(sysrep: SystemReport) -> list[Check]:
    """NUMA balancing and the open-file limit, for multi-GPU training and tuning."""
    host = sysrep.host
    if host is None:
        return []
    checks = []
    n_gpus = len(sysrep.rocminfo.gpus)
    if host.numa_balancing is None:
        checks.append(
            Check("NUMA balancing", INFO, "not reported by this kernel", id="numa-balancing")
        )
    elif host.numa_balancing.strip() != "0":
        status = WARN if n_gpus > 1 else INFO
        msg = (
            f"automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing = "
            f"{host.numa_balancing}); AMD advises turning it off for GPU training, as the "
            f"GPU can stall until a balancing pass ends ({n_gpus} GPU(s) here)"
        )
        fix = "sudo sh -c 'echo 0 > /proc/sys/kernel/numa_balancing'"
        checks.append(
            Check("NUMA balancing", status, msg, cite("numa", "numa-hang"), "numa-balancing", fix)
        )
    else:
        checks.append(Check("NUMA balancing", OK, "off", cite("numa"), "numa-balancing"))
    if host.nofile:
        soft, hard = host.nofile
        unlimited = soft == -1
        if unlimited or soft >= NOFILE_GUIDE:
            checks.append(
                Check(
                    "Open-file limit",
                    OK,
                    f"ulimit -n is {'unlimited' if unlimited else soft}",
                    id="open-files",
                )
            )
        else:
            msg = (
                f"ulimit -n is {soft} (hard limit {'unlimited' if hard == -1 else hard}); the "
                f"guide raises it to {NOFILE_GUIDE} for MIGraphX tuning (a known issue), and "
                "multi-GPU jobs have failed with 'Too many open files' at 1024"
            )
            checks.append(
                Check(
                    "Open-file limit",
                    INFO,
                    msg,
                    cite("nofile-guide", "nofile-too-many"),
                    "open-files",
                    f"ulimit -n {NOFILE_GUIDE} (in the container or shell that runs the job)",
                )
            )
    return checks


# --------------------------------------------------------------------------- 7: no GPU in torch


def torch_sees_gpu_check(sysrep: SystemReport, others: list[Check]) -> list[Check]:
    """PyTorch sees no GPU while ROCm does: which of the other findings explains it."""
    info, cid = _torch(sysrep), "torch-sees-gpu"
    if not info or not sysrep.rocminfo.gpus:
        return []
    if info.details.get("gpu_available"):
        n = len(info.details.get("devices") or [])
        return [Check("PyTorch sees the GPU", OK, f"PyTorch sees {n} GPU(s)", id=cid)]
    failed = {c.id: c for c in others if c.status in (FAIL, WARN)}
    order = ("pytorch-build", "device-access", "hsa-override", "arch-mismatch", "igpu")
    causes = [failed[k] for k in order if k in failed]
    env = host_env(sysrep)
    if not visible_gpus(sysrep):
        value = env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES"))
        n = len(sysrep.rocminfo.gpus)
        msg = f"rocminfo lists {n} GPU(s) but HIP_VISIBLE_DEVICES={value!r} hides them all"
        return [
            Check(
                "PyTorch sees the GPU",
                FAIL,
                msg,
                cite("gpu-isolation"),
                cid,
                "unset it or list valid indices",
            )
        ]
    n = len(sysrep.rocminfo.gpus)
    if causes:
        cause = causes[0]
        msg = f"rocminfo lists {n} GPU(s) but PyTorch sees none; the cause: {cause.name}: "
        msg += cause.message
        return [Check("PyTorch sees the GPU", FAIL, msg, causes[0].sources, cid, causes[0].fix)]
    why = info.error or "no cause among the checks above"
    msg = f"rocminfo lists {n} GPU(s) but PyTorch sees none ({why})"
    fix = (
        "run python -c 'import torch; torch.zeros(1).cuda()' with AMD_LOG_LEVEL=3 and "
        "read the first error"
    )
    return [Check("PyTorch sees the GPU", FAIL, msg, cite("hip-notes"), cid, fix)]


def checks(sysrep: SystemReport) -> list[Check]:
    """Every rule of this module, in the order the report lists them."""
    found = arch_checks(sysrep) + override_check(sysrep) + igpu_check(sysrep)
    found += device_access_check(sysrep) + pytorch_build_checks(sysrep) + host_checks(sysrep)
    return found + torch_sees_gpu_check(sysrep, found)


# --------------------------------------------------------------------------- the real workload
# (run by workload.py, collected with the rest; checked here)

_NO_BINARY = (
    "invalid device function",
    "hipErrorNoBinaryForGpu",
    "no kernel image is available",
)


def workload_cause(result: dict, sysrep: SystemReport) -> tuple[str, str, tuple[str, ...]]:
    """``(likely cause, fix, sources)`` for a failed :func:`workload.run_one` result."""
    text = f"{result.get('failure') or ''}\n{result.get('stderr') or ''}"
    built = arch_list(sysrep)
    agents = [a for _, a in visible_gpus(sysrep)]
    index = result.get("index", 0)
    gfx = agents[index].gfx if index < len(agents) else None
    override = override_target(host_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION"))
    runs_as = override or gfx
    if any(s in text for s in _NO_BINARY) or "TensileLibrary" in text:
        library = "rocBLAS (its Tensile kernels)" if "Tensile" in text else "PyTorch"
        if runs_as and built and runs_as not in built:
            why = f"{library} has no kernels for {runs_as}: this build carries {', '.join(built)}"
        elif override:
            why = (
                f"HSA_OVERRIDE_GFX_VERSION makes the runtime load {override} kernels, which "
                f"{library} lacks or which do not run on {gfx or 'this GPU'}"
            )
        else:
            why = f"{library} was built without kernels for {runs_as or 'this GPU'}"
        fix = (
            f"install a PyTorch build for {gfx or 'this GPU'} (python -c 'import torch; "
            "print(torch.cuda.get_arch_list())' lists a build's targets)"
        )
        return why, fix, cite("wheel-lacks-arch", "tensile-missing", "nobinary-gfx1032")
    if result.get("failure", "").startswith("wrong result"):
        why = "the GPU computes wrong answers"
        if override:
            why += f" (HSA_OVERRIDE_GFX_VERSION runs it as {override}: kernels for another chip)"
        fix = "unset HSA_OVERRIDE_GFX_VERSION" if override else "update the driver and firmware"
        return why, fix, cite("override-wrong-kernels")
    fix = (
        "run python -c 'import torch; torch.ones(1).cuda()' with AMD_LOG_LEVEL=3 and read "
        "the first error"
    )
    return "the GPU runtime failed", fix, cite("hip-notes")


def workload_check(sysrep: SystemReport) -> list[Check]:
    """One check: the workload ran and agreed with the CPU on every visible GPU."""
    info = sysrep.frameworks.get("pytorch")
    if not (info and info.installed and info.details.get("gpu_available")):
        return []
    name, cid = "GPU workload", "gpu-workload"
    results = sysrep.gpu_workload
    if results is None:
        msg = (
            "no kernel was run on the GPU (a snapshot from before doctor ran one): PyTorch "
            "sees it, but that alone does not show that its kernels run"
        )
        return [Check(name, UNKNOWN, msg, id=cid)]
    failed = [r for r in results if not r.get("ok")]
    if not failed:
        ops = ", ".join(workload.TOLERANCE)
        msg = f"{ops} on each of {len(results)} GPU(s) agree with the CPU"
        return [Check(name, OK, msg, id=cid)]
    first = failed[0]
    why, fix, sources = workload_cause(first, sysrep)
    label = f"GPU {first.get('index')}" + (f" ({first['name']})" if first.get("name") else "")
    msg = f"{label}: {first.get('failure')}; likely cause: {why}"
    if len(failed) > 1:
        msg += f" ({len(failed)} of {len(results)} GPUs failed)"
    return [Check(name, FAIL, msg, sources, cid, fix)]


def workload_passed(sysrep: SystemReport) -> bool:
    """Whether the workload ran on at least one GPU and passed on every one."""
    results = sysrep.gpu_workload
    return bool(results) and all(r.get("ok") for r in results)
