"""The hand-written half of the error catalog: what each family of errors means
and what to collect next.

Upstream gives names, numbers, descriptions and message formats
(:mod:`~rocm_dl_guide.doctor.catalogs` reads them); it does not say what a
reader should do. Here each *family* (not each message) gets a meaning and the
evidence to gather, and each HIP error code, HSA status, runtime message and
kernel message is put in a family. The catalog's generator fails when an
upstream code or message has no family here, so a new upstream code cannot
slip into the catalog unexplained.

The runtime switches named in the advice (``AMD_LOG_LEVEL``,
``AMD_SERIALIZE_KERNEL``, ``HIP_LAUNCH_BLOCKING``) are the ones in the stored
excerpt of clr's ``rocclr/utils/flags.hpp``; the generator checks they are there.
"""

from __future__ import annotations

LOG_RUN = "the run again with AMD_LOG_LEVEL=3 (4 for more) and all of its stderr"
SERIAL_RUN = (
    "the run with AMD_SERIALIZE_KERNEL=3 (or HIP_LAUNCH_BLOCKING=1), so the error is "
    "reported at the kernel that failed and not at a later call"
)
ROCMINFO = "rocminfo, all of it (the GPU's gfx target and the first error line)"
DMESG = "sudo dmesg -T | grep -iE 'amdgpu|kfd|drm' (from boot, not only the last lines)"
KFD_ACCESS = "ls -l /dev/kfd /dev/dri/renderD*; id (is this user in the render/video group?)"
KERNEL_VERSION = "uname -r, and modinfo amdgpu | grep -i ^version (none: the in-tree driver)"
FIRMWARE = "the linux-firmware package's version, and ls /lib/firmware/amdgpu | head"
VISIBLE = "env | grep -E 'VISIBLE_DEVICES|HSA_OVERRIDE_GFX_VERSION'"

SWITCHES = ("AMD_LOG_LEVEL", "AMD_SERIALIZE_KERNEL", "HIP_LAUNCH_BLOCKING")
"""The runtime switches the advice names; each must be in the stored flags excerpt."""

