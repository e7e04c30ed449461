"""The reader's own error text: ``doctor --log FILE`` (or ``-`` for stdin).

:func:`read` recognises the messages ROCm setups fail with, in the words the
runtime, rocminfo, rocBLAS and PyTorch print them, and maps each to its
likely causes, the fix and the public reports behind it (:data:`RULES`); the
``AMD_LOG_LEVEL`` lines that list the GPUs and the code objects a program
carries are read too (:func:`code_objects`), which names the GPU that has no
kernels. Each finding also names the doctor's own checks that explain it
(``explained_by``), so the report can show their verdict on this machine.

Facts are taken out of the text too (:func:`facts`): the groups a pasted ``id``,
``groups``, ``getent group`` or ``adduser`` line shows, a container, the GPU
targets and environment variables it names, WSL. A finding's advice rests on
them (:attr:`Finding.fix`): no ``usermod`` where the text shows the user in the
group already, and where a fact is absent the advice says it is unknown.
"""

from __future__ import annotations

import re

from . import products, rules, setup_text
from .log_catalog import catalog_findings, unknown_text
from .log_details import Facts, Finding, Rule, code_objects, device_targets, facts
from .paste import MAX_BYTES, clean, load
from .words import around
from .wsl_text import WSL_SIGNS

__all__ = ["Facts", "Finding", "Rule", "code_objects", "device_targets", "facts", "load", "read"]
__all__ += ["MAX_BYTES"]


_ISSUE = "https://github.com/ROCm/legacy-rocm-build/issues/"


