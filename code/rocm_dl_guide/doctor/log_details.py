"""What an error text shows beyond the message it was recognised by.

:class:`Rule` is one message :mod:`~rocm_dl_guide.doctor.logs` knows, and
:class:`Finding` one it found. :func:`facts` takes the machine's facts out of
the text: the groups a pasted ``id``, ``groups``, ``getent group`` or
``adduser`` line shows, a container, the GPU targets, environment variables,
WSL. :func:`fill` then gives each finding of
:func:`rocm_dl_guide.doctor.logs.read` the details and the fix for what the
text shows, one function per message (:data:`_DETAILS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import products, rules
from .amd_log import code_objects
from .premises import (
    ROOTLESS,
    driver_fix,
    kfd_missing,
    no_hip_gpus,
    permission_fix,
    where_it_runs,
)
from .words import counted
from .wsl_text import WSL_SIGNS, wsl_fix


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
    fix: str = ""
    """The fix for what this log shows (the rule's own where empty)."""
    premises: list[str] = field(default_factory=list)
    """The facts of the text the fix rests on, as the report prints them ("seen: ...")."""

    @property
    def advice(self) -> str:
        return self.fix or self.rule.fix


@dataclass
class Facts:
    """What the text itself shows about the machine (None or empty: not shown)."""

    member: dict[str, set[str]] = field(default_factory=dict)
    """User -> groups the text shows it in (``id``, ``groups``, ``getent group``,
    ``adduser``, rocminfo's "is member of")."""
    not_member: set[str] = field(default_factory=set)
    """Groups the text shows the user outside of (rocminfo's "is not member of")."""
    pasted: bool = False
    """Whether the groups came from pasted id, groups, getent or adduser output (not
    only from rocminfo's "is member of" line)."""
    container_seen: str = ""
    """What in the text shows a container (a ``docker run`` line, a container's
    prompt, ``/.dockerenv``); empty where nothing does."""
    gfx: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    wsl: bool = False
    group_add: set[str] = field(default_factory=set)
    """The groups a container was started with (``--group-add``), as the text shows."""

    @property
    def container(self) -> bool:
        return bool(self.container_seen)

    @property
    def groups(self) -> set[str] | None:
        """Every group the text shows the user in; None where it shows none."""
        if not self.member:
            return None
        return set().union(*self.member.values())


_ID = re.compile(r"uid=\d+\((\S+?)\) gid=\d+\(\S+?\)(?: groups=(\S+))?")
_GROUPS_OF = re.compile(r"^(\S+) : (.+)$")  # groups USER
_GETENT = re.compile(r"^(render|video):x:\d+:(.*)$")
_MEMBER = re.compile(r"(\S+) is member of (\w+) group")
_NOT_MEMBER = re.compile(r'is not member of "?(\w+)"? group')
_ALREADY = re.compile(r"The user `(\S+?)' is already a member of `(\w+)'")
_PROMPT_GROUPS = re.compile(r"^[#$>] (groups|id -nG)\s*$")
_GFX = re.compile(r"\bgfx(\d{3,4}[a-z]?)\b")
_ENV = re.compile(
    r"(?:^|^(?:[$#>] )?export |^ENV |\s-e |\s--env[= ]|Environment=\"?|os\.environ\[[\"'])"
    r"(HSA_OVERRIDE_GFX_VERSION|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|CUDA_VISIBLE_DEVICES|HSA_ENABLE_DXG_DETECTION)"
    r"(?:[\"']\])?(?: ?[:?]?= ?)(?:\"([^\"\n]*)\"|'([^'\n]*)'|([^\s\"'#]+))"
)
"""A variable set in a shell (``export``), a Makefile (``VAR = "..."``), a Dockerfile
(``ENV``), a container's ``-e``/``--env``, a systemd unit's ``Environment=`` or
Python's ``os.environ["VAR"] = ...``."""
_INLINE_OVERRIDE = re.compile(r"\bHSA_OVERRIDE_GFX_VERSION(?: ?= ?| to )[\"']?(\d+\.\d+\.\d+)\b")
"""The override named with a version in prose ("running it with ...=12.0.1 crashes")."""
_INLINE_VISIBLE = re.compile(r"\b((?:CUDA|HIP|ROCR)_VISIBLE_DEVICES) ?= ?[\"']?(-?[\d,]+)\b")
"""A GPU mask named with its value in a program's own line ("Applied gpu_ids: ...='1'")."""
_GROUP_ADD = re.compile(r"--group-add[= ]\"?([\w-]+)")
_CONTAINER = re.compile(
    r"\b(?:docker|podman|nerdctl) (?:run|exec|compose)\b[^\n]*|--device[= ]/dev/kfd[^\n]*|"
    r"/\.dockerenv|/run/\.containerenv|\b(?:apptainer|singularity) (?:exec|run|shell)\b[^\n]*|"
    r"\b(?:toolbox|distrobox) (?:enter|create|run)\b[^\n]*|\bdistrobox\b[^\n]*|"
    r"\bkubectl exec\b[^\n]*|\bdocker[- ]compose\b[^\n]*|^\W*#?\s*- \"?/dev/kfd:/dev/kfd[^\n]*|"
    r"^\s*root@[0-9a-f]{12}:[^\n]*|\binside (?:a|the|my) (?:docker |podman |lxc )?container\b",
    re.MULTILINE | re.IGNORECASE,
)
"""What shows a container in pasted text: its runtime's command, a device flag, the
runtimes' marker files, a Docker container's prompt (``root@`` and a 12-digit
hexadecimal host name), distrobox named, a Compose file's device entry, or the
reader saying so."""


def facts(text: str) -> Facts:
    """The facts ``text`` shows: groups, a container, GPU targets, variables, WSL."""
    found = Facts()
    lines = text.splitlines()

    def add(user: str, groups, pasted: bool = True) -> None:
        found.member.setdefault(user, set()).update(g for g in groups if g)
        found.pasted = found.pasted or pasted

    for n, raw in enumerate(lines):
        line = raw.strip().strip("`")
        if m := _ID.search(line):
            add(m.group(1), re.findall(r"\((\w+)\)", m.group(2) or ""))
        elif m := _ALREADY.search(line):
            add(m.group(1), [m.group(2)])
        elif m := _MEMBER.search(line):
            add(m.group(1), [m.group(2)], pasted=False)
        elif m := _GETENT.match(line):
            for user in filter(None, m.group(2).split(",")):
                add(user, [m.group(1)])
        elif _PROMPT_GROUPS.match(line) and n + 1 < len(lines) and lines[n + 1].strip():
            add("this user", lines[n + 1].split())
        elif (m := _GROUPS_OF.match(line)) and n and "groups" in lines[n - 1]:
            add(m.group(1), m.group(2).split())
        if m := _NOT_MEMBER.search(line):
            found.not_member.add(m.group(1))
        if m := _ENV.search(line):
            found.env[m.group(1)] = next(v for v in m.groups()[1:] if v is not None)
        elif m := _INLINE_OVERRIDE.search(line):
            found.env.setdefault("HSA_OVERRIDE_GFX_VERSION", m.group(1))
        elif m := _INLINE_VISIBLE.search(line):
            found.env.setdefault(m.group(1), m.group(2))
        found.group_add.update(_GROUP_ADD.findall(line))
        for g in _GFX.findall(line):
            if f"gfx{g}" not in found.gfx:
                found.gfx.append(f"gfx{g}")
    if m := _CONTAINER.search(text):
        found.container_seen = m.group(0).strip()[:80]
    found.wsl = bool(WSL_SIGNS.search(text))
    return found


_DEVICE_TARGET = (
    re.compile(r"for GPU arch\s*:\s*(gfx[0-9a-f]+)"),  # rocBLAS's Tensile message
    re.compile(r"\b(gfx[0-9a-f]+)_\d+\.(?:kdb|HIP|OpenCL)\b"),  # MIOpen's per-GPU databases
    re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)\S* - \[(?:Found|Not Found)\]"),  # AMD_LOG
    re.compile(r"\[SetIsaName\].*amdgcn-amd-amdhsa--(gfx[0-9a-f]+)"),  # MIOpen's device ISA
    re.compile(r"GFX Version:\s*(gfx[0-9a-f]+)"),  # rocm-smi --showproductname
    re.compile(r"^GPU models and configuration:.*?\((gfx[0-9a-f]+)"),  # collect_env
    re.compile(r"gcnArchName\W+(gfx[0-9a-f]+)"),  # torch.cuda.get_device_properties
    re.compile(r"^\s*Name:\s+(gfx[0-9a-f]+)\s*$"),  # rocminfo's agent name
    re.compile(r"\bgpu_type=(gfx[0-9a-f]+)"),  # ollama's GPU discovery
)
"""Lines that name a GPU's own target (not a build's target list, not a variable)."""