FAMILIES: dict[str, dict[str, object]] = {
    "success": {
        "meaning": "not an error: the call completed",
        "collect": (),
    },
    "not-an-error": {
        "meaning": "informational: work still running, a traversal stopped early or a "
        "CU mask trimmed; nothing failed",
        "collect": (),
    },
    "out-of-memory": {
        "meaning": "the GPU's memory could not hold the allocation: the model, batch or "
        "activations are too large, another process holds memory, or it is fragmented",
        "collect": (
            "rocm-smi --showmeminfo vram (or amd-smi monitor) while the program runs",
            "rocm-smi --showpids: other processes on the GPU",
            "the batch size and model size; in PyTorch torch.cuda.memory_summary() at the "
            "failure and PYTORCH_HIP_ALLOC_CONF if it is set",
        ),
    },
    "launch-resources": {
        "meaning": "a kernel asks for more registers, shared (LDS) memory or threads per "
        "block than the GPU has, or a cooperative launch has more blocks than fit",
        "collect": (
            LOG_RUN,
            "the kernel's launch configuration (block size, shared memory)",
            ROCMINFO,
        ),
    },
    "invalid-argument": {
        "meaning": "the program passed a value the API rejects (a null or foreign pointer, "
        "a wrong size, handle or direction): a bug in the caller or in a library, not the "
        "installation",
        "collect": (
            LOG_RUN + "; it logs each HIP call with its arguments, so the rejected call shows",
            "the call and its arguments in the traceback",
        ),
    },
    "no-device": {
        "meaning": "no usable GPU: the GPU is not supported by this ROCm, the kernel driver "
        "is not loaded, this user cannot open /dev/kfd, HIP_VISIBLE_DEVICES or "
        "ROCR_VISIBLE_DEVICES hide it, or the device index is past the last GPU",
        "collect": (ROCMINFO, KFD_ACCESS, VISIBLE, DMESG),
    },
    "init-failure": {
        "meaning": "the runtime could not start: usually it could not open the GPU "
        "(permissions, a container started without /dev/kfd), the driver does not support "
        "the GPU, or user-space ROCm does not match the kernel driver",
        "collect": (ROCMINFO, KFD_ACCESS, DMESG, KERNEL_VERSION),
    },
    "driver-runtime-mismatch": {
        "meaning": "the kernel driver is older than this HIP runtime needs",
        "collect": ("the ROCm version: cat /opt/rocm/.info/version", KERNEL_VERSION),
    },
    "no-kernel-for-gpu": {
        "meaning": "the program or a library carries no GPU code for this GPU's target "
        "(gfx...): it was built for other targets, or an unsupported GPU runs under an "
        "HSA_OVERRIDE_GFX_VERSION that does not fit",
        "collect": (
            "rocminfo | grep gfx: the GPU's target",
            "the run with AMD_LOG_LEVEL=4: it lists the code objects the program carries",
            VISIBLE,
            "in PyTorch: torch.cuda.get_arch_list() (the targets the wheel was built for)",
        ),
    },
    "code-object-load": {
        "meaning": "a GPU code object, module or symbol could not be loaded: a missing or "
        "damaged library file, or a module built for another ROCm",
        "collect": (LOG_RUN, "ldd on the library that fails, and the ROCm version"),
    },
    "launch-failure": {
        "meaning": "a kernel failed on the GPU, most often by an out-of-bounds or "
        "freed-memory access or by hanging until the driver reset the GPU; the error "
        "surfaces at the next synchronising call, not where the kernel started",
        "collect": (SERIAL_RUN, LOG_RUN, DMESG + ": a page fault or GPU reset at that time"),
    },
    "memory-access-fault": {
        "meaning": "an out-of-bounds or freed-memory access in a kernel, or code for the "
        "wrong GPU (an unsupported target or an HSA_OVERRIDE_GFX_VERSION that does not fit)",
        "collect": (
            "the run with AMD_LOG_LEVEL=3 HIP_LAUNCH_BLOCKING=1 (or AMD_SERIALIZE_KERNEL=3): "
            "the last kernel logged is the one that faulted",
            ROCMINFO,
            DMESG + ": the page-fault block names the process and the address",
            VISIBLE,
        ),
    },
    "illegal-instruction": {
        "meaning": "the GPU met an instruction it does not have: code built for another "
        "target, typically run under an HSA_OVERRIDE_GFX_VERSION that does not match",
        "collect": (ROCMINFO, VISIBLE, "the run with AMD_LOG_LEVEL=4 (the code objects)"),
    },
    "device-assert": {
        "meaning": "an assert in a GPU kernel failed; in PyTorch typically an index out of "
        "range (an embedding, a gather, a loss target outside the number of classes)",
        "collect": (
            SERIAL_RUN,
            "the assert's own message, printed above the error",
            "the input batch that triggers it",
        ),
    },
    "not-supported": {
        "meaning": "the feature is not implemented for this GPU, operating system or ROCm version",
        "collect": ("the call in the traceback", "the ROCm version", ROCMINFO),
    },
    "peer-access": {
        "meaning": "peer-to-peer access between these GPUs is unavailable or was enabled "
        "twice: no direct path between them (PCIe topology, IOMMU settings) or GPUs split "
        "between containers",
        "collect": ("rocm-smi --showtopo", "cat /proc/cmdline (iommu=...)", VISIBLE),
    },
    "memory-mapping": {
        "meaning": "registering, mapping or unmapping host or interop memory failed, or was "
        "done twice",
        "collect": (LOG_RUN,),
    },
    "hardware-ecc": {
        "meaning": "the GPU's memory reported an uncorrectable error: a hardware problem, "
        "not a software one",
        "collect": (
            "amd-smi metric --ecc (or rocm-smi --showrasinfo all)",
            "sudo dmesg -T | grep -iE 'ras|ecc|amdgpu'",
        ),
    },
    "graph-capture": {
        "meaning": "an operation that is not allowed while a stream is being captured into "
        "a graph (hipGraph; in PyTorch CUDA graphs, torch.compile mode='reduce-overhead')",
        "collect": ("the traceback", "whether graph capture is on, and the same run with it off"),
    },
    "profiler": {
        "meaning": "the profiler was started or stopped twice, or an external profiler is attached",
        "collect": (),
    },
    "context": {
        "meaning": "the device or its context was used at the wrong time: after it was "
        "destroyed or the runtime shut down (at exit), from another thread, or a setting "
        "was changed while the device is in use",
        "collect": (LOG_RUN, "where in the program it happens (at exit, in a thread)"),
    },
    "runtime-internal": {
        "meaning": "the layer below (ROCr, the HSA runtime) failed without a finer code",
        "collect": ("the run with AMD_LOG_LEVEL=4", ROCMINFO, DMESG),
    },
    "hsa-out-of-resources": {
        "meaning": "the HSA runtime could not set the GPU up: most often it could not open "
        "/dev/kfd (rocminfo reports a permission failure this way), or the kernel driver "
        "does not support the GPU, or user-space ROCm does not match the driver",
        "collect": (ROCMINFO, KFD_ACCESS, "sudo dmesg | grep -i kfd", KERNEL_VERSION),
    },
    "gpu-hang-or-ecc": {
        "meaning": "the GPU hung or reported an ECC error and the driver reset it; the work "
        "on it was lost",
        "collect": (DMESG + ": the ring timeout or fault before the reset", SERIAL_RUN),
    },
    "memory-freed-while-in-use": {
        "meaning": "the program freed memory that the GPU was still using: a missing "
        "synchronisation before hipFree, or a use after free",
        "collect": (SERIAL_RUN, LOG_RUN),
    },
    "queue-abort": {
        "meaning": "the GPU queue stopped because a kernel failed; the HSA status in the "
        "line says why",
        "collect": (SERIAL_RUN, DMESG),
    },
    "amdgpu-init-failure": {
        "meaning": "the amdgpu kernel driver could not bring the GPU up (a probe failure): "
        "missing or mismatched firmware, a GPU newer than the kernel, a VBIOS or post "
        "failure, or PCIe or power trouble; no ROCm program can use the GPU until it loads",
        "collect": (DMESG, KERNEL_VERSION, FIRMWARE, "lspci -nnk -d 1002:"),
    },
    "ip-discovery": {
        "meaning": "the driver could not read the GPU's IP discovery table: the GPU is "
        "newer than the kernel, the read from VRAM failed, or an amdgpu.discovery= option "
        "points at a missing file",
        "collect": (DMESG, KERNEL_VERSION, "cat /proc/cmdline", "lspci -nn -d 1002:"),
    },
    "ring-timeout": {
        "meaning": "a GPU job did not finish in time (by default 10 s, 60 s for compute): a "
        "hung or very long kernel or a GPU fault; the driver then tries to reset the GPU",
        "collect": (
            DMESG + ": page faults before it and the reset's result after it",
            "the process named on the 'Process information' line",
            SERIAL_RUN,
            KERNEL_VERSION,
        ),
    },
    "mes-timeout": {
        "meaning": "the MES firmware scheduler (RDNA 3 and newer) stopped answering the "
        "driver: a firmware or driver bug or a hung queue, known on some kernel and "
        "firmware pairs",
        "collect": (
            DMESG,
            KERNEL_VERSION,
            FIRMWARE,
            "sudo grep -i mes /sys/kernel/debug/dri/*/amdgpu_firmware_info",
        ),
    },
    "gpu-reset": {
        "meaning": "the driver reset the GPU after a hang or fault; work running on it was "
        "lost and VRAM may be lost",
        "collect": (
            DMESG + ": the lines before the reset (its cause) and whether it succeeded",
            KERNEL_VERSION,
        ),
    },
    "vm-page-fault": {
        "meaning": "the kernel's view of a memory access fault: a GPU access to an address "
        "with no valid mapping (an out-of-bounds or freed-memory access, or code for the "
        "wrong GPU)",
        "collect": (
            "the whole fault block: 'page fault', 'in page starting at', "
            "VM_L2_PROTECTION_FAULT_STATUS and the Faulty UTCL2 client",
            "the run with AMD_LOG_LEVEL=3 AMD_SERIALIZE_KERNEL=3",
        ),
    },
    "firmware-missing": {
        "meaning": "the kernel could not find a firmware file the driver asked for: "
        "linux-firmware is older than the GPU or kernel, or the initramfs lacks the file",
        "collect": (
            "ls /lib/firmware/amdgpu/ for the file the line names",
            FIRMWARE,
            "rebuild the initramfs after installing firmware (update-initramfs -u, dracut -f)",
        ),
    },
    "psp-firmware": {
        "meaning": "the PSP (the GPU's security processor) failed to load firmware: "
        "mismatched or damaged firmware, or a GPU left in a bad state (a cold boot helps)",
        "collect": (DMESG, FIRMWARE, KERNEL_VERSION),
    },
    "kfd-unsupported-gpu": {
        "meaning": "amdgpu drives the GPU, but its compute side (KFD) does not support it: "
        "the kernel is too old for the GPU, or the device is a virtual function or an APU "
        "it does not cover; ROCm then sees no GPU",
        "collect": (KERNEL_VERSION, "lspci -nn -d 1002:", "sudo dmesg | grep -i kfd"),
    },
    "pcie-atomics": {
        "meaning": "the GPU needs PCIe atomic operations that the path to the CPU does not "
        "offer (an older CPU or chipset, a PCIe switch or riser, a virtual machine, "
        "Thunderbolt), so KFD skipped it",
        "collect": (
            "sudo lspci -vvv -d 1002: | grep -iE 'AtomicOps'",
            "the CPU, motherboard and how the GPU is attached",
            "sudo dmesg | grep -i kfd",
        ),
    },
    "kfd-device-added": {
        "meaning": "not an error: KFD registered the GPU for compute",
        "collect": (),
    },
    "kfd-init-failure": {
        "meaning": "KFD found the GPU but could not set its compute queues up",
        "collect": (DMESG, KERNEL_VERSION, FIRMWARE),
    },
}