RULES: tuple[Rule, ...] = (
    Rule(
        "kfd-permission",
        r"/dev/kfd[^\n]*(Permission denied|Operation not permitted)",
        "/dev/kfd: permission denied",
        "this user may not open the GPU's compute device: not in the group that owns "
        "/dev/kfd (render, on most systems; video on older ones), or in it only since "
        "this login session began, or a container started without the device or group",
        "check whether this user is in the group that owns /dev/kfd (ls -l /dev/kfd; id -nG): "
        "if not, add it (sudo usermod -aG render,video $USER) and log in again; in a container: "
        "docker run --device=/dev/kfd --device=/dev/dri --group-add render --group-add video",
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
        r"hipErrorNoBinaryForGpu|No compatible code objects found for|Missing CO for these ISAs",
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
            *rules.cite("tensile-split", "tensile-hip-sdk"),
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
        (
            "https://github.com/ROCm/hip/issues/3799",
            f"{_ISSUE}4864",
            *rules.cite("docker-desktop-vm"),
        ),
        rules.ERROR_MESSAGES["No HIP GPUs are available"],
    ),
    Rule(
        "runtime-segfault",
        r"(segfault at|general protection fault)[^\n]* in (libamdhip64|libhsa-runtime64)|"
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
    Rule(
        "kfd-missing",
        r"/dev/kfd[^\n]*[Nn]o such file or directory",
        "/dev/kfd: no such device",
        "there is no /dev/kfd here: inside a container the devices were not passed in; on a "
        "host the amdgpu kernel driver is not loaded",
        "in a container: docker run --device=/dev/kfd --device=/dev/dri (Apptainer: "
        "--bind=/dev/kfd,/dev/dri); on a host: check that amdgpu is loaded (lsmod | grep amdgpu)",
        rules.cite("kfd-not-passed", "docker"),
        ("device-access", "kernel-driver"),
    ),
    Rule(
        "kfd-mode",
        r"^c[rw-]{9}\s+\d+\s+\S+\s+\S+\s+\d+,\s*\d+ .*\bkfd$",
        "/dev/kfd's owner and mode (ls -l)",
        "the listing shows who may open /dev/kfd",
        "see here",
        rules.cite("kfd-udev", "groups"),
        ("device-access",),
    ),
    Rule(
        "kfd-not-supported",
        r"not supported in kfd",
        "the kernel driver does not support this GPU (dmesg)",
        "the amdgpu driver's KFD (the compute interface ROCm uses) refused the GPU: a GPU "
        "generation ROCm does not support; group membership and ROCm's version do not change it",
        "use a GPU that ROCm supports (this guide's compatibility chapter lists them); the GPU "
        "still works for graphics",
        rules.cite("kfd-not-supported"),
        ("kernel-driver",),
    ),
    Rule(
        "kernel-userspace",
        r"Incompatible kernel and userspace",
        "HSA: incompatible kernel and userspace",
        "the HSA runtime disabled a GPU because the kernel driver is older than this ROCm "
        "user space expects",
        "install the amdgpu driver of the same ROCm release (amdgpu-dkms), or a ROCm release "
        "that supports the running driver; then reboot (the message says: Upgrade amdgpu)",
        rules.cite("kernel-userspace"),
        ("kernel-driver",),
    ),
    Rule(
        "driver-not-loaded",
        r"ROCk module is NOT loaded",
        "the amdgpu kernel driver is not loaded",
        "rocminfo found no loaded amdgpu module: no AMD GPU, the driver not installed for this "
        "kernel, or not loaded yet (in a virtual machine, after an install without reboot)",
        "sudo modprobe amdgpu, then dmesg | grep amdgpu; if the module is missing, install "
        "amdgpu-dkms for the running kernel",
        rules.cite("driver-not-loaded"),
        ("kernel-driver",),
    ),
    Rule(
        "kfd-node",
        r"kfd kfd: amdgpu: added device",
        "GPUs the kernel driver added to ROCm (dmesg)",
        "each 'added device' line is a GPU ROCm programs will see, integrated GPUs included",
        "if one is an integrated GPU, hide it from ROCm programs with HIP_VISIBLE_DEVICES "
        "(the indices of the discrete GPUs)",
        rules.cite("kfd-node-igpu", "igpu-hip-visible"),
        ("igpu",),
    ),
    Rule(
        "invalid-isa",
        r"HSA_STATUS_ERROR_INVALID_ISA|HSA_ERROR_INVALID_ISA",
        "HSA_STATUS_ERROR_INVALID_ISA",
        "the runtime was given code for another instruction set than the GPU's: most often "
        "HSA_OVERRIDE_GFX_VERSION makes it load kernels of a target the GPU cannot run",
        "unset HSA_OVERRIDE_GFX_VERSION, or set it to the GPU's own family; use a build "
        "that has the GPU's target",
        rules.cite("invalid-isa", "no-override-gfx1150"),
        ("hsa-override", "arch-mismatch"),
    ),
    Rule(
        "miopen-kdb",
        r"(Missing|Unable to read) system database file",
        "MIOpen: no precompiled kernel database for this GPU (a warning)",
        "not an error: MIOpen ships no precompiled kernels for this GPU (or the kernels "
        "package is not installed), so it compiles them on first use and caches them per user",
        "nothing to fix: the first runs are slower; for a supported GPU the miopenkernels "
        "package for its target removes the wait",
        rules.cite("miopen-kdb-warning", "miopen-kdb-unsupported"),
    ),
    Rule(
        "miopen-user-db",
        r"boost::filesystem[^\n]*|filesystem_error",
        "MIOpen: its per-user database or cache could not be written",
        "MIOpen keeps its user database (~/.config/miopen) and its kernel cache "
        "(~/.cache/miopen) in the home directory; it could not create or change the file the "
        "message names",
        "make the folder the message names writable by this user; or point the user database "
        "at a writable folder with MIOPEN_USER_DB_PATH, and turn the kernel cache off with "
        "MIOPEN_DISABLE_CACHE=1 (MIOpen's tuning and kernel cache pages)",
        rules.cite("miopen-user-db", "miopen-cache", "miopen-user-db-crash"),
    ),
    Rule(
        "miopen-error",
        r"MIOpen(\(HIP\))?: Error|MIOpen Error|miopenStatus\w+Error",
        "MIOpen error",
        "MIOpen (convolutions, pooling, normalisation) failed; the line names its source "
        "file and reason",
        "rerun with MIOPEN_ENABLE_LOGGING=1 MIOPEN_LOG_LEVEL=6 to see the failing call; check "
        "the GPU's target against this ROCm (doctor's GPU checks)",
        rules.cite("miopen-comgr", "miopen-params"),
        ("arch-mismatch",),
    ),
    Rule(
        "missing-library",
        r"([\w.+-]+\.so[\w.]*): cannot open shared object file",
        "a shared library was not found",
        "a program or Python module asked for a library that is not installed or not on the "
        "library path",
        "see here",
        rules.cite("missing-library", "aqlprofile"),
    ),
    Rule(
        "hip-platform",
        r"HIP_PLATFORM=(hcc|nvcc) is deprecated",
        "HIP_PLATFORM: a deprecated value (a warning)",
        "only a warning: hcc and nvcc are the old names of the HIP platforms",
        "export HIP_PLATFORM=amd (nvidia for NVIDIA) where the build sets it",
        rules.cite("hip-platform", "hip-platform-docs"),
    ),
    Rule(
        "amd-smi",
        r"ERROR:root:Unable to|AMDSMI_STATUS_\w+|User is missing the following required groups"
        r"|Permission needed to access required GPU device node",
        "amd-smi could not read the GPUs",
        "amd-smi (AMD SMI) failed; the line says where: the driver, a device node's "
        "permissions, or a setting the GPU refused",
        "see here",
        rules.cite("amdsmi-builtin", "amdsmi-wsl", "amdsmi-groups", "mi300x-partition-quickstart"),
        ("partitions", "kernel-driver"),
    ),
    Rule(
        "clinfo",
        r"^Number of devices:\s+\d+",
        "clinfo: the OpenCL devices",
        "clinfo lists the GPUs ROCm's OpenCL runtime sees",
        "see here",
        rules.cite("clinfo-no-devices"),
    ),
    Rule(
        "collect-env",
        r"^ROCM used to build PyTorch:",
        "PyTorch's collect_env report",
        "the build and what it saw, as torch.utils.collect_env prints them",
        "see here",
        rules.cite("collect-env", "hip-notes"),
        ("pytorch-build", "torch-sees-gpu"),
    ),
    Rule(
        "torch-no-gpu",
        r"^(GPU: )?False\s*$",
        "torch.cuda.is_available() is False, with no message",
        "PyTorch found no usable GPU and said nothing more: a CUDA or CPU-only build, no "
        "access to /dev/kfd, HIP_VISIBLE_DEVICES hiding the GPUs, or a target the build lacks",
        "python -c 'import torch; print(torch.version.hip)' (no version: not a ROCm build); "
        "then run doctor on that machine, whose checks tell the other causes apart",
        rules.cite("hip-notes", "pypi-is-cuda"),
        rules.ERROR_MESSAGES[
            "Torch not compiled with CUDA enabled / torch.cuda.is_available() is False"
        ],
    ),
    Rule(
        "smi-gfx",
        r"GFX Version:\s*gfx",
        "the GPU targets rocm-smi lists",
        "rocm-smi --showproductname names each GPU's target",
        "hide the integrated GPU from ROCm programs with HIP_VISIBLE_DEVICES (the indices of "
        "the discrete GPUs)",
        rules.cite("igpu-hip-visible", "igpu-device0"),
        ("igpu",),
    ),
    Rule(
        "amdgpu-probe",
        r"amdgpu\S*:? probe of \S+ failed with error -?\d+|probe with driver amdgpu failed",
        "amdgpu could not take the GPU (probe failed)",
        "the kernel driver gave up on the GPU while setting it up; the lines before it in the "
        "kernel log say at which step (firmware, IP discovery, PSP, SMU); error -22 is "
        "EINVAL, -2 a missing file (often firmware), -110 a timeout",
        "collect the whole kernel log from boot (sudo dmesg -T | grep -iE 'amdgpu|drm'), the "
        "kernel (uname -r) and the firmware package's version; a GPU newer than the kernel "
        "or its firmware needs a newer kernel or linux-firmware",
        ("https://github.com/torvalds/linux/blob/master/drivers/base/dd.c",),
        ("kernel-driver",),
    ),
    Rule(
        "dkms-build",
        r"Bad return status for module build on kernel|Building module\(s\)\.*\s*\(?bad exit",
        "amdgpu-dkms: the kernel driver did not build for this kernel",
        "DKMS compiles amdgpu-dkms against each installed kernel; it failed, most often because "
        "the kernel is newer (or older) than the kernels this driver release supports",
        "read the make.log the message names; compare the running kernel (uname -r) with the "
        "kernels the release lists; a distribution kernel's own amdgpu driver runs ROCm too: "
        "install ROCm without the DKMS module (amdgpu-install -y --usecase=rocm --no-dkms), "
        "or boot a kernel the release supports",
        (
            "https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.0/install/"
            "amdgpu-install.html",
        ),
        ("kernel-driver",),
    ),
    Rule(
        "torch-oom",
        r"(HIP|CUDA) out of memory\. Tried to allocate",
        "PyTorch: the GPU's memory (VRAM) is full",
        "the allocation did not fit in the GPU's memory: the model, the batch or image size, "
        "activations, or other processes on the GPU; not a driver or ROCm fault",
        "use a smaller batch or resolution, 16-bit weights, or the program's low-VRAM options; "
        "watch rocm-smi --showmeminfo vram while it runs; where reserved but unallocated memory "
        "is large, PYTORCH_HIP_ALLOC_CONF=expandable_segments:True (PyTorch's HIP notes)",
        rules.cite("hip-notes"),
    ),
    Rule(
        "smi-runtime-pm",
        r"Expected integer value from monitor",
        "rocm-smi: a GPU's monitor files could not be read (runtime power management)",
        "rocm-smi reads temperature, power and clocks from each GPU's hwmon files; a GPU that "
        "idles in runtime power management (its low-power state, BACO) answers none of them, "
        "so rocm-smi prints this and N/A; not a fault of the GPU",
        "read each AMD GPU's state: cat /sys/class/drm/card*/device/power/runtime_status "
        "(suspended or auto: asleep; card0 may be a board's own video chip, not an AMD GPU); "
        "wake them with echo on | sudo tee /sys/bus/pci/drivers/amdgpu/*/power/control, then "
        "run rocm-smi again; to keep them awake, boot with amdgpu.runpm=0",
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/4878",
            "https://github.com/ROCm/rocm-systems/pull/2094",
        ),
    ),
    Rule(
        "iommu",
        r'Missing "iommu=pt"',
        "RCCL: iommu=pt missing from the kernel command line",
        "RCCL warns that the kernel command line lacks iommu=pt, which 'can lead to system "
        "instability or hang'; AMD's IOMMU page recommends passthrough mode (iommu=pt) for "
        "AMD Instinct accelerators and Radeon GPUs",
        "add iommu=pt to the kernel command line (with GRUB: GRUB_CMDLINE_LINUX in "
        "/etc/default/grub, then update-grub) and reboot",
        rules.cite("iommu-pt", "iommu-pt-amd"),
    ),
    Rule(
        "gpu-hang",
        r"preemption failed|MODE1 reset|ring \S+ timeout|GPU reset begin",
        "the GPU hung and the driver reset it (dmesg)",
        "a kernel on the GPU stopped responding and amdgpu reset the GPU; the cause is not in "
        "these lines",
        "keep the whole kernel log of a hang (journalctl -b -1 | grep amdgpu after the "
        "reboot); check that the driver and ROCm come from matching releases",
        rules.cite("gpu-hang", "kfd-node-igpu"),
        ("kernel-driver",),
    ),
    Rule(
        "wsl",
        "(?i)" + WSL_SIGNS.pattern,
        "ROCm under WSL 2",
        "the text shows WSL: the GPU is reached through /dev/dxg and AMD's Windows driver, not "
        "amdgpu in Linux, and each ROCm release has its own WSL recipe, or none",
        "see here",
        rules.cite("wsl-librocdxg", "wsl-dxg-detection"),
        ("wsl",),
    ),
    Rule(
        "segfault",
        r"segmentation fault",
        "a segmentation fault (no library named)",
        "the process crashed; the message alone does not say where: a crash in the GPU "
        "runtime, a library mismatch, or a GPU the installed ROCm does not support",
        "rerun with AMD_LOG_LEVEL=4 AMD_SERIALIZE_KERNEL=3 AMD_SERIALIZE_COPY=3 and give doctor "
        "that log (doctor --log); a backtrace (gdb) names the library",
        rules.cite("segfault-log-level", "segfault-unsupported-gfx"),
        ("arch-mismatch", "kernel-driver"),
    ),
)
RULES += setup_text.RULES
"""Every message :func:`read` knows, the more specific first; then the setups the
text shows (:mod:`~rocm_dl_guide.doctor.setup_text`)."""


