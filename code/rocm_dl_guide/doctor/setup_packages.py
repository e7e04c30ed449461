"""What the packages a program installed show, as the reader's text has them.

Part of :mod:`~rocm_dl_guide.doctor.setup_text` (its :data:`RULES` and
:data:`DETAILS` are added there). Many failures on AMD GPUs come from a package
built for another vendor or another release: ONNX Runtime without an AMD execution
provider, a bitsandbytes whose ROCm library does not match, a nightly index for
another GPU family, a llama.cpp built without HIP, pip (or uv) finding no ROCm build
of the PyTorch version asked for, or pip unable to pair a ROCm build of PyTorch with
a package that pins another version. Each rule is a class of
such reports, recognised by what any of them prints.
"""

from __future__ import annotations

import re

from .log_details import Facts, Finding, Rule

ORT_ROCM = "https://onnxruntime.ai/docs/execution-providers/ROCm-ExecutionProvider.html"
ORT_MIGRAPHX = "https://onnxruntime.ai/docs/execution-providers/MIGraphX-ExecutionProvider.html"
BNB_INSTALL = "https://huggingface.co/docs/bitsandbytes/main/en/installation"
THEROCK_RELEASES = "https://github.com/ROCm/TheRock/blob/main/RELEASES.md"
LLAMA_HIP = "https://github.com/ggml-org/llama.cpp/blob/master/docs/build.md#hip"

RULES: tuple[Rule, ...] = (
    Rule(
        "pip-no-torch-build",
        r"(?:No matching distribution found for|Could not find a version that satisfies the "
        r"requirement) (?:torch|torchvision|torchaudio)\b|No solution found when resolving",
        "pip found no PyTorch build of the version it was asked for",
        "the index pip was given (--index-url) has no build of that version: each "
        "download.pytorch.org/whl/rocmX.Y index holds only the PyTorch releases built for "
        "that ROCm release",
        "choose the version and the index as a pair (PyTorch's install selector; its "
        "previous-versions page for older releases), or a version the index lists; an installer "
        "that goes on after this error may install PyPI's default torch, a CUDA build that "
        "never uses an AMD GPU: python -c 'import torch; print(torch.version.hip)' prints None "
        "for it",
        (
            "https://pytorch.org/get-started/previous-versions/",
            "https://pytorch.org/get-started/locally/",
        ),
        ("pytorch",),
    ),
    Rule(
        "onnxruntime-no-amd-provider",
        r"Specified provider '(?:ROCM|MIGraphX)ExecutionProvider' is not in available provider"
        r"|libonnxruntime_providers_cuda\.so|TryGetProviderInfo_CUDA",
        "ONNX Runtime without an AMD execution provider",
        "ONNX Runtime runs on AMD GPUs only through its ROCm or MIGraphX execution provider, "
        "which PyPI's onnxruntime and onnxruntime-gpu (CUDA) wheels do not have; a program "
        "that asks for CUDAExecutionProvider because torch.cuda.is_available() is True on a "
        "ROCm PyTorch gets NVIDIA's provider, which needs CUDA's libraries",
        "install an ONNX Runtime built for ROCm (AMD's onnxruntime-rocm or onnxruntime-migraphx "
        "wheel for your ROCm release, after pip uninstall onnxruntime onnxruntime-gpu) and ask "
        "for providers=['MIGraphXExecutionProvider'] or ['ROCMExecutionProvider']; "
        "onnxruntime.get_available_providers() lists what the installed one has",
        (ORT_ROCM, ORT_MIGRAPHX),
    ),
    Rule(
        "bitsandbytes-rocm-library",
        r"libbitsandbytes_(?:rocm|hip)\w*\.so|Could not load bitsandbytes native library"
        r"|bitsandbytes library load error",
        "bitsandbytes' ROCm library did not load",
        "bitsandbytes loads a native library built for one ROCm release "
        "(libbitsandbytes_rocmNN.so, NN from the release PyTorch was built for): a wheel "
        "without it, a build for another release, or a broken development wheel leaves it "
        "missing or with undefined symbols",
        "install a bitsandbytes build for your ROCm release and GPU (a release wheel with ROCm "
        "support, or build it: cmake -DCOMPUTE_BACKEND=hip -DBNB_ROCM_ARCH=gfxNNNN -S . && make, "
        "then pip install .); python -m bitsandbytes says which library it looks for",
        (BNB_INSTALL,),
    ),
    Rule(
        "nightly-index-no-package",
        r"(?:No matching distribution found for|from versions: none)",
        "pip found nothing on AMD's nightly index",
        "AMD's TheRock nightly wheels live in one index per GPU family "
        "(rocm.nightlies.amd.com/v2/gfx120X-all/, gfx110X-all/, gfx1151/, gfx94X-dcgpu/ ...): "
        "a family folder that does not exist, or another family's, offers no versions",
        "use the index of your GPU's family: its folder under https://rocm.nightlies.amd.com/v2/ "
        "(TheRock's RELEASES.md lists them; an RX 9000 is gfx120X-all)",
        (THEROCK_RELEASES,),
    ),
    Rule(
        "llama-cpp-no-gpu-build",
        r"not compiled with GPU offload support|\b(?:GGML|LLAMA)_HIPBLAS\b",
        "llama.cpp (ggml) built without GPU support",
        "this llama.cpp binary has no GPU backend: its build did not turn HIP on (the CMake "
        "option is GGML_HIP; older releases called it GGML_HIPBLAS or LLAMA_HIPBLAS, which "
        "newer sources ignore), so --gpu-layers is ignored and it runs on the CPU",
        "rebuild with HIP: cmake -B build -DGGML_HIP=ON -DAMDGPU_TARGETS=gfxNNNN (your GPU's "
        "target) and cmake --build build (whisper.cpp and other ggml programs alike); a "
        "distribution's package needs its ROCm variant built with GGML_HIP",
        (LLAMA_HIP,),
    ),
    Rule(
        "pip-torch-pin-conflict",
        r"because these package versions have conflicting dependencies",
        "a package pins another PyTorch than the ROCm build asked for",
        "pip cannot install a ROCm build of PyTorch and a package that depends on another "
        "torch version together; left to itself an installer may then take PyPI's default "
        "torch, a CUDA build",
        "install the ROCm build of the version the package pins (from a ROCm index that has "
        "it), then the package with pip install --no-deps, so that pip keeps that torch",
        ("https://pip.pypa.io/en/stable/topics/dependency-resolution/",),
        ("pytorch",),
    ),
    Rule(
        "windows-app-control",
        r"\[WinError 4551\]|Application Control policy has blocked this file",
        "Windows blocked a library (Smart App Control)",
        "Windows' application control (Smart App Control, or an App Control policy) refused "
        "to load a DLL, here one of ROCm's or the program's; reinstalling gives the same file",
        "allow it: turn Smart App Control off (Windows Security, App & browser control) or "
        "have the policy allow the file, then start the program again",
        ("https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--4000-5999-",),
    ),
)
"""Packages built for another vendor, release or family, and how pip pairs them."""