def device_targets(text: str) -> list[str]:
    """The gfx targets of GPUs the text shows (rocBLAS's 'for GPU arch', MIOpen's
    ``gfxNNNN_CU.kdb`` databases, ``AMD_LOG_LEVEL``'s device list, rocm-smi's GFX
    Version, collect_env's GPU line, ``gcnArchName``, rocminfo's agent names), in the
    order they first appear. A build's arch list or ``PYTORCH_ROCM_ARCH`` is not a GPU."""
    found: list[str] = []
    for line in text.splitlines():
        for pattern in _DEVICE_TARGET:
            for target in pattern.findall(line.strip()):
                if target not in found:
                    found.append(target)
    return found


def _tensile_details(line: str, seen: Facts) -> tuple[str, str]:
    gfx = re.search(r"for GPU arch\s*:\s*(gfx\w+)", line)
    path = re.search(r"Cannot read\s*(.+?TensileLibrary\S*?\.dat)", line)
    words = []
    if gfx:
        target = gfx.group(1)
        words.append(f"rocBLAS has no Tensile library for {target}")
        if target in rules.NO_OVERRIDE:
            known, index, _ = rules.NO_OVERRIDE[target]
            words.append(
                f"{target}: {known}" + (f"; AMD's wheels for it: {index}" if index else "")
            )
    if path and re.match(r"[A-Za-z]:\\", path.group(1)):
        words.append(
            "the path is the HIP SDK on Windows: its rocBLAS must be the SDK release's own, "
            "with a library built for this GPU"
        )
    if "Illegal seek" in line:
        words.append(
            "since ROCm 5.2 the library is split per target (TensileLibrary_<gfx>.dat); "
            "'Illegal seek' on the old name means none for this target was found: check which "
            "librocblas the program loads (ldd)"
        )
    return "; ".join(words), ""


