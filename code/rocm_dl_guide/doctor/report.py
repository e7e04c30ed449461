"""``python -m rocm_dl_guide doctor``: the reader's setup, checked.

The report lists what was found (ROCm, kernel driver, GPUs, frameworks), checks
each against the guide's sourced compatibility data
(:mod:`~rocm_dl_guide.doctor.compat_data`, its verdicts
:mod:`~rocm_dl_guide.doctor.compat`), and ends with a plain-language verdict.
It never fails because a tool is missing or prints nonsense: it says what it
could not learn.
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import asdict, dataclass

from rocm_dl_guide import __version__
from rocm_dl_guide.core import profiles

from . import compat, compat_data, diagnose, logs, readiness, smi, wsl
from .agents import topology
from .rules import FAIL, INFO, OK, UNKNOWN, WARN, Check
from .system import SystemReport, collect
from .words import counted

_MARK = {OK: "[ok]  ", INFO: "[info]", UNKNOWN: "[??]  ", WARN: "[warn]", FAIL: "[FAIL]"}
__all__ = [
    "FAIL",
    "INFO",
    "OK",
    "UNKNOWN",
    "WARN",
    "Check",
    "DoctorReport",
    "check_system",
    "from_snapshot",
    "run",
]


def _from_verdict(name: str, verdict: compat.Verdict, cid: str = "") -> Check:
    status = {"supported": OK, "unsupported": WARN}.get(verdict.status, UNKNOWN)
    return Check(name, status, verdict.message, tuple(verdict.sources), cid)


def _driver_check(rocm_ver: str, module_version: str) -> Check:
    """Check the kernel driver against ROCm, where the number can be read as a driver release.

    AMD's compatibility table lists "AMD GPU Driver" releases (30.10.x and up
    since ROCm 7; 6.x and older before). ``/sys/module/amdgpu/version`` reports
    the kernel module's own version, which for the older DKMS packages is not
    such a release number and could be misread as one, so only the new
    numbering is checked.
    """
    major = compat_data.normalize_version(module_version).split(".")[0]
    if major.isdigit() and int(major) >= 30:
        return _from_verdict(
            "Driver and ROCm", compat.check_kernel_driver(rocm_ver, module_version)
        )
    policy = compat_data.kernel_driver_policy()
    source = compat_data.sources().get(policy.get("source", ""), {}).get("url")
    return Check(
        "Driver and ROCm",
        UNKNOWN,
        f"the kernel module reports version {module_version}, which is not an AMD GPU "
        "Driver release number; compare the installed amdgpu-dkms package with the "
        f"support window: {policy.get('text', 'see the compatibility chapter')}",
        (source,) if source else (),
    )


def _hip_version(sysrep: SystemReport) -> str | None:
    """The HIP version of an installed ROCm build of PyTorch, else None."""
    torch_info = sysrep.frameworks.get("pytorch")
    return (torch_info.details.get("hip") if torch_info and torch_info.installed else None) or None


STREAM_NAMES = {"legacy": "legacy release stream", "core-sdk": "ROCm Core SDK stream"}


def rocm_stream(sysrep: SystemReport) -> str | None:
    """The release stream of the ROCm found: the data's, else the layout's."""
    return compat_data.stream_of(sysrep.rocm.version or "") or sysrep.rocm.stream


def _found_rocm_check(sysrep: SystemReport) -> Check:
    """ROCm found with a version: where, which stream, and whether the data knows it."""
    info = sysrep.rocm
    stream = rocm_stream(sysrep)
    how = "installed with pip" if info.layout == "pip" else f"found at {info.path}"
    text = f"ROCm {info.version} {how}"
    if stream:
        text += f" ({STREAM_NAMES.get(stream, stream)})"
    rel = compat_data.find_release(info.version)
    if rel is not None:
        return Check("ROCm", OK, text, (rel["source"],))
    line = compat_data.line_entries(info.version)
    if line:
        names = ", ".join(r["rocm"] for r in line)
        return Check(
            "ROCm",
            OK,
            f"{text}; not listed by itself: the checks below answer from AMD's data for its "
            f"release line ({names})",
            tuple(dict.fromkeys(r["source"] for r in line)),
        )
    latest = (compat_data.data().get("known_latest") or {}).get("rocm")
    return Check(
        "ROCm",
        UNKNOWN,
        f"{text}; this guide's data has no entry for this release (newest it knows: "
        f"{latest or compat_data.rocm_releases()[0]}), so checks against it are unknown",
    )


def _rocm_check(sysrep: SystemReport) -> tuple[Check, str | None]:
    """ROCm itself, and the ROCm version the other checks compare against.

    When ROCm is not installed system-wide, a ROCm PyTorch wheel's HIP version
    still tells the ROCm release it was built for.
    """
    rocm_ver = sysrep.rocm.version
    if rocm_ver:
        return _found_rocm_check(sysrep), rocm_ver
    hip = _hip_version(sysrep)
    if hip:
        rocm_ver = compat_data.major_minor(hip)
        known = sysrep.rocm.error
        head = f"no system ROCm ({known})" if known else "the system ROCm was not collected"
        message = (
            f"{head}; PyTorch carries its own ROCm libraries (HIP {hip}), so ROCm {rocm_ver} "
            "is assumed for the checks below"
        )
        return Check("ROCm", INFO if known else UNKNOWN, message), rocm_ver
    if not sysrep.rocm.error:  # neither a version nor why not: it was not read
        return Check("ROCm", UNKNOWN, "ROCm's version was not collected"), rocm_ver
    return Check("ROCm", INFO, sysrep.rocm.error), rocm_ver


def _kernel_driver_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """The amdgpu kernel driver, and its release against ROCm's."""
    kd = sysrep.kernel_driver
    if sysrep.host and sysrep.host.wsl and sysrep.host.wsl.is_wsl and not kd.loaded:
        msg = "WSL 2: no amdgpu driver in Linux; AMD's Windows driver serves the GPU"
        return [Check("Kernel driver", INFO, msg)]
    if kd.loaded is None and not kd.note:
        return [Check("Kernel driver", UNKNOWN, "whether amdgpu is loaded was not collected")]
    if not kd.loaded:
        return [Check("Kernel driver", INFO, kd.note or "the amdgpu kernel module is not loaded")]
    text = f"amdgpu kernel driver loaded, version {kd.version}" if kd.version else kd.note
    checks = [Check("Kernel driver", OK, text or "amdgpu kernel driver loaded")]
    if kd.version and rocm_ver:
        checks.append(_driver_check(rocm_ver, kd.version))
    return checks


