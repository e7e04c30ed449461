"""How the program was set up, as the reader's text shows it: what it installed,
how it starts, and what it was given.

:mod:`~rocm_dl_guide.doctor.logs` reads runtime messages. Many failures start
earlier, and the text shows that too: a C++ standard header is missing where HIP code is compiled, a
virtual environment's ``amdsmi`` package shadows ROCm's own, a variable was
exported in a shell but the program runs as a systemd service, an override that
is not a version, a Compose file whose ``/dev/kfd`` line is commented out, or an
integrated GPU listed beside the discrete one. Each rule here is a class of such
setups, recognised by what any report of it prints (:data:`RULES`), and each
finding says what in the text it rests on.
"""

from __future__ import annotations

import re

from . import (
    compat_data,
    log_details,
    products,
    rules,
    setup_devices,
    setup_packages,
    setup_versions,
)
from .log_details import Facts, Finding, Rule, device_targets
from .wsl_text import release_in

_GPU_VARS = "HSA_OVERRIDE_GFX_VERSION|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES"

LLVM_PROCESSORS = "https://llvm.org/docs/AMDGPUUsage.html#processors"
"""LLVM's AMDGPU processor table: each target, and whether it is a dGPU or an APU."""

RULES: tuple[Rule, ...] = (
    Rule(
        "not-a-rocm-build",
        r"Found no NVIDIA driver on your system|Torch not compiled with CUDA enabled|"
        r"\btorch[- =]=?=?\s*\d+\.\d+\.\d+\+cu\d{3}\b",
        "PyTorch is not a ROCm build",
        "a CUDA build (its error names NVIDIA's driver; its version ends in +cuNNN) or a "
        "CPU-only build ('not compiled with CUDA') runs on this AMD machine: pip installs "
        "PyPI's default build, CUDA's, unless it is given a ROCm index, and an installer or an "
        "image may pull that in",
        "check python -c 'import torch; print(torch.__version__, torch.version.hip)' (None: "
        "not a ROCm build); install a ROCm build matching the installed ROCm: pip install torch "
        "--index-url https://download.pytorch.org/whl/rocmX.Y, or AMD's wheels from "
        "repo.radeon.com; in an image, its ROCm tag",
        (*rules.cite("pypi-is-cuda", "hip-notes"), "https://pytorch.org/get-started/locally/"),
        ("pytorch",),
    ),
    Rule(
        "glibcxx-too-old",
        r"GLIBCXX_[\d.]+' not found \(required by \S*lib(?:hsa-runtime64|amdhip64|rocm|roc|hip)",
        "a ROCm library needs a newer C++ runtime than the one loaded",
        "a ROCm library was built against a newer libstdc++ than the system or container "
        "provides; under Apptainer, --rocm binds the host's ROCm libraries "
        "(/.singularity.d/libs) into a container whose libstdc++ is older",
        "use ROCm libraries that match the system they run on: in a container, its own ROCm "
        "(Apptainer: drop --rocm and bind only the devices, --bind /dev/kfd,/dev/dri), or a "
        "newer image; outside one, the ROCm release built for this distribution",
        ("https://apptainer.org/docs/user/latest/gpu.html",),
        ("rocm",),
    ),
    Rule(
        "std-header-missing",
        r"fatal error: '[a-z_]+' file not found",
        "a C++ standard header not found while compiling GPU code",
        "clang (hipcc, and HIPRTC/comgr when MIOpen or PyTorch compile kernels at run time) "
        "uses the C++ standard library of the newest GCC it finds; that GCC's libstdc++ "
        "headers are not installed (on Ubuntu 22.04, gcc-12 present without libstdc++-12-dev "
        "is the usual case)",
        "install the headers of the GCC clang selects: /opt/rocm/llvm/bin/clang -v prints "
        "'Selected GCC installation: .../N'; then sudo apt install libstdc++-N-dev (or g++-N)",
        (
            "https://github.com/ROCm/hip/issues/3406",
            "https://github.com/ggml-org/llama.cpp/issues/6523",
            "https://github.com/llvm/llvm-project/pull/122155",
        ),
    ),
    Rule(
        "amdsmi-shadowed",
        r"site-packages/amdsmi/",
        "the amdsmi Python package of an environment, not ROCm's own",
        "the amdsmi module came from a Python environment's site-packages (pip's amdsmi "
        "package), not from the ROCm install; its ctypes wrapper must match the installed "
        "libamd_smi.so, and a package made for another ROCm release calls functions that "
        "library lacks or has changed",
        "install the package that ships with the installed ROCm into that environment: pip "
        "uninstall amdsmi, then pip install /opt/rocm/share/amd_smi; or run amd-smi outside it",
        (
            "https://rocm.docs.amd.com/projects/amdsmi/en/latest/install/install.html",
            "https://docs.vllm.ai/en/latest/getting_started/installation/gpu.html",
        ),
    ),
    Rule(
        "env-not-in-service",
        rf"^(?:export )?(?:{_GPU_VARS})=",
        "a GPU variable set in a shell, for a program that runs as a systemd service",
        "a systemd service (ollama's, for one) starts with the environment of its unit, not "
        "of a login shell: what .bashrc or .profile exports never reaches it",
        "set it in the unit: sudo systemctl edit SERVICE, add [Service] and "
        'Environment="NAME=VALUE", then sudo systemctl daemon-reload and sudo systemctl '
        "restart SERVICE; systemctl show SERVICE -p Environment shows what it gets",
        (
            "https://github.com/ollama/ollama/blob/main/docs/faq.md",
            "https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html",
        ),
        ("hsa-override",),
    ),
    Rule(
        "override-not-a-version",
        r"HSA_OVERRIDE_GFX_VERSION",
        "HSA_OVERRIDE_GFX_VERSION set to something that is not a version",
        "the runtime reads the variable as three numbers, major.minor.stepping (11.0.0 runs "
        "a GPU as gfx1100, 10.3.0 as gfx1030); any other value names no target. A script that "
        "fills it from a GPU-detection step passes that step's error text on when detection "
        "fails",
        "unset it, or set major.minor.stepping of a target the real GPU can run (doctor's GPU "
        "checks say which, and whether it needs one at all)",
        rules.cite("override-what"),
        ("hsa-override",),
    ),
    Rule(
        "container-group-unknown",
        r"Unable to find group [\w-]+: no matching entries in group file",
        "a container's group that its image does not have",
        "Docker and Podman look a --group-add name (Compose's group_add:) up in the image's "
        "/etc/group, not the host's; the image has no group of that name, so the container "
        "does not start",
        "pass the host's group by its number (GID): --group-add $(getent group NAME | cut -d: "
        "-f3), run on "
        'the host (Compose: group_add: ["NUMBER"]); the GPU needs only the groups that own '
        "/dev/kfd and /dev/dri (render, video): drop any other, or use the image's own name for "
        "it",
        (
            "https://docs.docker.com/reference/cli/docker/container/run/#group-add",
            *rules.cite("docker-group-add-render"),
        ),
        ("device-access",),
    ),
    Rule(
        "no-such-group",
        r"group '?(?:render|video)'? does not exist",
        "the group to join does not exist on this system",
        "systems older than the render group (Ubuntu before 20.04, for one) give /dev/kfd and "
        "/dev/dri to video; there is no render group to join",
        "ls -l /dev/kfd /dev/dri/renderD* shows the group that owns them; join that one: sudo "
        "usermod -aG video $USER, then log out and in again",
        rules.cite("groups"),
        ("device-access",),
    ),
    Rule(
        "ollama-unsupported-target",
        r"amdgpu is not supported \(supported types:",
        "ollama: the GPU's target is not among its ROCm build's",
        "ollama's ROCm libraries carry kernels for the targets it lists; gpu_type is this "
        "GPU's, which is not among them, so ollama runs on the CPU",
        "where the GPU's family has a supported sibling target, set HSA_OVERRIDE_GFX_VERSION in "
        "ollama's own environment (its service: sudo systemctl edit ollama, "
        'Environment="HSA_OVERRIDE_GFX_VERSION=VALUE"; by hand: before ollama serve); doctor\'s '
        "GPU check below names the value for this target, or says there is none (then an "
        "ollama build that lists the target, or a Vulkan backend)",
        ("https://github.com/ollama/ollama/blob/main/docs/gpu.md", *rules.cite("override-what")),
        ("gpu-support", "hsa-override"),
    ),
    Rule(
        "xcp-partition-devices",
        r"\bamdgpu_xcp[._]\d+",
        "an MI300 compute partition's own device (amdgpu_xcp)",
        "in a compute partition mode other than SPX the amdgpu driver registers a platform "
        "device, amdgpu_xcp.N, with its own DRM card and render node for each partition "
        "beyond the first of each GPU; they are not PCI devices, so a tool that counts GPUs by "
        "PCI device, or looks for another name, sees fewer GPUs than rocminfo",
        "count the partitions by amd-smi static --partition (or ls -d "
        "/sys/devices/platform/amdgpu_xcp.*); rocminfo lists each partition as a GPU agent",
        (
            "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdgpu/amdgpu_xcp.c",
            "https://rocm.docs.amd.com/projects/amdsmi/en/latest/how-to/amdsmi-cli-tool.html",
        ),
    ),
    Rule(
        "gpu-passthrough",
        r"Kernel driver in use: vfio-pci|\bisolated (?:GPU|card)s?\b|"
        r"\b(?:GPU|card)\b[^.\n]{0,30}\b(?:is|was|has been|are) isolated\b",
        "a GPU isolated for a virtual machine",
        "a GPU isolated (reserved) for passthrough is bound to vfio-pci at boot, not to amdgpu: "
        "the host has no /dev/kfd or render node for it, so neither the host nor its containers "
        "can use it",
        "to use it on the host or in its containers, stop isolating it (TrueNAS: its isolated "
        "GPU setting; elsewhere, drop its ID from vfio-pci.ids and reboot), so that amdgpu "
        "binds it (lspci -nnk -d 1002: shows 'Kernel driver in use: amdgpu'); then pass "
        "/dev/kfd and /dev/dri to the container",
        ("https://docs.kernel.org/driver-api/vfio.html",),
        ("kernel-driver", "device-access"),
    ),
    Rule(
        "container-device-relative",
        r"""^[+`]?\s*-\s*["']?dev/(?:kfd|dri)\b""",
        "a container's GPU device given without its leading slash",
        "a Compose devices: entry dev/kfd or dev/dri is a path relative to the folder Compose "
        "starts in, not the device: the container gets no GPU device unless that folder is /",
        "write the device paths in full: - /dev/kfd and - /dev/dri, then recreate the "
        "container: docker compose up -d --force-recreate",
        ("https://docs.docker.com/reference/compose-file/services/#devices",),
        ("device-access",),
    ),
    Rule(
        "container-device-commented",
        r"""^`?#+\s*-\s*["']?/dev/(?:kfd|dri)\b""",
        "a container's GPU device entry commented out",
        "a Compose file's devices: entry for /dev/kfd or /dev/dri starts with #, so the "
        "container gets no GPU device: ROCm inside it finds no GPU (empty GPU detection, no "
        "HIP GPUs, rocminfo failing)",
        "uncomment the entries (devices: - /dev/kfd:/dev/kfd and - /dev/dri:/dev/dri, and "
        "group_add: video and render), then recreate the container: docker compose up -d "
        "--force-recreate",
        (
            "https://docs.docker.com/reference/compose-file/services/#devices",
            "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html",
        ),
        ("device-access",),
    ),
)
RULES += setup_devices.RULES + setup_packages.RULES
"""Setups the text shows, one class each, the more specific first (with
:mod:`~rocm_dl_guide.doctor.setup_devices`' device requests and compilers, and
:mod:`~rocm_dl_guide.doctor.setup_packages`' packages)."""