_HIP = {
    "success": "hipSuccess",
    "not-an-error": "hipErrorNotReady",
    "out-of-memory": "hipErrorOutOfMemory hipErrorMemoryAllocation",
    "launch-resources": "hipErrorLaunchOutOfResources hipErrorCooperativeLaunchTooLarge "
    "hipErrorInvalidClusterSize",
    "invalid-argument": "hipErrorInvalidValue hipErrorInvalidConfiguration "
    "hipErrorInvalidPitchValue hipErrorInvalidSymbol hipErrorInvalidDevicePointer "
    "hipErrorInvalidMemcpyDirection hipErrorMissingConfiguration hipErrorInvalidHandle "
    "hipErrorInvalidResourceHandle hipErrorInvalidChannelDescriptor hipErrorInvalidTexture "
    "hipErrorInvalidResourceType hipErrorInvalidResourceConfiguration",
    "no-device": "hipErrorNoDevice hipErrorInvalidDevice",
    "init-failure": "hipErrorNotInitialized hipErrorInitializationError",
    "driver-runtime-mismatch": "hipErrorInsufficientDriver",
    "no-kernel-for-gpu": "hipErrorNoBinaryForGpu hipErrorInvalidDeviceFunction "
    "hipErrorInvalidImage hipErrorInvalidKernelFile hipErrorInvalidSource",
    "code-object-load": "hipErrorFileNotFound hipErrorSharedObjectSymbolNotFound "
    "hipErrorSharedObjectInitFailed hipErrorNotFound",
    "launch-failure": "hipErrorLaunchFailure hipErrorPriorLaunchFailure hipErrorLaunchTimeOut",
    "memory-access-fault": "hipErrorIllegalAddress",
    "device-assert": "hipErrorAssert",
    "not-supported": "hipErrorNotSupported hipErrorOperatingSystem hipErrorUnsupportedLimit",
    "peer-access": "hipErrorPeerAccessUnsupported hipErrorPeerAccessAlreadyEnabled "
    "hipErrorPeerAccessNotEnabled",
    "memory-mapping": "hipErrorMapFailed hipErrorMapBufferObjectFailed hipErrorUnmapFailed "
    "hipErrorArrayIsMapped hipErrorAlreadyMapped hipErrorAlreadyAcquired hipErrorNotMapped "
    "hipErrorNotMappedAsArray hipErrorNotMappedAsPointer hipErrorHostMemoryAlreadyRegistered "
    "hipErrorHostMemoryNotRegistered",
    "hardware-ecc": "hipErrorECCNotCorrectable",
    "graph-capture": "hipErrorStreamCaptureUnsupported hipErrorStreamCaptureInvalidated "
    "hipErrorStreamCaptureMerge hipErrorStreamCaptureUnmatched hipErrorStreamCaptureUnjoined "
    "hipErrorStreamCaptureIsolation hipErrorStreamCaptureImplicit hipErrorCapturedEvent "
    "hipErrorStreamCaptureWrongThread hipErrorGraphExecUpdateFailure hipErrorStreamDetached",
    "profiler": "hipErrorProfilerDisabled hipErrorProfilerNotInitialized "
    "hipErrorProfilerAlreadyStarted hipErrorProfilerAlreadyStopped",
    "context": "hipErrorDeinitialized hipErrorInvalidContext hipErrorContextAlreadyCurrent "
    "hipErrorContextAlreadyInUse hipErrorContextIsDestroyed hipErrorSetOnActiveProcess "
    "hipErrorInvalidGraphicsContext hipErrorIllegalState",
    "runtime-internal": "hipErrorRuntimeMemory hipErrorRuntimeOther hipErrorUnknown",
}
HIP_FAMILY: dict[str, str] = {name: fam for fam, names in _HIP.items() for name in names.split()}
"""Each HIP error code's family, by name."""