def _rocminfo_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """rocminfo, and each GPU it lists against ROCm's supported GPUs."""
    ri = sysrep.rocminfo
    if ri.error:
        checks = [Check("rocminfo", INFO, f"{sysrep.rocminfo_source}: {ri.error}")]
    else:
        found = f"{counted(len(ri.agents), 'agent')}, {counted(len(ri.gpus), 'GPU')}"
        summary = f"{sysrep.rocminfo_source}: {found}"
        checks = [Check("rocminfo", OK, summary)]
    for n, gpu in enumerate(ri.gpus):
        label = f"GPU {gpu.marketing_name or gpu.name} ({gpu.gfx or 'unknown gfx'})"
        cid = f"gpu-support-{n}"
        if gpu.gfx and rocm_ver:
            checks.append(_from_verdict(label, compat.check_gpu(gpu.gfx, rocm_ver), cid))
        else:
            message = "no ROCm version or gfx target to check against"
            checks.append(Check(label, UNKNOWN, message, id=cid))
    notes = topology(ri) if ri.agents else []
    return checks + [Check(n.title, INFO, n.message, n.sources, n.id) for n in notes]


def _not_probed(name: str, info, status: str = INFO) -> Check | None:
    """The check for a framework that is not installed (its probe's error says why), or
    whose probe did not run (no entry, or not installed with no error): then it says
    "not checked" with ``status``, never ``None``. None when it is installed."""
    if info is not None and info.installed:
        return None
    if info is not None and info.error:
        return Check(name, INFO, f"{name}: {info.error}")
    return Check(name, status, f"{name}: not checked (its probe did not run)")


def _named(name: str, info) -> str:
    """``PyTorch 2.5.1``, or ``PyTorch (version not reported)`` (never ``PyTorch None``)."""
    return f"{name} {info.version}" if info.version else f"{name} (version not reported)"