def read(text: str) -> list[Finding]:
    """Every message of :data:`RULES` in ``text``, in the order they first appear,
    with what the text shows about each (:func:`facts`) in its details and fix."""
    text = clean(text)
    lines = text.splitlines()
    seen = facts(text)
    findings = []
    for rule in RULES:
        flags = re.IGNORECASE if rule.id in ("runtime-segfault", "segfault") else 0
        pattern = re.compile(rule.pattern, flags)
        hits = [(n, ln) for n, ln in enumerate(lines, 1) if pattern.search(ln.strip())]
        if not hits:
            continue
        n, line = hits[0]
        finding = Finding(rule, around(line.strip(), pattern.search(line.strip())), n)
        finding.related = [ln.strip() for _, ln in hits[1:4]]
        findings.append(finding)
    ids = {f.rule.id for f in findings}
    if seen.pasted:
        shown = Finding(GROUPS_RULE, "", 0)
        shown.details = "; ".join(
            f"{user}: {', '.join(sorted(groups))}" for user, groups in seen.member.items()
        )
        findings.append(shown)
    findings = [f for f in findings if f.rule is GROUPS_RULE or setup_text.fill(f, text, seen, ids)]
    findings += catalog_findings(lines, {f.line_number for f in findings})
    findings = setup_text.finish(findings + gpu_findings(text, seen), text, seen, ids)
    return sorted(findings, key=lambda f: f.line_number)