_HSA = {
    "success": "HSA_STATUS_SUCCESS",
    "not-an-error": "HSA_STATUS_INFO_BREAK HSA_STATUS_CU_MASK_REDUCED",
    "runtime-internal": "HSA_STATUS_ERROR HSA_STATUS_ERROR_RESOURCE_BUSY",
    "invalid-argument": "HSA_STATUS_ERROR_INVALID_ARGUMENT "
    "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION HSA_STATUS_ERROR_INVALID_ALLOCATION "
    "HSA_STATUS_ERROR_INVALID_AGENT HSA_STATUS_ERROR_INVALID_REGION "
    "HSA_STATUS_ERROR_INVALID_SIGNAL HSA_STATUS_ERROR_INVALID_QUEUE "
    "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT HSA_STATUS_ERROR_RESOURCE_FREE "
    "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS "
    "HSA_STATUS_ERROR_INVALID_INDEX HSA_STATUS_ERROR_INVALID_FILE "
    "HSA_STATUS_ERROR_INVALID_CACHE HSA_STATUS_ERROR_INVALID_WAVEFRONT "
    "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP HSA_STATUS_ERROR_INVALID_RUNTIME_STATE "
    "HSA_STATUS_ERROR_INVALID_MEMORY_POOL",
    "hsa-out-of-resources": "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
    "init-failure": "HSA_STATUS_ERROR_NOT_INITIALIZED",
    "no-kernel-for-gpu": "HSA_STATUS_ERROR_INVALID_ISA HSA_STATUS_ERROR_INVALID_ISA_NAME",
    "code-object-load": "HSA_STATUS_ERROR_INVALID_CODE_OBJECT "
    "HSA_STATUS_ERROR_INVALID_EXECUTABLE HSA_STATUS_ERROR_FROZEN_EXECUTABLE "
    "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED "
    "HSA_STATUS_ERROR_VARIABLE_UNDEFINED HSA_STATUS_ERROR_INVALID_CODE_SYMBOL "
    "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER",
    "launch-failure": "HSA_STATUS_ERROR_EXCEPTION HSA_STATUS_ERROR_FATAL",
    "memory-access-fault": "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION "
    "HSA_STATUS_ERROR_MEMORY_FAULT",
    "illegal-instruction": "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION",
    "launch-resources": "HSA_STATUS_ERROR_OUT_OF_REGISTERS",
    "not-supported": "HSA_STATUS_ERROR_NOT_SUPPORTED",
}
HSA_FAMILY: dict[str, str] = {name: fam for fam, names in _HSA.items() for name in names.split()}
"""Each HSA status's family, by name."""

