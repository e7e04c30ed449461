"""The doctor: the reader's setup, probed, checked against sourced data, and reported.

``python -m rocm_dl_guide doctor`` (and ``compat``, ``check-sources``) run on
this subpackage; the setup chapter's pages call its modules directly. Its
modules, from the bottom up:

- :mod:`~rocm_dl_guide.doctor.agents`     what ``rocminfo`` tells: the HSA agents
  (CPUs, GPUs) and the report (:class:`RocminfoReport`)
- :mod:`~rocm_dl_guide.doctor.tools`      running a command-line tool (``rocminfo``,
  ``amd-smi``, ``rocm-smi``) and keeping what it printed
- :mod:`~rocm_dl_guide.doctor.rocminfo`   parsing ``rocminfo`` output, and running it
- :mod:`~rocm_dl_guide.doctor.samples`    bundled real ``rocminfo`` outputs
  (``samples/rocminfo/`` at the package root)
- :mod:`~rocm_dl_guide.doctor.rules`      the :class:`Check` a check returns, and
  the sourced facts the checks rest on (``data/doctor-rules.json``)
- :mod:`~rocm_dl_guide.doctor.hostfacts`  device nodes, groups, containers,
  GPU-selection variables and other host facts, read from files
- :mod:`~rocm_dl_guide.doctor.compat_data` the sourced compatibility data
  (``data/compatibility.json`` at the package root), its lookups and version rules
- :mod:`~rocm_dl_guide.doctor.compat`     plain-language verdicts and the setup
  chapter's tables, built on that data
- :mod:`~rocm_dl_guide.doctor.workload`   a real workload (elementwise, matmul,
  conv2d) on every visible GPU, in child processes, against the CPU
- :mod:`~rocm_dl_guide.doctor.installed`  ROCm's trees and version, the amdgpu
  kernel driver, the GPUs on the PCI bus, and where ROCm's tools are
- :mod:`~rocm_dl_guide.doctor.frameworks` PyTorch, TensorFlow, ONNX Runtime and
  MIGraphX, each probed in a child Python
- :mod:`~rocm_dl_guide.doctor.system`     what this machine has: ROCm, the
  kernel driver, GPUs, the frameworks, the workload's result, and the output of
  ``amd-smi``/``rocm-smi``, run where installed (a :class:`SystemReport`)
- :mod:`~rocm_dl_guide.doctor.gpu_targets` the GPUs a program sees, the targets
  its PyTorch has kernels for, ``HSA_OVERRIDE_GFX_VERSION`` and the iGPU checks
- :mod:`~rocm_dl_guide.doctor.diagnose`   the other checks of what actually
  breaks ROCm setups (permissions, the build, host settings, the workload)
- :mod:`~rocm_dl_guide.doctor.logs`       the reader's own error text (``--log``):
  the messages ROCm setups fail with, their causes, fixes and sources
- :mod:`~rocm_dl_guide.doctor.catalogs`   every HIP error, HSA status, runtime fault
  line and amdgpu kernel message family, generated from upstream's stored files
  (``data/error-catalog.json``; :mod:`~rocm_dl_guide.doctor.log_catalog` reads a
  text with them, and classifies lines no catalog knows by their layer)
- :mod:`~rocm_dl_guide.doctor.chips`      the real chip behind every AMD PCI device
  ID (``data/pci-chips.json``, generated); :mod:`~rocm_dl_guide.doctor.products`
  finds the GPUs a text names, and the target each really is
- :mod:`~rocm_dl_guide.doctor.premises`   what advice rests on (a container, WSL, the
  groups shown); :mod:`~rocm_dl_guide.doctor.wsl_text` the WSL recipe of the release
  a text shows (``data/wsl-releases.json``); :mod:`~rocm_dl_guide.doctor.target_options`
  the known risks of an override and the options outside ROCm
- :mod:`~rocm_dl_guide.doctor.smi`        ``amd-smi``/``rocm-smi`` output (run by
  ``doctor`` and ``doctor --collect``, or given with ``--smi``):
  GPU partition modes (SPX/DPX/QPX/CPX, NPS1/NPS4), physical and logical GPUs,
  links; what they mean for ``torchrun`` and ``HIP_VISIBLE_DEVICES``
- :mod:`~rocm_dl_guide.doctor.snapshot`   everything the checks read, in one
  JSON file (``doctor --collect`` / ``--snapshot``)
- :mod:`~rocm_dl_guide.doctor.report`     the report itself: every check and a
  plain-language verdict (:func:`run`, :func:`from_snapshot`,
  :class:`DoctorReport`)
- :mod:`~rocm_dl_guide.doctor.freshness`  whether the compatibility data's web
  sources still hold (``check-sources``)

The modules import each other relatively and the package's core
(``profiles``, ``files``) absolutely; only the command line and the inference
chapter import the doctor from outside. The report's names are re-exported
here, so ``from rocm_dl_guide import doctor; doctor.run()`` is the report.
"""

from .report import (
    FAIL,
    INFO,
    OK,
    STREAM_NAMES,
    UNKNOWN,
    WARN,
    Check,
    DoctorReport,
    check_system,
    distributed_checks,
    from_snapshot,
    rocm_stream,
    run,
)
from .system import SystemReport

__all__ = [
    "FAIL",
    "INFO",
    "OK",
    "STREAM_NAMES",
    "UNKNOWN",
    "WARN",
    "Check",
    "DoctorReport",
    "SystemReport",
    "check_system",
    "distributed_checks",
    "from_snapshot",
    "rocm_stream",
    "run",
]