def _clinfo_details(text: str) -> str:
    counts = [int(n) for n in re.findall(r"^Number of devices:\s+(\d+)", text, re.M)]
    boards = re.findall(r"^\s*Board name:\s+(.+?)\s*$", text, re.M)
    if not counts:
        return ""
    if sum(counts) == 0:
        return "clinfo lists no GPU device: OpenCL sees no usable GPU"
    listed = f"clinfo lists {counted(sum(counts), 'device')}"
    return listed + (f": {', '.join(boards)}" if boards else "")


def _collect_env_details(text: str) -> str:
    def value(key: str) -> str | None:
        m = re.search(rf"^{re.escape(key)}:\s*(.+?)\s*$", text, re.M)
        return m.group(1) if m else None

    torch, rocm = value("PyTorch version"), value("ROCM used to build PyTorch")
    available, gpus = value("Is CUDA available"), value("GPU models and configuration")
    hip = value("HIP runtime version")
    words = []
    if torch:
        words.append(f"PyTorch {torch}")
    if rocm and rocm != "N/A":
        words.append(f"built for ROCm {rocm}")
    elif rocm == "N/A":
        words.append("not a ROCm build (ROCM used to build PyTorch: N/A)")
    if hip and hip != "N/A":
        words.append(f"HIP runtime {hip}")
    if available == "True":
        words.append("it sees the GPU" + (f" {gpus}" if gpus else ""))
    elif available == "False":
        words.append("it sees no GPU")
    return "; ".join(words)


