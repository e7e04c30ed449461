"""The doctor's checks of what breaks ROCm setups, in the order the report lists them.

Each check reads a :class:`~rocm_dl_guide.doctor.system.SystemReport` (collected
here or replayed from a snapshot) and returns :class:`~.rules.Check` objects:
a stable ``id``, a status, one plain-language sentence, the fix, and the
sources the rule rests on (:data:`~.rules.SOURCES`). The checks are the
failures readers report on ROCm's and PyTorch's issue trackers: a GPU target
the PyTorch build lacks, ``HSA_OVERRIDE_GFX_VERSION`` and an integrated GPU
enumerated first (those three are :mod:`~rocm_dl_guide.doctor.gpu_targets`'),
device permissions and containers, the wrong PyTorch build, host settings
for multi-GPU training, and PyTorch seeing no GPU although ROCm does;
:func:`checks` runs them all. :func:`workload_check` explains a failed run of
the real workload (:mod:`~rocm_dl_guide.doctor.workload`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import compat_data, smi, workload, wsl
from .gpu_targets import (
    arch_checks,
    arch_list,
    host_env,
    igpu_check,
    override_check,
    override_target,
    torch_info,
    visible_gpus,
)
from .rules import FAIL, INFO, OK, UNKNOWN, WARN, Check, cite
from .words import counted

if TYPE_CHECKING:  # pragma: no cover
    from .system import SystemReport


def amd_gpu_evidence(sysrep: SystemReport) -> str | None:
    """Why we believe an AMD GPU is here (rocminfo, the PCI bus, /dev/kfd), or None."""
    if sysrep.rocminfo.gpus:
        return f"rocminfo lists {counted(len(sysrep.rocminfo.gpus), 'GPU')}"
    amd = [g for g in sysrep.pci_gpus if g.get("vendor") == "AMD"]
    if amd:
        return f"the PCI bus shows an AMD display device ({amd[0]['device_id']})"
    if sysrep.smi and sysrep.smi.get("text"):
        listed = smi.read(sysrep.smi["text"]).devices
        if listed:
            return f"the smi output lists {counted(len(listed), 'GPU device')}"
    kfd = sysrep.host.kfd if sysrep.host else None
    if kfd is not None and kfd.exists:
        return "/dev/kfd exists"
    error = sysrep.rocminfo.error or ""
    if "/dev/kfd" in error and ("ermission" in error or "not permitted" in error):
        return "rocminfo was refused /dev/kfd"
    return None


# --------------------------------------------------------------------------- 4: permissions


def groups_text(host) -> str:
    """This process's groups as the report says them: the names, "no group", or
    that they were not collected (never "none" for an unknown)."""
    if host is None or host.groups is None:
        return "groups were not collected"
    return "groups: " + (", ".join(host.groups) or "no group")


def _access_fix(sysrep: SystemReport, node) -> str:
    """What to do about ``node`` refusing this user, from every place the groups show:
    this process's groups, the account's groups now, and rocminfo's own line. No
    ``usermod`` where the user is in the group already or nothing says whether it is."""
    host = sysrep.host
    member = sysrep.rocminfo.group_membership
    group = node.group or (member[0] if member else None)
    if group is None:
        return (
            f"find the group that owns {node.path} (ls -l {node.path}) and check whether this "
            "user is in it (id -nG); its owner was not collected"
        )
    in_session = bool(host and host.groups and group in host.groups) or member == (group, True)
    if in_session:
        mode = f" (mode {node.mode})" if node.mode else ""
        where = (
            "the container's device list or cgroup: start it with --device=/dev/kfd "
            "--device=/dev/dri (or --privileged), and check that the group's id inside matches "
            "the host's"
            if host and host.container
            else f"the device's permissions{mode}: check the udev rule for it"
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
    if (host is None or host.groups is None) and member is None:
        return (
            f"this user's groups were not collected: run id -nG; without {group} there, add "
            f"the account to it, and with it, log out and in (a group applies at login)"
        )
    return (
        "sudo usermod -a -G render,video $LOGNAME, then log out and in again "
        "(groups apply at login)"
    )


def _no_kfd_check(sysrep: SystemReport, where: str) -> Check:
    """``/dev/kfd`` absent (it was looked for, and is not there)."""
    name, cid = "Device access", "device-access"
    host = sysrep.host
    sources = cite("groups", "docker", "docker-render-gid", "docker-group-add-render")
    evidence = amd_gpu_evidence(sysrep)
    if host.container:
        fix = (
            "docker run --device=/dev/kfd --device=/dev/dri --group-add video "
            "--group-add render ..."
        )
        if evidence:
            msg = f"no /dev/kfd{where} although {evidence}: the GPU was not passed in"
            return Check(name, FAIL, msg, sources, cid, fix)
        msg = f"no /dev/kfd{where}: no AMD GPU was passed in (if the host has one, pass it in)"
        return Check(name, INFO, msg, sources, cid, fix)
    if evidence:
        msg = f"no /dev/kfd although {evidence}: the amdgpu kernel driver is not loaded"
        fix = "install the AMD GPU driver (amdgpu-dkms) and reboot; see the install chapter"
        return Check(name, FAIL, msg, sources, cid, fix)
    return Check(name, INFO, "no /dev/kfd: no AMD GPU driver on this machine", id=cid)


def _unknown_access(host) -> Check | None:
    """UNKNOWN where what device access turns on was not collected, else None."""
    name, cid = "Device access", "device-access"
    kfd = host.kfd
    if host.devices is None:
        msg = "not collected: the device nodes (/dev/kfd, /dev/dri/renderD*) were not read"
    elif kfd is not None and kfd.exists is None:
        msg = "unknown: whether /dev/kfd exists could not be read"
    elif kfd is not None and kfd.exists and kfd.accessible is None:
        msg = f"/dev/kfd exists {kfd.describe()}; whether this user may open it was not collected"
    else:
        return None
    return Check(name, UNKNOWN, msg, id=cid)


def device_access_check(sysrep: SystemReport) -> list[Check]:
    """``/dev/kfd`` and ``/dev/dri/renderD*``: present, and openable by this user."""
    name, cid = "Device access", "device-access"
    host = sysrep.host
    if host is None:
        return []
    wsl_line = wsl.device_line(host)  # /dev/dxg named only where it was seen
    if wsl_line:
        status = UNKNOWN if host.wsl.dxg is None else INFO
        return [Check(name, status, wsl_line, id=cid)]
    unknown = _unknown_access(host)
    if unknown:
        return [unknown]
    sources = cite("groups", "docker", "docker-render-gid", "docker-group-add-render")
    kfd, renders = host.kfd, host.render_nodes
    where = f" inside a {host.container} container" if host.container else ""
    if kfd is None or not kfd.exists:
        return [_no_kfd_check(sysrep, where)]
    groups = groups_text(host)
    if not kfd.accessible:
        msg = (
            f"/dev/kfd {kfd.describe()} cannot be opened read-write by this user "
            f"({groups}){where}: ROCm says 'Unable to open /dev/kfd read-write: Permission denied'"
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
    blocked = [r for r in renders if r.accessible is False]
    unread = [r for r in renders if r.accessible is None]
    if blocked:
        r = blocked[0]
        msg = (
            f"{len(blocked)} of {counted(len(renders), 'render node')} cannot be opened: {r.path} "
            f"{r.describe()}; this user's {groups}"
        )
        return [Check(name, FAIL, msg, sources, cid, _access_fix(sysrep, r))]
    if unread:
        msg = f"/dev/kfd is usable; whether this user may open {unread[0].path} was not collected"
        return [Check(name, UNKNOWN, msg, sources, cid)]
    msg = (
        f"/dev/kfd and {counted(len(renders), 'render node')} are readable and writable "
        f"by this user{where}"
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
    info, evidence = torch_info(sysrep), amd_gpu_evidence(sysrep)
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
            f"GPU can stall until a balancing pass ends ({counted(n_gpus, 'GPU')} here)"
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


def torch_gpus_text(info) -> str:
    """``sees 2 GPUs`` where PyTorch says it has a GPU: the count its device list gives,
    or, where that list was not collected, that it is unknown (never "0 GPUs")."""
    devices = info.details.get("devices")
    if not devices:
        return "sees a GPU (torch.cuda.is_available()); how many was not collected"
    return f"sees {counted(len(devices), 'GPU', zero=True)}"


def torch_sees_gpu_check(sysrep: SystemReport, others: list[Check]) -> list[Check]:
    """PyTorch sees no GPU while ROCm does: which of the other findings explains it."""
    info, cid = torch_info(sysrep), "torch-sees-gpu"
    if not info or not sysrep.rocminfo.gpus:
        return []
    if info.details.get("gpu_available"):
        return [Check("PyTorch sees the GPU", OK, f"PyTorch {torch_gpus_text(info)}", id=cid)]
    failed = {c.id: c for c in others if c.status in (FAIL, WARN)}
    order = ("pytorch-build", "device-access", "hsa-override", "arch-mismatch", "igpu")
    causes = [failed[k] for k in order if k in failed]
    env = host_env(sysrep)
    if not visible_gpus(sysrep):
        value = env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES"))
        n = len(sysrep.rocminfo.gpus)
        msg = f"rocminfo lists {counted(n, 'GPU')} but HIP_VISIBLE_DEVICES={value!r} hides them all"
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
        msg = f"rocminfo lists {counted(n, 'GPU')} but PyTorch sees none; the cause: {cause.name}: "
        msg += cause.message
        return [Check("PyTorch sees the GPU", FAIL, msg, causes[0].sources, cid, causes[0].fix)]
    why = info.error or "no cause among the checks above"
    msg = f"rocminfo lists {counted(n, 'GPU')} but PyTorch sees none ({why})"
    fix = (
        "run python -c 'import torch; torch.zeros(1).cuda()' with AMD_LOG_LEVEL=3 and "
        "read the first error"
    )
    return [Check("PyTorch sees the GPU", FAIL, msg, cite("hip-notes"), cid, fix)]


def checks(sysrep: SystemReport) -> list[Check]:
    """Every check (the GPU-target ones of :mod:`.gpu_targets` first), in report order."""
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


def _each(n: int) -> str:
    """``the GPU`` for one GPU, ``each of the 3 GPUs`` for more."""
    return "the GPU" if n == 1 else f"each of the {counted(n, 'GPU')}"


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
    if not results:
        msg = (
            "no kernel was run on the GPU here (not collected: none was run, or the snapshot "
            "predates the check): PyTorch sees it, but that alone does not show that its "
            "kernels run"
        )
        return [Check(name, UNKNOWN, msg, id=cid)]
    failed = [r for r in results if not r.get("ok")]
    if not failed and not all(_kernels_ran(r) for r in results):
        msg = (
            "the workload's result says ok but records no operation that ran (no errors "
            "against the CPU), so whether the GPU's kernels run is unknown"
        )
        return [Check(name, UNKNOWN, msg, id=cid)]
    if not failed:
        ops = ", ".join(workload.TOLERANCE)
        msg = f"{ops} on {_each(len(results))} agree with the CPU"
        return [Check(name, OK, msg, id=cid)]
    first = failed[0]
    why, fix, sources = workload_cause(first, sysrep)
    label = f"GPU {first.get('index')}" + (f" ({first['name']})" if first.get("name") else "")
    msg = f"{label}: {first.get('failure')}; likely cause: {why}"
    if len(failed) > 1:
        msg += f" ({len(failed)} of {len(results)} GPUs failed)"
    return [Check(name, FAIL, msg, sources, cid, fix)]


def _kernels_ran(result: dict) -> bool:
    """A passed result that shows its kernels ran: ok, with each operation's error
    against the CPU recorded (a bare ``ok`` is not evidence)."""
    errors = result.get("errors")
    return result.get("ok") is True and isinstance(errors, dict) and bool(errors)


def workload_passed(sysrep: SystemReport) -> bool:
    """Whether the workload ran on at least one GPU and passed on every one, with
    the kernels' results recorded (:func:`_kernels_ran`)."""
    results = sysrep.gpu_workload
    return bool(results) and all(_kernels_ran(r) for r in results)
