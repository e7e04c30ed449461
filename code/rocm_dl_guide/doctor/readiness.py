"""The verdict: one sentence on whether this guide's examples can use a GPU here.

It rests on what was observed. "Ready" needs a kernel that ran on the GPU
(:func:`rocm_dl_guide.doctor.diagnose.workload_passed`); a machine where nothing
that would show a GPU was collected gets no verdict on its GPUs rather than "No
usable GPU found"; and a GPU that is there but unusable is named as such.
"""

from __future__ import annotations

from . import diagnose
from .rules import FAIL, WARN, Check
from .system import SystemReport


def verdict(sysrep: SystemReport, checks: list[Check]) -> str:
    """One sentence on whether this guide's examples can use a GPU here, from the
    facts and the checks; it never denies a GPU nobody looked for
    (:func:`_looked_for_gpus`) and says "Ready" only after a kernel ran."""
    torch_info = sysrep.frameworks.get("pytorch")
    torch_gpu = bool(
        torch_info and torch_info.installed and torch_info.details.get("gpu_available")
    )
    amd_gpus = sysrep.rocminfo.gpus
    problems = [c for c in checks if c.status in (WARN, FAIL)]
    # PyTorch's probe did not run here (no entry, or not installed without an error).
    not_probed = (torch_info is None or not torch_info.installed) and not (
        torch_info and torch_info.error
    )
    ran = next((c for c in checks if c.id == "gpu-workload"), None)
    if torch_gpu and not diagnose.workload_passed(sysrep):
        text = (
            "Not ready: PyTorch sees the GPU, but "
            + (
                "a real workload on it failed (the GPU workload check)"
                if ran and ran.status == FAIL
                else "no kernel is recorded as run on it here; run doctor on the machine itself"
            )
            + "."
        )
    elif torch_gpu:
        hip = torch_info.details.get("hip")
        kind = "ROCm" if hip else "CUDA"
        text = (
            f"Ready: PyTorch computes on the GPU through {kind}; this guide's examples "
            "run with the gpu profile."
        )
    elif amd_gpus and not_probed:
        text = (
            f"An AMD GPU is present ({amd_gpus[0].marketing_name or amd_gpus[0].gfx}); whether "
            "PyTorch can use it is unknown (its probe did not run): run doctor on the machine "
            "itself."
        )
    elif amd_gpus:
        text = (
            f"An AMD GPU is present ({amd_gpus[0].marketing_name or amd_gpus[0].gfx}) but "
            "PyTorch cannot use it; fix the checks marked [FAIL]/[warn] below, then run "
            "doctor again."
        )
    elif diagnose.amd_gpu_evidence(sysrep):
        text = (
            f"An AMD GPU seems present ({diagnose.amd_gpu_evidence(sysrep)}) but ROCm lists "
            "none that PyTorch can use; fix the checks marked [FAIL]/[warn]/[??] below, then "
            "run doctor again."
        )
    elif not _looked_for_gpus(sysrep):
        text = (
            "No verdict on the GPUs: nothing that would show one was collected (no rocminfo "
            "output, device nodes, PCI bus or PyTorch probe); run doctor on the machine itself."
        )
        if sysrep.log:
            text += " The findings below come from the error text alone."
    else:
        text = "No usable GPU found: this guide's examples run on the CPU (smoke profile)" + (
            "; the checks below say what is missing." if problems else "."
        )
    return text


def _looked_for_gpus(sysrep: SystemReport) -> bool:
    """Whether anything that would show a GPU was observed: rocminfo's list of agents,
    the host facts (device nodes, PCI bus; always collected on the machine itself), or
    PyTorch's probe. A snapshot that holds none of them (``doctor --log`` replayed on facts not
    collected) says nothing about GPUs, so no verdict may deny one."""
    torch_info = sysrep.frameworks.get("pytorch")
    probed = torch_info is not None and (torch_info.installed or bool(torch_info.error))
    # rocminfo listed its agents (a failed run, or one that printed only an error,
    # says nothing about whether a GPU is there).
    return sysrep.host is not None or probed or bool(sysrep.rocminfo.agents)
