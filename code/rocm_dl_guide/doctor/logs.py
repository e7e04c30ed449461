"""The reader's own error text: ``doctor --log FILE`` (or ``-`` for stdin).

Readers run the doctor when something broke, with an error in front of them.
:func:`read` recognises the messages ROCm setups fail with, in the words the
runtime, rocminfo, rocBLAS and PyTorch print them, and maps each to its
likely causes, the fix and the public reports behind it (:data:`RULES`); the
``AMD_LOG_LEVEL`` lines that list the GPUs and the code objects a program
carries are read too (:func:`code_objects`), which names the GPU that has no
kernels. Each finding also names the doctor's own checks that explain it
(``explained_by``), so the report can show their verdict on this machine.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import rules

MAX_BYTES = 4 * 2**20
"""The most of a log that is read (its last part where it is longer)."""

_ISSUE = "https://github.com/ROCm/legacy-rocm-build/issues/"


@dataclass(frozen=True)
class Rule:
    """One message: the pattern it is recognised by, and what it means."""

    id: str
    pattern: str
    title: str
    causes: str
    fix: str
    sources: tuple[str, ...] = ()
    explained_by: tuple[str, ...] = ()
    """The doctor's checks that find the causes on a machine."""


RULES: tuple[Rule, ...] = (
    Rule(
        "kfd-permission",
        r"/dev/kfd[^\n]*(Permission denied|Operation not permitted)",
        "/dev/kfd: permission denied",
        "this user may not open the GPU's compute device: not in the group that owns "
        "/dev/kfd (render, on most systems; video on older ones), or in it only since "
        "this login session began, or a container started without the device or group",
        "add the user to the owning group (sudo usermod -aG render,video $USER) and log in "
        "again; in a container: docker run --device=/dev/kfd --device=/dev/dri "
        "--group-add render --group-add video",
        (
            "https://github.com/ROCm/ROCm-docker/issues/116",
            "https://github.com/ROCm/rocminfo/issues/34",
        ),
        ("device-access",),
    ),
    Rule(
        "kfd-invalid-argument",
        r"/dev/kfd[^\n]*Invalid argument",
        "/dev/kfd: invalid argument",
        "not a permission problem: the kernel driver refused to open the device. Seen in "
        "unprivileged LXC containers (Proxmox) and where the host's amdgpu driver or GPU "
        "is in a bad state; group membership does not change it",
        "check dmesg on the host for amdgpu/kfd errors; run ROCm on the host or in a "
        "privileged container with the host's /dev/kfd; reboot the host after a GPU fault",
        (f"{_ISSUE}5379", f"{_ISSUE}4043", f"{_ISSUE}6166"),
        ("device-access", "kernel-driver"),
    ),
    Rule(
        "out-of-resources",
        r"HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        "the HSA runtime could not set up the GPU: most often it could not open /dev/kfd "
        "(rocminfo reports a permission failure this way), or the kernel driver does not "
        "support the GPU (dmesg: 'not supported in kfd'), or a user-space ROCm that does "
        "not match the driver",
        "run rocminfo and read the line before this one; check /dev/kfd access and "
        "dmesg | grep kfd",
        ("https://github.com/ROCm/rocminfo/issues/34", f"{_ISSUE}2232", f"{_ISSUE}5555"),
        ("device-access", "kernel-driver"),
    ),
    Rule(
        "hsa-call-failure",
        r"hsa api call failure",
        "hsa api call failure",
        "an HSA runtime call failed while setting up the GPU; the status on the next line "
        "says which (often HSA_STATUS_ERROR_OUT_OF_RESOURCES)",
        "read the status after it; the same causes as that status",
        (f"{_ISSUE}930",),
        ("device-access", "kernel-driver"),
    ),
    Rule(
        "no-binary",
        r"hipErrorNoBinaryForGpu",
        "hipErrorNoBinaryForGpu",
        "the program carries no code object for one of the GPUs the runtime sees: a build "
        "without that gfx target, an integrated GPU enumerated beside the discrete one, or "
        "HSA_OVERRIDE_GFX_VERSION pointing at a target the build lacks",
        "run with AMD_LOG_LEVEL=1 to list the devices and the code objects (doctor reads "
        "those lines too); install a build for the missing target, or hide the GPU with "
        "HIP_VISIBLE_DEVICES",
        (f"{_ISSUE}1623", "https://github.com/ROCm/tensorflow-upstream/issues/1800"),
        rules.ERROR_MESSAGES[
            "hipErrorNoBinaryForGpu: Unable to find code object for all current devices"
        ],
    ),
    Rule(
        "invalid-device-function",
        r"invalid device function",
        "HIP error: invalid device function",
        "a kernel has no code for this GPU's target: the PyTorch build (a wheel or your own) "
        "lacks the gfx, or HSA_OVERRIDE_GFX_VERSION maps the GPU onto a target whose "
        "kernels do not run on it, or an integrated GPU is device 0",
        "compare python -c 'import torch; print(torch.cuda.get_arch_list())' with "
        "rocminfo's gfx; install a build for it",
        rules.cite("wheel-lacks-arch", "nobinary-gfx1032"),
        rules.ERROR_MESSAGES["HIP error: invalid device function"],
    ),
    Rule(
        "tensile",
        r"TensileLibrary[^\n]*|Cannot read[^\n]*Tensile",
        "rocBLAS: cannot read the TensileLibrary",
        "rocBLAS found no Tensile kernels for this GPU's target: the card is not supported "
        "by this rocBLAS, or HSA_OVERRIDE_GFX_VERSION names a target it lacks; or it looked "
        "in the wrong folder (LD_LIBRARY_PATH into another ROCm, ROCBLAS_TENSILE_LIBPATH)",
        "use a ROCm/PyTorch build that supports the card (a supported override target of "
        "the same family where there is one); check that the path in the message exists",
        (
            *rules.cite("tensile-missing", "tensile-then-nobinary"),
            "https://github.com/ROCm/rocBLAS/issues/1300",
        ),
        rules.ERROR_MESSAGES["rocBLAS error: Cannot read TensileLibrary.dat"],
    ),
    Rule(
        "no-hip-gpus",
        r"No HIP GPUs are available",
        "No HIP GPUs are available",
        "a ROCm build of PyTorch found no usable GPU: no access to /dev/kfd or /dev/dri "
        "(groups, a container without the devices), HIP_VISIBLE_DEVICES or "
        "ROCR_VISIBLE_DEVICES hiding every GPU, the amdgpu driver not loaded, or a GPU "
        "target the build lacks",
        "run doctor on that machine: its checks tell these apart",
        ("https://github.com/ROCm/hip/issues/3799", f"{_ISSUE}4864"),
        rules.ERROR_MESSAGES["No HIP GPUs are available"],
    ),
    Rule(
        "runtime-segfault",
        r"segfault at [^\n]* in (libamdhip64|libhsa-runtime64)|"
        r"(SIGSEGV|Segmentation fault)[^\n]*(libamdhip64|libhsa-runtime64)|"
        r"\?\? \(\) from [^\n]*(libamdhip64|libhsa-runtime64)",
        "a crash inside the HIP or HSA runtime",
        "the runtime itself crashed: often a GPU it does not support (an integrated GPU "
        "reached first), a user-space ROCm that does not match the kernel driver, or two "
        "copies of libamdhip64 in one process",
        "hide unsupported GPUs with HIP_VISIBLE_DEVICES; check that ROCm and the driver "
        "come from matching releases (doctor's ROCm and driver checks)",
        (
            "https://github.com/ROCm/hip/issues/3282",
            f"{_ISSUE}1973",
            "https://github.com/pytorch/pytorch/issues/141014",
        ),
        ("igpu", "kernel-driver", "arch-mismatch"),
    ),
)
"""Every message :func:`read` knows, the more specific first."""