RUNTIME_FAMILY: tuple[tuple[str, str], ...] = (
    ("Memory access fault by GPU", "memory-access-fault"),
    ("HW Exception by GPU", "gpu-hang-or-ecc"),
    ("Memory critical error", "memory-freed-while-in-use"),
    ("Callback: Queue", "queue-abort"),
)
"""A runtime (ROCr, clr) message's family: the first whose text its format holds."""

KERNEL_FAMILY: tuple[tuple[str, str], ...] = (
    ("not supported in kfd", "kfd-unsupported-gpu"),
    ("PCI rejects atomics", "pcie-atomics"),
    ("PCIE atomic ops is not supported", "pcie-atomics"),
    ("NOT added due to errors", "kfd-init-failure"),
    ("Error initializing queue manager", "kfd-init-failure"),
    ("Error adding device to topology", "kfd-init-failure"),
    ("added device", "kfd-device-added"),
    ("MES", "mes-timeout"),
    ("Direct firmware load", "firmware-missing"),
    ("loading %s failed with error", "firmware-missing"),
    ("PSP", "psp-firmware"),
    ("ip discovery", "ip-discovery"),
    ("can't load firmware", "ip-discovery"),
    ("page fault", "vm-page-fault"),
    ("in page starting at address", "vm-page-fault"),
    ("PROTECTION_FAULT_STATUS", "vm-page-fault"),
    ("Faulty UTCL2 client", "vm-page-fault"),
    ("MORE_FAULTS", "vm-page-fault"),
    ("WALKER_ERROR", "vm-page-fault"),
    ("PERMISSION_FAULTS", "vm-page-fault"),
    ("MAPPING_ERROR", "vm-page-fault"),
    ("RW: 0x", "vm-page-fault"),
    (" for process %s pid", "vm-page-fault"),
    ("ring %s timeout", "ring-timeout"),
    ("Process information", "ring-timeout"),
    ("ring reset", "ring-timeout"),
    ("Ring %s reset failure", "ring-timeout"),
    ("Found the real bad job", "ring-timeout"),
    ("Guilty job", "ring-timeout"),
    ("Timeout, but no hardware hang", "ring-timeout"),
    ("GPU Recovery Failed", "gpu-reset"),
    ("GPU %s begin", "gpu-reset"),
    ("GPU reset", "gpu-reset"),
    ("mode1 reset", "gpu-reset"),
    ("MODE1 reset", "gpu-reset"),
    ("MODE2 reset", "gpu-reset"),
    ("BACO reset", "gpu-reset"),
    ("PCI reset", "gpu-reset"),
    ("GPU recovery disabled", "gpu-reset"),
    ("Emergency reboot", "gpu-reset"),
    ("ASIC reset failed", "gpu-reset"),
    ("pre asic reset failed", "gpu-reset"),
    ("soft reset failed", "gpu-reset"),
    ("VRAM is lost", "gpu-reset"),
    ("gpu post error", "amdgpu-init-failure"),
    ("no vBIOS found", "amdgpu-init-failure"),
    ("Fatal error during GPU init", "amdgpu-init-failure"),
    ("amdgpu_device_ip", "amdgpu-init-failure"),
    ("of IP block", "amdgpu-init-failure"),
    ("IB initialization failed", "amdgpu-init-failure"),
    ("asic reset on init failed", "amdgpu-init-failure"),
    ("Failed to create scheduler", "amdgpu-init-failure"),
)
"""A kernel message's family: the first whose text its format holds."""