_SERVICE = re.compile(
    r"systemd\[1\]: Started ([^\n.]+)|journalctl -u (\S+)|systemctl \w+ ([\w@.-]+)|"
    r"/etc/systemd/system/([\w@.-]+\.service)",
)


def _std_header(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    header = re.search(r"fatal error: '([a-z_]+)' file not found", finding.line)
    runtime = re.search(r"HIPRTC|hiprtc|comgr", text)
    where = "at run time (HIPRTC/comgr)" if runtime else "by hipcc/clang"
    finding.details = f"<{header.group(1)}> is not found when GPU code is compiled {where}"
    return True


def _amdsmi(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    env = re.search(r"(/\S*?/site-packages)/amdsmi/", text)
    rocm = re.search(r"(/opt/rocm[\w.-]*)/libexec/amdsmi_cli", text)
    release = release_in(text)
    words = [f"amdsmi was imported from {env.group(1)}"] if env else []
    if rocm:
        words.append(f"by the amd-smi of {rocm.group(1)}")
    if release:
        words.append(f"(ROCm {release})")
    finding.details = " ".join(words)
    if rocm:
        finding.fix = (
            f"install the package of that ROCm into the environment: pip uninstall amdsmi, then "
            f"pip install {rocm.group(1)}/share/amd_smi"
            + "; or run amd-smi outside the environment"
        )
    return True


def _service(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Only where the text shows a systemd service too (otherwise the export is fine),
    and no container (whose variables come from its -e options)."""
    service = _SERVICE.search(text)
    if not service or seen.container:
        return False
    name = next(g for g in service.groups() if g).strip()
    variable = finding.line.removeprefix("export ").split("=")[0]
    value = seen.env.get(variable, "VALUE")
    unit = name.removesuffix(".service") if " " not in name else "SERVICE"
    finding.premises = [f"a systemd service (the text shows: {service.group(0)[:60]})"]
    finding.details = f"{variable} is exported in a shell; the program runs as {name}"
    finding.fix = (
        f"set it in the unit: sudo systemctl edit {unit}, add [Service] and "
        f'Environment="{variable}={value}", then sudo systemctl daemon-reload and sudo '
        f"systemctl restart {unit}; systemctl show {unit} -p Environment shows what it gets"
    )
    return True


def _not_a_version(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    value = seen.env.get("HSA_OVERRIDE_GFX_VERSION")
    if value is None or rules.override_target(value) or value.startswith(("$", "%", "<", "{")):
        return False  # a version, or a shell's variable or a placeholder the text leaves open
    finding.details = f'the text sets HSA_OVERRIDE_GFX_VERSION to "{value}"'
    gpus = products.named_gpus(text)
    if gpus:
        named = ", ".join(f"{g.name} ({g.gfx})" for g in gpus)
        finding.fix = f"{finding.rule.fix}; the text names {named}"
    return True


def _commented_device(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    finding.premises = [f"a container (the text shows: {finding.line.strip('`')[:60]})"]
    return True


def _group_unknown(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    name = re.search(r"Unable to find group ([\w-]+)", finding.line).group(1)
    finding.details = f"the image has no group named {name}"
    gpu_group = name in ("render", "video")
    finding.fix = (
        f"pass the host's {name} group by its number (GID): --group-add $(getent group {name} "
        f"| cut -d: "
        f'-f3), run on the host (Compose: group_add: ["NUMBER"])'
        if gpu_group
        else f"drop --group-add {name} (the GPU needs only render and video, which own /dev/kfd "
        f"and /dev/dri), or use the image's own name for that group"
    )
    return True


def _ollama_target(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    gpu = re.search(r"gpu_type=(gfx[0-9a-f]+)", text)
    listed = re.search(r"supported types:\[([^\]]*)\]", finding.line)
    words = [f"this GPU is {gpu.group(1)}"] if gpu else []
    if listed:
        words.append(f"ollama's build lists {', '.join(listed.group(1).split())}")
    finding.details = "; ".join(words)
    windows = re.search(r"amd_windows\.go|\bWindows (?:10|11)\b|[A-Z]:\\Users\\", text)
    if windows:
        finding.premises = [f"Windows (the text shows: {windows.group(0)})"]
        finding.fix = (
            "on Windows HSA_OVERRIDE_GFX_VERSION has no effect (the HIP SDK reports the real "
            "GPU): use an ollama build whose ROCm libraries include this target, or its "
            "Vulkan backend"
        )
    return True


_CAPACITY = re.compile(r"([\d.]+) (MiB|GiB) total capacity")
RDNA35_MEMORY = (
    "https://rocm.docs.amd.com/en/docs-7.14.0/reference/system-optimization/rdna3-5.html"
)
"""AMD's RDNA3.5 APU system optimization: the firmware's VRAM carve-out, GTT and TTM."""


def _oom(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """A full GPU whose whole memory is small: an integrated GPU's carve-out."""
    size = _CAPACITY.search(text)
    if size is None:
        return True
    mib = float(size.group(1)) * (1024 if size.group(2) == "GiB" else 1)
    if mib > 2048:
        return True
    finding.details = (
        f"the GPU has {size.group(1)} {size.group(2)} in all: an integrated GPU's memory "
        "carved out of system memory by the firmware (its UMA frame buffer size), not a "
        "discrete card's"
    )
    finding.fix = (
        "give the integrated GPU more memory: raise the UMA frame buffer (VRAM) size in the "
        "BIOS/UEFI setup, where the board offers it; on RDNA 3.5 APUs the GPU also maps system "
        f"memory (GTT), set by the kernel's TTM limits ({RDNA35_MEMORY}); then " + finding.rule.fix
    )
    return True


NVIDIA_GPU = products.NVIDIA_GPU
_AMD_TARGET_RULES = {"no-binary", "invalid-device-function", "tensile"}
"""Findings about an AMD GPU's target: moot where the text's only GPUs are NVIDIA's."""


def _nvidia_only(text: str) -> str | None:
    """The NVIDIA GPU the text names, where it names no AMD GPU."""
    found = NVIDIA_GPU.search(text)
    if found and not products.named_gpus(text) and not re.search(r"\bgfx\d", text):
        return found.group(0)
    return None


NVIDIA_RULE = Rule(
    "nvidia-gpu",
    "",
    "the GPU the text names is NVIDIA's",
    "a ROCm (HIP) build of a program runs on AMD GPUs only: on an NVIDIA GPU it finds no "
    "device it has code for (hipErrorNoBinaryForGpu, no HIP GPUs)",
    "install the program's CUDA build: PyTorch from pip's default index or a CUDA index "
    "(python -c 'import torch; print(torch.version.cuda)' names the CUDA version); an "
    "installer that chose ROCm may need its GPU option set to NVIDIA",
    ("https://pytorch.org/get-started/locally/",),
    ("pytorch",),
)


def finish(findings: list[Finding], text: str, seen: Facts, ids: set[str]) -> list[Finding]:
    """The findings of :func:`logs.read` with what only the whole text shows: an
    integrated GPU beside a discrete one, an NVIDIA GPU (whose text's AMD-target
    findings are moot), and no GPU-support verdicts where PyTorch is not a ROCm
    build (the GPU's targets are not the question then)."""
    found = findings + igpu_findings(text, ids)
    more = (setup_devices.visible_twice(seen), setup_devices.cuda_visible(seen, text))
    more += (setup_versions.wheel_older_than_system(text),)
    found += [f for f in more if f]
    nvidia = _nvidia_only(text) if re.search(r"\bhip|HIP|ROCm", text) else None
    if nvidia:
        found = [f for f in found if f.rule.id not in _AMD_TARGET_RULES]
        note = Finding(NVIDIA_RULE, "", 0)
        note.details = f"the text names {nvidia} and no AMD GPU"
        found.append(note)
    if "not-a-rocm-build" in ids or nvidia:
        found = [_without_checks(f) if f.rule.id == "gpus" else f for f in found]
    return found


def _without_checks(finding: Finding) -> Finding:
    from dataclasses import replace

    finding.rule = replace(finding.rule, explained_by=())
    return finding


DETAILS = {
    "container-group-unknown": _group_unknown,
    "ollama-unsupported-target": _ollama_target,
    "torch-oom": _oom,
    "std-header-missing": _std_header,
    "amdsmi-shadowed": _amdsmi,
    "env-not-in-service": _service,
    "override-not-a-version": _not_a_version,
    "container-device-commented": _commented_device,
}
"""Rule id -> what fills a finding of it from the text (False drops the finding)."""
DETAILS |= setup_devices.DETAILS | setup_packages.DETAILS


def fill(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Fill a finding of these rules or of :mod:`logs`' from the text, then add what
    the setup the text shows changes in its fix (:data:`AFTER`); False drops it."""
    handler = DETAILS.get(finding.rule.id, log_details.fill)
    if not handler(finding, text, seen, ids):
        return False
    after = AFTER.get(finding.rule.id)
    if after:
        after(finding, text, seen)
    return True


_BUILD = re.compile(r"\bcmake\b[^\n]*-D\w*HIP\w*=ON|\bhipcc\b")
"""A HIP build of the reader's own: CMake with a HIP option on (llama.cpp's
LLAMA_HIPBLAS, GGML_HIP), or hipcc."""


def _own_build(finding: Finding, text: str, seen: Facts) -> None:
    """A program the reader built: the targets it was built for are the build's option."""
    build = _BUILD.search(text)
    if not build:
        return
    gfx = ", ".join(products.real_targets(log_details.device_targets(text), text)) or "gfxNNNN"
    finding.premises.append(f"a build of its own (the text shows: {build.group(0)[:60]})")
    finding.fix = (
        f"build it for the GPU's target: CMake -DAMDGPU_TARGETS={gfx} (GPU_TARGETS in newer "
        f"projects; without it the build takes HIP's default list), hipcc --offload-arch={gfx}; "
        "then rebuild from a clean build folder"
    )


_ROCM_LIB = re.compile(r"^lib(?:hip|roc|amdhip|hsa|MIOpen|rccl|amd_comgr|hiprtc)", re.IGNORECASE)


def _library_path(finding: Finding, text: str, seen: Facts) -> None:
    """A ROCm library the loader cannot find: ROCm's folder is not on its path."""
    lib = re.search(finding.rule.pattern, finding.line)
    if not lib or not _ROCM_LIB.match(lib.group(1)):
        return
    core = re.search(r"/opt/rocm/core-[\d.]+|ROCm (?:7\.1[3-9]|10)\.[\d.]+", text)
    folder = "/opt/rocm/core-X.Y/lib" if core else "/opt/rocm/lib"
    finding.fix = (
        f"{lib.group(1)} is ROCm's: install it if it is missing (its package), and put ROCm's "
        f"library folder on the loader's path: echo {folder} | sudo tee "
        f"/etc/ld.so.conf.d/rocm.conf and sudo ldconfig, or export LD_LIBRARY_PATH={folder}"
        "; ROCm 7.14 and 10.x (the core SDK) install to /opt/rocm/core-X.Y"
    )


def _device_group(finding: Finding, text: str, seen: Facts) -> None:
    """/dev/kfd owned by a group the listing shows only by number: a group the
    system (a container, mostly) has no name for."""
    m = re.match(r"^c[rw-]{9}\s+\d+\s+\S+\s+\**(\d+)\**\s", finding.line)
    if not m:
        return
    gid = m.group(1)
    finding.details = f"/dev/kfd belongs to group {gid}, which has no name here"
    finding.fix = (
        f"the group {gid} that owns /dev/kfd has no name here (in a container: an image "
        f"without the host's render group): add the number, --group-add {gid} (Compose: "
        f'group_add: ["{gid}"]), or create the group with that number in the image; on the '
        f"host, getent group {gid} names it (render, usually)"
    )


AFTER = {
    "invalid-device-function": _own_build,
    "no-binary": _own_build,
    "missing-library": _library_path,
    "kfd-mode": _device_group,
}
"""Rule id -> what the setup the text shows adds to a finding's fix, after it is filled."""


# --------------------------------------------------------------- iGPU beside a dGPU

IGPU_RULE = Rule(
    "igpu-beside-dgpu",
    "",
    "an integrated GPU listed beside a discrete one",
    "ROCm lists an APU's integrated GPU as a device beside the discrete GPU; a program "
    "that spreads work over every visible GPU, or takes device 0, puts work on it, and it "
    "may lack the program's kernels, the memory, or ROCm's support",
    "hide it: ROCR_VISIBLE_DEVICES (on Linux; HIP_VISIBLE_DEVICES for HIP programs) set to "
    "the discrete GPUs' indices in rocminfo's order, or disable the integrated GPU in the "
    "firmware; a program's own device option (main GPU, no split) also keeps work off it",
    (setup_devices.HIP_ENV, LLVM_PROCESSORS),
    ("gpu-support",),
)
"""The finding for an integrated GPU beside a discrete one (no pattern: the targets)."""

_BUILD_LIST = re.compile(
    r"ROCM_ARCH|AMDGPU_TARGETS|GPU_TARGETS|offload-arch|amdgcn-amd-amdhsa|code object|"
    r"Found\]|arch list|targets?:|\bgfx\w+\s*[;,]\s*gfx",
    re.IGNORECASE,
)


def gpu_targets_shown(text: str) -> list[str]:
    """The targets the text shows for GPUs: their own lines (:func:`device_targets`),
    the chips of the products it names, and gfx names in lines that list no build's
    targets (a device line, the reader's own words)."""
    found = list(device_targets(text)) + [g.gfx for g in products.named_gpus(text)]
    for line in text.splitlines():
        named = re.findall(r"\bgfx[0-9a-f]{3,4}\b", line)
        if _BUILD_LIST.search(line) or len(set(named)) > 2:  # a build's or a program's list
            continue
        found += named
    return list(dict.fromkeys(found))


def igpu_findings(text: str, ids: set[str]) -> list[Finding]:
    """An integrated GPU the text shows beside a discrete one, where no finding of the
    code objects or rocm-smi has said so already. Not where the text sets an override:
    a GPU run as another target (a 780M as gfx1100) would read as two GPUs."""
    if ids & {"no-binary", "invalid-device-function", "smi-gfx"}:
        return []
    if "HSA_OVERRIDE_GFX_VERSION" in text or products.masked(products.named_gpus(text)):
        return []  # targets shown may be an override's, not chips': one GPU would read as two
    shown = gpu_targets_shown(text)
    apus = {a["gfx"] for a in compat_data.apus()} | rules.IGPU_TARGETS
    igpus = [g for g in shown if g in apus]
    discrete = [g for g in shown if g not in apus]
    if not igpus or not discrete:
        return []
    found = Finding(IGPU_RULE, "", 0)
    found.details = f"the text shows {', '.join(igpus)} (integrated) beside {', '.join(discrete)}"
    found.premises = [f"GPUs {', '.join(shown)} (named in the text)"]
    if re.search(r"iGPU detected[^\n]*skipping|skipping[^\n]*\biGPU\b", text, re.I):
        found.fix = "nothing to do for it: the program says it skips the integrated GPU"
    return [found]