@dataclass
class Finding:
    """One recognised message in the reader's log."""

    rule: Rule
    line: str
    """The first line it was found on."""
    line_number: int
    details: str = ""
    """What else the log says about it (the code objects, for instance)."""
    related: list[str] = field(default_factory=list)
    """Other lines of the log that belong to it."""


_DEVICE = re.compile(r"(?<![\w-])(amdgcn-amd-amdhsa--\S+) - \[(Found|Not Found)\]")
_BUNDLED = re.compile(r"(?:hipv4|hip)-amdgcn-amd-amdhsa--(\S+) - \[")


def code_objects(text: str) -> tuple[list[str], list[str], list[str]]:
    """From ``AMD_LOG_LEVEL`` output (``hip_code_object.cpp``'s "Devices:" and
    "Bundled Code Objects:" lists): the GPU targets found, those not found, and
    the targets the program carries code objects for."""
    found, missing, bundled = [], [], []
    for line in text.splitlines():
        device = _DEVICE.search(line)
        if device:
            target = device.group(1).removeprefix("amdgcn-amd-amdhsa--")
            (found if device.group(2) == "Found" else missing).append(target)
            continue
        carried = _BUNDLED.search(line)
        if carried and carried.group(1) not in bundled:
            bundled.append(carried.group(1))
    return found, missing, bundled