SOURCE_COLLECT: dict[str, tuple[str, ...]] = {
    "kernel": (DMESG, KERNEL_VERSION, FIRMWARE, "lspci -nnk -d 1002:"),
    "HIP": (
        LOG_RUN,
        SERIAL_RUN,
        "rocminfo | grep -E 'Marketing Name|gfx'",
        "the ROCm version: cat /opt/rocm/.info/version",
    ),
    "HSA": (
        ROCMINFO,
        KFD_ACCESS,
        "sudo dmesg | grep -iE 'kfd|amdgpu'",
        "env | grep -E '^(HSA|ROCR|HIP)_'",
    ),
    "PyTorch": (
        "the whole traceback, from 'Traceback' to the last line",
        "python -c 'import torch; print(torch.__version__, torch.version.hip, "
        "torch.cuda.is_available())'",
        "pip list | grep -iE 'torch|triton|rocm'",
        LOG_RUN + " when the traceback ends in a HIP error",
    ),
    "package manager": (
        "the package manager's whole output (apt, dnf, zypper), not only the last line",
        "for a DKMS build failure: /var/lib/dkms/amdgpu/*/build/make.log",
        "uname -r and ls /lib/modules: the kernel the driver is built for",
        "apt policy amdgpu-dkms rocm (or dnf info amdgpu-dkms rocm)",
    ),
    "rocBLAS/MIOpen/other ROCm library": (
        "the library's own log: ROCBLAS_LAYER=1 (rocBLAS), MIOPEN_ENABLE_LOGGING=1 "
        "MIOPEN_LOG_LEVEL=5 (MIOpen), HIPBLASLT_LOG_LEVEL=2 (hipBLASLt)",
        "the library versions: ls /opt/rocm/lib | grep -iE 'rocblas|miopen|hipblaslt'",
        "rocminfo | grep gfx: libraries ship kernels per GPU target",
    ),
}
"""What to collect next for a line from each layer (see catalogs.classify_source)."""