def _amd_smi_details(text: str) -> str:
    words = []
    if "amdgpu not found in modules" in text:
        words.append(
            "amd-smi looks for amdgpu among the loaded modules (/sys/module/amdgpu/initstate): "
            "if amdgpu is built into the kernel it is not found there, and under WSL amd-smi is "
            "not supported"
        )
    elif "Unable to detect any GPU devices" in text:
        words.append("amd-smi found no GPU through the amdgpu driver")
    version = re.search(r"ROCm version: (\S+)", text)
    if version and version.group(1) != "N/A":
        words.append(f"amd-smi reports ROCm {version.group(1)}")
    missing = re.search(r"missing the following required groups: ([\w, ]+)", text)
    if missing:
        words.append(
            f"amd-smi itself wants the groups {missing.group(1)}; other ROCm components may not "
            "need them (AMD's answer): add them where you use amd-smi"
        )
    owners = sorted(set(re.findall(r"owner=\S+?:(\w+)\(\d+\)", text)))
    if owners:
        words.append(f"the device nodes amd-smi needs belong to {', '.join(owners)}")
    statuses = sorted(set(re.findall(r"AMDSMI_STATUS_\w+", text)))
    if statuses:
        words.append(f"statuses: {', '.join(statuses)}")
    if re.search(r"NPS4", text) and "NOT_SUPPORTED" in text:
        words.append(
            "on the MI300X, NPS4 is only compatible with the CPX compute mode (AMD's "
            "partitioning quick start guide)"
        )
    return "; ".join(words)


def _segfault_details(text: str, line: str) -> str:
    words = []
    if re.search(r"^(GPU: )?True\s*$|is_available\(\)\s*:\s*True", text, re.M):
        words.append(
            "it came after PyTorch reported the GPU (is_available True): at or after "
            "the first kernel, not at import"
        )
    elif re.search(r"import torch|\bimport\b", text) or line.startswith(("zsh:", "bash:")):
        words.append("no GPU work is shown before it: a crash at import or start-up")
    archs = re.search(r"get_arch_list\(\)\s*:\s*\[([^\]]*)\]", text)
    hip = re.search(r"torch\.version\.hip\s*:\s*(\S+)", text)
    if archs:
        words.append(f"the build's targets: {archs.group(1)}")
    if hip and hip.group(1) != "None":
        words.append(f"HIP {hip.group(1)}")
    return "; ".join(words)


def _code_object_details(text: str) -> str:
    found, missing, bundled = code_objects(text)
    if not missing:
        return ""
    gone = sorted(set(missing))
    words = f"no code object for {', '.join(gone)}"
    if bundled:
        words += f" (the program carries {', '.join(bundled)})"
    base = {t.split(":")[0] for t in gone}
    igpus = sorted(base & rules.IGPU_TARGETS)
    if igpus and (found or len(base) > len(igpus)):
        words += (
            f"; {', '.join(igpus)} is an integrated GPU beside another GPU: hide it with "
            "HIP_VISIBLE_DEVICES (the indices of the discrete GPUs)"
        )
        rest = sorted(base - set(igpus))
        if rest:
            words += f", and {', '.join(rest)} still needs a build that has it"
    return words