def _code_object_details(text: str) -> str:
    found, missing, bundled = code_objects(text)
    if not missing:
        return ""
    gone = sorted(set(missing))
    words = f"no code object for {', '.join(gone)}"
    if bundled:
        words += f" (the program carries {', '.join(bundled)})"
    base = {t.split(":")[0] for t in gone}
    if found and base <= rules.IGPU_TARGETS:
        words += (
            f"; {', '.join(sorted(base))} is an integrated GPU beside GPUs that were found: "
            "hide it with HIP_VISIBLE_DEVICES (the indices of the discrete GPUs)"
        )
    return words


def read(text: str) -> list[Finding]:
    """Every message of :data:`RULES` in ``text``, in the order they first appear."""
    lines = text.splitlines()
    findings = []
    for rule in RULES:
        pattern = re.compile(rule.pattern, re.IGNORECASE if rule.id == "runtime-segfault" else 0)
        hits = [(n, ln) for n, ln in enumerate(lines, 1) if pattern.search(ln)]
        if not hits:
            continue
        n, line = hits[0]
        finding = Finding(rule, line.strip()[:300], n)
        if rule.id in ("no-binary", "invalid-device-function"):
            finding.details = _code_object_details(text)
        if rule.id == "kfd-permission" and re.search(r"is member of render group", text):
            finding.details = (
                "the log also says the user is in the render group: then log in again (a new "
                "group applies to new sessions), or, in a container, pass the device and "
                "--group-add render; running usermod again changes nothing"
            )
        finding.related = [ln.strip() for _, ln in hits[1:4]]
        findings.append(finding)
    return sorted(findings, key=lambda f: f.line_number)


def load(path: str) -> tuple[str, str]:
    """The log at ``path`` (``-``: standard input) as text, and where it came from;
    only its last :data:`MAX_BYTES` where it is longer. ``OSError`` for a file that
    cannot be read."""
    if path == "-":
        data = sys.stdin.buffer.read()
        source = "standard input"
    else:
        data = Path(path).read_bytes()
        source = Path(path).name
    if len(data) > MAX_BYTES:
        data = data[-MAX_BYTES:]
        source += f" (its last {MAX_BYTES // 2**20} MiB)"
    return data.decode("utf-8", errors="replace"), source


def to_text(findings: list[Finding], source: str, checks: dict[str, str] | None = None) -> str:
    """The findings as the report's "Your error text" section; ``checks`` maps
    check ids to ``status: message`` on the machine being reported."""
    head = f"Your error text ({source}):"
    if not findings:
        return (
            head
            + "\n  no message the doctor knows (it reads: "
            + ", ".join(r.title for r in RULES)
            + ")"
        )
    out = [head]
    for f in findings:
        out.append(f"  line {f.line_number}: {f.line}")
        out.append(f"    means: {f.rule.title}: {f.rule.causes}")
        if f.details:
            out.append(f"    here: {f.details}")
        out.append(f"    fix: {f.rule.fix}")
        for cid in f.rule.explained_by:
            if checks and cid in checks:
                out.append(f"    check {cid}: {checks[cid]}")
        if f.rule.sources:
            out.append(f"    sources: {', '.join(f.rule.sources)}")
    return "\n".join(out)


def to_dict(findings: list[Finding], source: str) -> dict:
    return {
        "source": source,
        "findings": [
            {
                "id": f.rule.id,
                "title": f.rule.title,
                "line": f.line,
                "line_number": f.line_number,
                "causes": f.rule.causes,
                "details": f.details,
                "fix": f.rule.fix,
                "sources": list(f.rule.sources),
                "explained_by": list(f.rule.explained_by),
            }
            for f in findings
        ],
    }