def _pytorch_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """PyTorch: its build, the GPUs it sees, and a ROCm build's release against ROCm's."""
    torch_info = sysrep.frameworks.get("pytorch")
    missing = _not_probed("PyTorch", torch_info, UNKNOWN)
    if missing:
        return [missing]
    hip = _hip_version(sysrep)
    ver = torch_info.version
    cuda = torch_info.details.get("cuda")
    build = (
        f"ROCm build (HIP {hip})" if hip else (f"CUDA {cuda} build" if cuda else "CPU-only build")
    )
    gpu_seen = torch_info.details.get("gpu_available")
    devices = torch_info.details.get("devices") or []
    if gpu_seen is None:
        seen = "whether it sees a GPU was not collected"
    elif gpu_seen:
        names = ", ".join(str(d.get("name") or "unnamed") for d in devices)
        seen = diagnose.torch_gpus_text(torch_info) + (f": {names}" if names else "")
    else:
        seen = "sees no GPU"
    status = OK if gpu_seen else (UNKNOWN if gpu_seen is None else INFO)
    if torch_info.error:
        status, seen = WARN, torch_info.error
    checks = [Check("PyTorch", status, f"{_named('PyTorch', torch_info)}, {build}; {seen}")]
    if hip and rocm_ver and ver:
        verdict = compat.check_framework("pytorch", ver, rocm_ver)
        checks.append(_from_verdict("PyTorch and ROCm", verdict))
    return checks


def distributed_checks(sysrep: SystemReport) -> list[Check]:
    """What multi-process training would use: the process-group backends in this
    PyTorch, how many GPUs each torchrun rank could have, and on ROCm the RCCL library."""
    torch_info = sysrep.frameworks.get("pytorch")
    dist = torch_info.details.get("distributed") if torch_info and torch_info.installed else None
    if not dist:
        return []
    if dist.get("error") or not dist.get("available"):
        why = dist.get("error") or "this PyTorch was built without torch.distributed"
        return [Check("Distributed", WARN, f"torch.distributed unavailable: {why}")]
    backends = [b for b in ("nccl", "gloo") if dist.get(b)]
    nccl = dist.get("nccl_version")
    rccl_words = f" (RCCL/NCCL {nccl})" if nccl else ""
    gpus = len(torch_info.details.get("devices") or [])
    env = ", ".join(f"{k}={v}" for k, v in (dist.get("visible_env") or {}).items())
    if not gpus and torch_info.details.get("gpu_available") is not False:
        plan = "how many GPUs each rank could have was not collected"
    elif gpus:
        plan = (
            f"torchrun --nproc-per-node {gpus} starts {counted(gpus, 'rank')}, one per "
            f"visible GPU, with the nccl backend{rccl_words}"
        )
    else:
        plan = "no GPU visible: distributed runs use the gloo backend on the CPU"
    status = OK if "gloo" in backends or (gpus and "nccl" in backends) else WARN
    message = f"backends {', '.join(backends) or 'none'}; {plan}" + (f" ({env})" if env else "")
    checks = [Check("Distributed", status, message)]
    if torch_info.details.get("hip") and gpus:
        found = dist.get("rccl") or []
        if found:
            checks.append(Check("RCCL", OK, f"RCCL library: {found[0]}"))
        else:
            checks.append(
                Check(
                    "RCCL",
                    WARN,
                    "no librccl.so found next to PyTorch or in "
                    "/opt/rocm*/lib: the nccl backend (RCCL on ROCm) will fail",
                )
            )
    return checks


def _tensorflow_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """TensorFlow: its build, the GPUs it sees, and a ROCm build's release against ROCm's."""
    tf_info = sysrep.frameworks.get("tensorflow")
    missing = _not_probed("TensorFlow", tf_info)
    if missing:
        return [missing]
    rocm_build = tf_info.details.get("built_with_rocm")
    gpus = tf_info.details.get("gpus")
    build = {True: "ROCm build", False: "not a ROCm build"}.get(rocm_build, "build not reported")
    seen = (
        "its GPUs were not listed"
        if gpus is None
        else f"sees {counted(len(gpus), 'GPU', zero=True)}"
    )
    if gpus is None and tf_info.details.get("gpu_error"):
        seen += f" ({tf_info.details['gpu_error']})"
    message = f"{_named('TensorFlow', tf_info)}, {build}; {seen}"
    checks = [Check("TensorFlow", OK if gpus else INFO, message)]
    if rocm_build and rocm_ver and tf_info.version:
        verdict = compat.check_framework("tensorflow", tf_info.version, rocm_ver)
        checks.append(_from_verdict("TensorFlow and ROCm", verdict))
    return checks