def _no_binary(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details = _code_object_details(text)
    named = products.named_gpus(text)
    if not finding.details and not code_objects(text)[0] and named:
        gpus = "; ".join(g.describe() for g in named)
        finding.details = f"the text names {gpus}: the build needs kernels for that target"
    elif not finding.details and not code_objects(text)[0]:
        finding.details = (
            "the text does not name the GPU's target; run with AMD_LOG_LEVEL=1 to list it"
        )
    return True


def _kfd_permission(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details, finding.fix = permission_fix(seen)
    if re.search(r"^root is not member of|\buid=0\(root\)", text, re.M):  # root, refused
        finding.details = "root is refused /dev/kfd: a root that is not the host's"
        finding.fix = (
            "root in a rootless container or a user namespace is not the host's root, and "
            "joining groups there changes nothing: start it with --device=/dev/kfd "
            f"--device=/dev/dri and the groups; {ROOTLESS}"
        )
    if seen.groups is not None:
        finding.premises.append(f"groups: {', '.join(sorted(seen.groups))}")
    elif seen.not_member:
        finding.premises.append(f"not in: {', '.join(sorted(seen.not_member))} (rocminfo)")
    else:
        finding.premises.append("the text shows no groups: run id -nG")
    finding.premises += where_it_runs(seen)
    return True


def _tensile(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    finding.details, finding.fix = _tensile_details(line, seen)
    return True


def _kfd_mode(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    m = re.match(r"^c([rw-]{9})\s+\d+\s+(\S+)\s+(\S+)", line)
    mode, owner, group = m.groups()
    if mode[3:5] != "--":
        finding.details = f"/dev/kfd belongs to {owner}:{group}, mode {mode}"
        finding.fix = f"members of {group} may open it: check that the user is one (id -nG)"
    else:
        finding.details = (
            f"/dev/kfd belongs to {owner}:{group} and only its owner may open it (mode "
            f"{mode}): no group membership helps"
        )
        finding.fix = (
            "add a udev rule for /dev/kfd in /etc/udev/rules.d/, the line AMD's developer "
            'gave: KERNEL=="kfd", MODE="0660", GROUP="video", TAG+="uaccess"; update the '
            "initramfs, reboot, and be in the video group"
        )
    return True


def _kfd_not_supported(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    gpu = re.search(r"amdgpu: (\S+)\s+not supported in kfd", line)
    finding.details = f"dmesg names the GPU: {gpu.group(1)}" if gpu else ""
    return True


def _kfd_node(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    added = re.findall(r"added device (\w+:\w+)", text)
    finding.details = f"KFD added {counted(len(added), 'device')}: {', '.join(added)}"
    return True


def _missing_library(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    lib = re.search(finding.rule.pattern, line).group(1)
    if "aqlprofile" in lib:
        finding.details = f"{lib} is a profiling library, loaded only where present"
        finding.fix = "not needed to run programs; it is not the cause of another error here"
    elif re.match(r"lib(?:cu(?:blas|dart|dnn|fft|rand|sparse|solver|pti)|nvrtc|nccl|nvidia)", lib):
        finding.details = f"missing: {lib}, a library of NVIDIA's CUDA"
        finding.fix = (
            "a CUDA build of the program or of one of its packages is installed: install its "
            "ROCm build instead (installing CUDA's libraries does not make it use an AMD GPU)"
        )
    else:
        finding.details = f"missing: {lib}"
        mpi = " (OpenMPI's libraries: libopenmpi-dev on Ubuntu)" if "mpi" in lib else ""
        finding.fix = f"install the package that provides {lib}{mpi}, then retry"
    return True


def _amd_smi(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details = _amd_smi_details(text)
    finding.fix = (
        "amd-smi reads the GPUs through the amdgpu driver and /dev/dri: the details say "
        "which part failed; ROCm programs may still run (rocminfo tells)"
    )
    return True


def _clinfo(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details = _clinfo_details(text)
    finding.fix = (
        "no OpenCL GPU: read the lines after it (rocminfo, dmesg) for why"
        if "no GPU device" in finding.details
        else "nothing to fix: OpenCL sees the GPU"
    )
    return True


def _collect_env(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details = _collect_env_details(text)
    finding.fix = (
        "a ROCm build that sees the GPU: any failure lies elsewhere"
        if "sees the GPU" in finding.details and "built for ROCm" in finding.details
        else "install the ROCm build of PyTorch (pytorch.org, the ROCm index)"
        if "not a ROCm build" in finding.details
        else "compare the build's ROCm with the installed one (doctor's PyTorch checks)"
    )
    return True


def _torch_no_gpu(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    prev = text[: text.find(line)] if line in text else text
    if "is_available" not in prev:
        return False
    env = ", ".join(f"{k}={v}" for k, v in seen.env.items())
    finding.details = f"the text sets {env}" if env else ""
    return True


def _wsl(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.details = "; ".join(
        w
        for w in (
            "the runtime found no GPU"
            if re.search(r"hsa_init Failed|possibly no supported GPU", text)
            else "",
            "HSA_ENABLE_DXG_DETECTION is unset"
            if re.search(r"unset HSA_ENABLE_DXG_DETECTION", text)
            else "",
            "libhsa-runtime64.so could not be loaded"
            if "dlopen libhsa-runtime64.so failed" in text
            else "",
        )
        if w
    )
    finding.fix, finding.premises = wsl_fix(text)
    return True


def _gpu_hang(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    signs = ("preemption failed", "Failed to evict process queues", "MODE1 reset", "timeout")
    finding.details = "the kernel log shows: " + ", ".join(x for x in signs if x in text)
    return True


def _smi_gfx(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    listed = re.findall(r"GFX Version:\s*(gfx\w+)", text)
    igpus = sorted({g for g in listed if g in rules.IGPU_TARGETS})
    if not igpus or len(igpus) == len(listed):
        return False
    finding.details = (
        f"rocm-smi lists {len(listed)} GPUs ({', '.join(listed)}); {', '.join(igpus)} is an "
        "integrated GPU beside discrete ones, and ROCm programs see it too"
    )
    return True


def _segfault(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    if "runtime-segfault" in ids:
        return False
    finding.details = _segfault_details(text, line)
    return True


def _runtime_segfault(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    if "hipLaunchKernel" not in text:
        return True
    finding.details = "the backtrace is in hipLaunchKernel: at a kernel launch"
    return True


def _miopen_error(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    reason = re.search(r"MIOpen Error: \S+?:\d+: (.+?)\s*$", text, re.M)
    words = [f"MIOpen says: {reason.group(1)}"] if reason else []
    if seen.gfx:
        words.append(f"GPU target in the log: {', '.join(seen.gfx)}")
    finding.details = "; ".join(words)
    return True


def _miopen_kdb(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    line = finding.line
    db = re.search(r"(gfx\w+?)_(\d+)\.kdb", line)
    if db:
        finding.details = f"{db.group(1)} with {db.group(2)} compute units: not an error"
    return True


def _miopen_user_db(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    path = re.search(r'"([^"]*miopen[^"]*)"', text)
    finding.details = f"the file: {path.group(1)}" if path else ""
    return True


def _driver_not_loaded(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Under WSL no Linux kernel driver belongs there: the WSL finding says what does."""
    if seen.wsl:
        return False
    finding.fix, finding.premises = driver_fix(seen, finding.rule.fix)
    return True


def _where_premises(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """A finding whose fix names both sides already: the premises only."""
    finding.premises = where_it_runs(seen)
    return True


def _kernel_driver(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """A kernel-driver finding: its fix split by where the program runs."""
    finding.fix, finding.premises = driver_fix(seen, finding.rule.fix)
    return True


_DETAILS = {
    "no-binary": _no_binary,
    "invalid-device-function": _no_binary,
    "kfd-permission": _kfd_permission,
    "tensile": _tensile,
    "kfd-mode": _kfd_mode,
    "kfd-not-supported": _kfd_not_supported,
    "kfd-node": _kfd_node,
    "missing-library": _missing_library,
    "amd-smi": _amd_smi,
    "clinfo": _clinfo,
    "collect-env": _collect_env,
    "torch-no-gpu": _torch_no_gpu,
    "wsl": _wsl,
    "gpu-hang": _gpu_hang,
    "smi-gfx": _smi_gfx,
    "segfault": _segfault,
    "runtime-segfault": _runtime_segfault,
    "miopen-error": _miopen_error,
    "miopen-kdb": _miopen_kdb,
    "miopen-user-db": _miopen_user_db,
    "driver-not-loaded": _driver_not_loaded,
    "kfd-missing": kfd_missing,
    "no-hip-gpus": no_hip_gpus,
    "kernel-userspace": _kernel_driver,
    "kfd-invalid-argument": _where_premises,
}
"""Rule id -> what fills a finding of it from the text (False drops the finding)."""


def fill(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Fill the finding's details and fix from the text; False drops it."""
    handler = _DETAILS.get(finding.rule.id)
    return handler(finding, text, seen, ids) if handler else True