def _pip_no_torch(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    wanted = re.search(r"\b(torch(?:vision|audio)?)\s*==\s*([\w.+]+)", text)
    index = re.search(
        r"--(?:extra-)?index(?:-url)?[= ](\S+)|(https://download\.pytorch\.org/whl/\S+)", text
    )
    if "No solution found" in finding.line and not (index and "download.pytorch" in index.group(0)):
        return False  # uv's resolver, about other packages than PyTorch's
    offered = re.search(r"\(from versions: ([^)]*)\)", text)
    words = []
    if wanted:
        words.append(f"the text asks for {wanted.group(1)}=={wanted.group(2)}")
    if index:
        words.append(f"from {index.group(1) or index.group(2)}")
    if offered:
        versions = [v.strip() for v in offered.group(1).split(",") if v.strip()]
        shown = ", ".join(versions[-6:]) or "none"
        words.append(f"which offers {shown}")
    finding.details = " ".join(words)
    if wanted and index:
        finding.premises = [
            f"{wanted.group(1)}=={wanted.group(2)} from {index.group(1) or index.group(2)}"
        ]
    return True


def _bnb(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """The library name bitsandbytes looks for, beside the ROCm version the text shows."""
    wanted = re.search(r"libbitsandbytes_(rocm|hip)(\d+)\w*\.so", text)
    rocm = re.search(r"\bROCm(?: version)?[:\s]+v?(\d+)\.(\d+)", text, re.I)
    if wanted:
        finding.details = f"it looks for {wanted.group(0)}, named from the ROCm version it derived"
    if wanted and rocm and wanted.group(2) != rocm.group(1) + rocm.group(2):
        finding.details += (
            f"; the text's ROCm is {rocm.group(1)}.{rocm.group(2)}, whose library would be "
            f"libbitsandbytes_rocm{rocm.group(1)}{rocm.group(2)}.so: a bitsandbytes that "
            "derives the name wrongly (two-digit minor versions) needs a newer release"
        )
    return True


def _nightly(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Only where the text shows AMD's nightly index."""
    index = re.search(r"https?://rocm\.nightlies\.amd\.com/\S*", text)
    if not index:
        return False
    finding.details = f"the index is {index.group(0)}"
    return True


def _pin(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Only where a ROCm torch meets a pin of another; the pin and the build named."""
    asked = re.search(r"\btorch[ =]=?=?\s*(\d+\.\d+(?:\.\d+)?\+rocm[\w.]+)", text)
    pinned = re.search(r"(\S+ \S+) depends on torch\s*==\s*([\w.]+)", text)
    if not (asked and pinned):
        return False
    finding.details = (
        f"torch {asked.group(1)} was asked for; {pinned.group(1)} pins torch=={pinned.group(2)}"
    )
    finding.fix = (
        f"install torch=={pinned.group(2)} from a ROCm index that has it (download.pytorch.org/"
        f"whl/rocmX.Y), then {pinned.group(1).split()[0]} with pip install --no-deps"
    )
    return True


DETAILS = {
    "pip-no-torch-build": _pip_no_torch,
    "nightly-index-no-package": _nightly,
    "bitsandbytes-rocm-library": _bnb,
    "pip-torch-pin-conflict": _pin,
}
"""Rule id -> what fills a finding of it from the text (False drops the finding)."""