def _onnxruntime_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """ONNX Runtime: its execution providers, and an AMD-enabled release against ROCm's."""
    ort = sysrep.frameworks.get("onnxruntime")
    missing = _not_probed("ONNX Runtime", ort)
    if missing:
        return [missing]
    providers = ort.details.get("providers")
    amd = [
        p for p in providers or () if p in ("MIGraphXExecutionProvider", "ROCMExecutionProvider")
    ]
    note = "" if amd or providers is None else " (no AMD GPU provider: inference runs on the CPU)"
    listed = "not reported" if providers is None else ", ".join(providers) or "none"
    message = f"{_named('ONNX Runtime', ort)}; providers: {listed}{note}"
    checks = [Check("ONNX Runtime", OK, message)]
    if amd and rocm_ver and ort.version:
        verdict = compat.check_framework("onnxruntime", ort.version, rocm_ver)
        checks.append(_from_verdict("ONNX Runtime and ROCm", verdict))
    return checks


def _migraphx_checks(sysrep: SystemReport, rocm_ver: str | None) -> list[Check]:
    """MIGraphX: whether it imports, and its release against ROCm's."""
    mgx = sysrep.frameworks.get("migraphx")
    if mgx is None or not mgx.installed:
        message = (
            f"MIGraphX: {(mgx.error if mgx else None) or 'not checked'} (on ROCm, install the "
            "migraphx package and add the ROCm lib directory, /opt/rocm/lib or "
            "/opt/rocm/core-N.N/lib, to PYTHONPATH)"
        )
        return [Check("MIGraphX", INFO, message)]
    checks = [Check("MIGraphX", OK, f"MIGraphX {mgx.version or '(version unknown)'} imports")]
    if mgx.version and rocm_ver:
        verdict = compat.check_framework("migraphx", mgx.version, rocm_ver)
        checks.append(_from_verdict("MIGraphX and ROCm", verdict))
    return checks


def _rocminfo_gpus(sysrep: SystemReport) -> int | None:
    """rocminfo's GPU agent count, where rocminfo's output was read."""
    return len(sysrep.rocminfo.gpus) if sysrep.rocminfo.agents else None


def _smi_checks(sysrep: SystemReport) -> list[Check]:
    """GPU partitions, from the smi output doctor ran or the reader gave with ``--smi``
    (none without either); a command that failed or timed out is named in one line."""
    if not sysrep.smi:
        return []
    parts = smi.read(sysrep.smi["text"])
    error = sysrep.smi.get("error")
    if parts.empty and error:
        return [Check("GPU partitions", INFO, f"not read: {error}.", (), "partitions")]
    if parts.empty:
        msg = "unknown: nothing in the smi output was recognised (no device, mode or topology)"
        return [Check("GPU partitions", UNKNOWN, msg, (), "partitions")]
    found = smi.check(parts, _rocminfo_gpus(sysrep))
    if error:
        found.message += f" ({error})"
    return [found]


def _checks(sysrep: SystemReport) -> tuple[list[Check], str | None]:
    """Every check, section by section, and the ROCm version they were checked against."""
    rocm_check, rocm_ver = _rocm_check(sysrep)
    checks = [rocm_check]
    checks += _kernel_driver_checks(sysrep, rocm_ver)
    checks += _rocminfo_checks(sysrep, rocm_ver)
    checks += _pytorch_checks(sysrep, rocm_ver)
    checks += diagnose.checks(sysrep)
    checks += diagnose.workload_check(sysrep)
    checks += wsl.checks(sysrep)
    checks += distributed_checks(sysrep)
    checks += _smi_checks(sysrep)
    checks += _tensorflow_checks(sysrep, rocm_ver)
    checks += _onnxruntime_checks(sysrep, rocm_ver)
    checks += _migraphx_checks(sysrep, rocm_ver)
    return checks, rocm_ver