def gpu_findings(text: str, seen: Facts) -> list[Finding]:
    """The GPUs the text names, each with its chip's own target
    (:func:`products.named_gpus`), and one finding per GPU shown as another target
    than its chip's: ``HSA_OVERRIDE_GFX_VERSION`` at work, set or left over."""
    gpus = products.named_gpus(text)
    if not gpus:
        return []
    named = Finding(GPUS_RULE, "", 0)
    named.details = "; ".join(g.describe() for g in gpus)
    out = [named]
    for gpu in products.masked(gpus):
        found = Finding(MASKED_RULE, "", 0)
        value = seen.env.get("HSA_OVERRIDE_GFX_VERSION")
        setting = f"HSA_OVERRIDE_GFX_VERSION={value}" if value else "HSA_OVERRIDE_GFX_VERSION"
        found.details = (
            f"the text shows {gpu.name} as {gpu.shown_gfx}, but its chip is {gpu.gfx}: "
            f"{setting} makes rocminfo and every HIP program report and run it as "
            f"{gpu.shown_gfx}, with {gpu.shown_gfx}'s kernels"
        )
        found.fix = (
            f"find where {setting.split('=')[0]} is set (env | grep HSA_OVERRIDE; the shell's "
            f"profile, a service file, a container's -e) and unset it; then check {gpu.gfx}, "
            "the real target, against the build (doctor's GPU checks)"
        )
        found.premises = [f"the text prints {gpu.shown_gfx} beside {gpu.name}"]
        out.append(found)
    return out


GROUPS_RULE = Rule(
    "groups",
    "",
    "the groups the text shows",
    "pasted id, groups, getent group or adduser output, or rocminfo's membership line",
    "advice about /dev/kfd rests on these groups",
    rules.cite("groups", "groups-docker-terminal", "groups-already-member", "groups-rootless"),
    ("device-access",),
)
"""The finding for groups shown in the text (no pattern: :func:`facts` reads them)."""

GPUS_RULE = Rule(
    "gpus",
    "",
    "the GPUs the text names",
    "each GPU named by product or PCI ID, with its chip's own target (libdrm's amdgpu.ids, "
    "pci.ids, ROCm's tables)",
    "advice about targets below speaks of these",
    ("https://gitlab.freedesktop.org/mesa/drm/-/blob/main/data/amdgpu.ids",),
    ("arch-mismatch", "gpu-support"),
)
"""The finding for GPUs named in the text (no pattern: :mod:`products` reads them)."""

MASKED_RULE = Rule(
    "override-masks-target",
    "",
    "a GPU shown as another target than its chip's",
    "HSA_OVERRIDE_GFX_VERSION replaces the target the runtime reports and loads kernels "
    "for; rocminfo prints the override's target, so the real one is the chip's",
    "unset HSA_OVERRIDE_GFX_VERSION",
    rules.cite("override-what", "override-wrong-kernels"),
    ("hsa-override", "arch-mismatch"),
)
"""A GPU the text shows as a target its chip is not (no pattern: :mod:`products`)."""


def to_text(
    findings: list[Finding], source: str, checks: dict[str, str] | None = None, text: str = ""
) -> str:
    """The findings as the report's "Your error text" section; ``checks`` maps
    check ids to ``status: message`` on the machine being reported."""
    head = f"Your error text ({source}):"
    if not findings:
        return head + "\n  " + unknown_text(clean(text))
    out = [head]
    for f in findings:
        out.append(f"  line {f.line_number}: {f.line}" if f.line else "  in the text:")
        out.append(f"    means: {f.rule.title}: {f.rule.causes}")
        if f.details:
            out.append(f"    here: {f.details}")
        out.append(f"    fix: {f.advice}")
        if f.premises:
            out.append(f"    seen: {'; '.join(f.premises)}")
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
                "fix": f.advice,
                "premises": list(f.premises),
                "sources": list(f.rule.sources),
                "explained_by": list(f.rule.explained_by),
            }
            for f in findings
        ],
    }