def _wrap(line: str, wrap: int) -> str:
    """One line of a section, wrapped at ``wrap`` columns under its own indent."""
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(
        line,
        width=wrap,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


@dataclass
class DoctorReport:
    system: SystemReport
    checks: list[Check]
    rocm_version_checked: str | None
    verdict: str

    @property
    def log_findings(self) -> list[logs.Finding] | None:
        """What the reader's error text (``doctor --log``) says; ``None`` without one."""
        log = self.system.log
        return logs.read(log["text"]) if log else None

    @property
    def smi_report(self) -> smi.SmiReport | None:
        """What the smi output (run by doctor, or ``doctor --smi``) says; ``None`` without one."""
        given = self.system.smi
        return smi.read(given["text"]) if given else None

    def to_dict(self) -> dict:
        out = {"guide_version": __version__}
        out.update(self.system.to_dict())
        out["rocm_version_checked"] = self.rocm_version_checked
        out["rocm_stream"] = rocm_stream(self.system)
        out["checks"] = [asdict(c) for c in self.checks]
        out["verdict"] = self.verdict
        findings = self.log_findings
        out["log"] = None if findings is None else logs.to_dict(findings, self.system.log["source"])
        parts, given = self.smi_report, self.system.smi
        out["smi"] = (
            None
            if parts is None
            else smi.to_dict(
                parts, given["source"], _rocminfo_gpus(self.system), given.get("error")
            )
        )
        torch_info = self.system.frameworks.get("pytorch")
        gpu = bool(torch_info and torch_info.installed and torch_info.details.get("gpu_available"))
        # The one profile resolved outside an entry point: the report says which
        # profile a run started here would get, and asks PyTorch through the probe
        # (this process never imports it), so it cannot use profiles.current().
        try:
            out["profile"] = profiles.get(
                os.environ.get(profiles.ENV_VAR) or profiles.default_name(gpu)
            ).name
        except profiles.ProfileError as exc:
            out["profile"] = None
            out["profile_error"] = str(exc)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def to_text(self, wrap: int = 100) -> str:
        """The report as text for one screen, wrapped at ``wrap`` columns: the
        verdict first, then the GPUs, the checks with the problems first (each
        with its fix on the next line), the log and SMI sections when given,
        and the sources the checks cite, numbered, each on a line of its own so
        that no URL is broken. ``--json`` keeps every detail."""
        s = self.system
        lines = [f"ROCm Deep Learning Guide doctor (rocm_dl_guide {__version__})"]
        lines.append(textwrap.fill("Verdict: " + self.verdict, width=wrap, subsequent_indent="  "))
        gpus = s.gpus()
        if not gpus:
            pci = [f"{g['vendor']} {g['device_id']} at {g['address']}" for g in s.pci_gpus]
            where = f" by ROCm; PCI display devices: {', '.join(pci)}" if pci else ""
            lines.append(_wrap(f"GPUs: none found{where}", wrap))
        else:
            lines.append("GPUs:")
        for g in gpus:
            cu = f", {g['compute_units']} compute units" if g.get("compute_units") else ""
            lines.append(
                f"  {g.get('marketing_name') or 'unnamed GPU'} "
                f"({g.get('gfx') or 'gfx unknown'}{cu})  [from {g['source']}]"
            )
        unread = [c for c in self.checks if c.uncollected]
        blind = {"rocminfo", "pytorch"} <= {c.id for c in unread}  # another machine's text
        shown = [c for c in self.checks if c not in unread] if blind else self.checks
        checks, sources = _checks_text(shown, wrap)
        lines += ["", f"Checks, problems first (a line ending in {CUT} is cut: --json has it all):"]
        lines += checks
        if shown is not self.checks:
            names = ", ".join(_UNREAD_NAMES.get(c.id, c.name) for c in unread)
            lines.append(_wrap(f"  {_MARK[UNKNOWN]} Not collected here: {names}", wrap))
        findings = self.log_findings
        if findings is not None:
            here = {c.id: f"[{c.status}] {c.message}" for c in shown}
            log = self.system.log
            lines += ["", logs.to_text(findings, log["source"], here, log.get("text") or "")]
        parts = self.smi_report
        if parts is not None:
            given = self.system.smi
            section = smi.to_text(
                parts, given["source"], _rocminfo_gpus(self.system), given.get("error")
            )
            lines += ["", *(_wrap(line, wrap) for line in section.splitlines())]
        if sources:
            lines += ["", "Sources:", *(f"[{i}] {src}" for i, src in enumerate(sources, 1))]
        return "\n".join(lines)


_UNREAD_NAMES = {"hsa-override": "this process's environment"}  # not a variable's name

_ORDER = {FAIL: 0, WARN: 1, UNKNOWN: 2, INFO: 3, OK: 4}
"""The order of the checks in the text report: what needs doing first."""


def _checks_text(checks: list[Check], wrap: int) -> tuple[list[str], list[str]]:
    """The checks' lines, problems first (the order within a status kept), and
    the sources they cite, numbered in the order of their first citation. Checks
    that say the same thing (eight partitions of one GPU, each its own rocminfo
    agent) are one line, with how many they are; ``--json`` keeps each."""
    sources: list[str] = []
    same: dict[tuple, int] = {}
    for c in checks:
        key = (c.status, c.name, c.message, c.fix, c.sources)
        same[key] = same.get(key, 0) + 1

    def cite(source: str) -> str:
        if source not in sources:
            sources.append(source)
        return f"[{sources.index(source) + 1}]"

    indent = " " * 9  # under the message, past "  [info] "
    lines = []
    for c in sorted(checks, key=lambda c: _ORDER.get(c.status, len(_ORDER))):
        count = same.pop((c.status, c.name, c.message, c.fix, c.sources), 0)
        if not count:
            continue  # said once already
        cites = "".join(cite(src) for src in c.sources)
        times = f" (x{count})" if count > 1 else ""
        head = f"  {_MARK.get(c.status, c.status)} {c.name}{times}: "
        lines.append(_one_line(head, _without_name(c.name, c.message), cites, wrap))
        if c.fix:
            lines.append(
                textwrap.fill(
                    f"fix: {c.fix}",
                    width=wrap,
                    initial_indent=indent,
                    subsequent_indent=indent + "  ",
                    break_on_hyphens=False,
                    break_long_words=False,  # a command or path stays whole, to copy
                )
            )
    return lines, sources


CUT = "…"
"""Ends a check's line that was cut to fit the screen (``--json`` has it whole)."""


def _without_name(name: str, message: str) -> str:
    """The message without the check's name repeated at its start: "PyTorch: PyTorch
    2.5.1, ..." reads "PyTorch: 2.5.1, ...", and "rocminfo: rocminfo: ..." loses one."""
    if message.startswith(f"{name}: "):
        return message[len(name) + 2 :]
    rest = message[len(name) + 1 :]
    if message.startswith(f"{name} ") and rest[:1].isdigit():  # a version
        return rest
    return message


def _one_line(head: str, message: str, cites: str, wrap: int) -> str:
    """``head`` + ``message`` + `` cites`` on one line of ``wrap`` columns: a message
    too long is cut at a word and ends in :data:`CUT`; the citations stay."""
    tail = f" {cites}" if cites else ""
    line = head + message + tail
    if len(line) <= wrap:
        return line
    room = max(10, wrap - len(head) - len(tail) - len(CUT))
    cut = message[:room]
    if " " in cut[room // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return head + cut.rstrip(" ,;:(") + CUT + tail


def check_system(sysrep: SystemReport) -> DoctorReport:
    """Check already-collected facts (for example a saved or made-up report)."""
    checks, rocm_ver = _checks(sysrep)
    return DoctorReport(sysrep, checks, rocm_ver, readiness.verdict(sysrep, checks))


def from_snapshot(path) -> DoctorReport:
    """Every check on a snapshot written by ``doctor --collect``
    (see :mod:`rocm_dl_guide.doctor.snapshot`)."""
    from . import snapshot

    return check_system(snapshot.load(path))


def run(
    rocminfo_text: str | None = None,
    rocminfo_source: str | None = None,
    python: str | None = None,
    run_smi: bool = True,
) -> DoctorReport:
    """Collect the facts and check them. Never raises on odd system state.
    ``run_smi=False``: do not run ``amd-smi``/``rocm-smi`` (the reader gave their output)."""
    sysrep = collect(
        rocminfo_text=rocminfo_text,
        rocminfo_source=rocminfo_source,
        python=python,
        run_smi=run_smi,
    )
    return check_system(sysrep)
