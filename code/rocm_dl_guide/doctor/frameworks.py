"""The frameworks (PyTorch, TensorFlow, ONNX Runtime, MIGraphX), probed in a child Python.

:func:`probe_framework` imports one framework in a child process with a time
limit and reads the one JSON line its probe prints (:class:`FrameworkInfo`):
its version and what it says about the GPU (PyTorch: the HIP version, the GPU
targets the build carries, the devices it sees, what distributed training can
use). A framework that is missing, crashes at import or hangs while loading GPU
libraries becomes a recorded ``error``, never an exception, and cannot take
the caller down with it. :func:`probe_all` probes several in parallel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from .tools import short

PROBE_TIMEOUT_S = 120.0

# Each probe prints one JSON object on its last line of stdout.
_PROBES: dict[str, str] = {
    "pytorch": r"""
import json
import torch
info = {"version": torch.__version__,
        "hip": getattr(torch.version, "hip", None),
        "cuda": getattr(torch.version, "cuda", None)}
try:  # the GPU targets this build carries kernels for (gfx names on ROCm)
    info["arch_list"] = list(torch.cuda.get_arch_list())
except Exception as exc:
    info["arch_list_error"] = f"{type(exc).__name__}: {exc}"
try:
    info["gpu_available"] = bool(torch.cuda.is_available())
    devices = []
    for i in range(torch.cuda.device_count() if info["gpu_available"] else 0):
        p = torch.cuda.get_device_properties(i)
        arch = getattr(p, "gcnArchName", None)
        devices.append({"name": p.name, "gfx": arch.split(":")[0] if arch else None,
                        "memory_gib": round(p.total_memory / 2**30, 1)})
    info["devices"] = devices
except Exception as exc:
    info["gpu_error"] = f"{type(exc).__name__}: {exc}"
try:  # what distributed training (torchrun, DDP, FSDP) can use
    import glob, os
    import torch.distributed as dist
    d = {"available": dist.is_available()}
    if d["available"]:
        d["gloo"] = dist.is_gloo_available()
        d["nccl"] = dist.is_nccl_available()
    if d.get("nccl") and info.get("gpu_available"):
        d["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    d["visible_env"] = {k: os.environ[k] for k in
                        ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
                        if k in os.environ}
    if info.get("hip"):
        roots = [os.path.join(os.path.dirname(torch.__file__), "lib")]
        roots += [os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "lib")]
        roots += sorted(glob.glob("/opt/rocm*/lib")) + sorted(glob.glob("/opt/rocm/core*/lib"))
        d["rccl"] = sorted({p for r in roots for p in glob.glob(os.path.join(r, "librccl.so*"))})
    info["distributed"] = d
except Exception as exc:
    info["distributed"] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(info))
""",
    "tensorflow": r"""
import json, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
info = {"version": tf.__version__, "built_with_rocm": bool(tf.test.is_built_with_rocm()),
        "built_with_cuda": bool(tf.test.is_built_with_cuda())}
try:
    info["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
except Exception as exc:
    info["gpu_error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(info))
""",
    "onnxruntime": r"""
import json
import onnxruntime as ort
print(json.dumps({"version": ort.__version__,
                  "providers": list(ort.get_available_providers())}))
""",
    "migraphx": r"""
import json
import migraphx
version = getattr(migraphx, "__version__", None)
if version is None:
    try:
        from importlib.metadata import version as _v
        version = _v("migraphx")
    except Exception:
        version = None
print(json.dumps({"version": version, "module": getattr(migraphx, "__file__", None)}))
""",
}

FRAMEWORKS = tuple(_PROBES)


@dataclass
class FrameworkInfo:
    """What a child process learned about one framework."""

    name: str
    installed: bool = False
    version: str | None = None
    details: dict = field(default_factory=dict)
    error: str | None = None
    """Why nothing (or not everything) could be learned; ``None`` when all went well."""


def _last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def probe_framework(
    name: str, python: str | None = None, timeout: float = PROBE_TIMEOUT_S
) -> FrameworkInfo:
    """Import framework ``name`` in a child ``python`` and report what it says."""
    if name not in _PROBES:
        raise ValueError(f"unknown framework {name!r}: choose one of {', '.join(_PROBES)}")
    python = python or sys.executable
    info = FrameworkInfo(name=name)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(
            [python, "-c", _PROBES[name]],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        info.error = f"the Python interpreter {python!r} was not found"
        return info
    except PermissionError:
        info.error = f"the Python interpreter {python!r} cannot be executed"
        return info
    except subprocess.TimeoutExpired:
        info.error = f"importing {name} did not finish within {timeout:.0f} s"
        return info
    except OSError as exc:
        info.error = f"could not start {python!r}: {exc}"
        return info

    result = _last_json_line(proc.stdout)
    if proc.returncode == 0 and result is not None:
        info.installed = True
        info.version = result.pop("version", None)
        info.details = result
        if "gpu_error" in result:
            info.error = f"the GPU query failed: {result['gpu_error']}"
        return info
    if "ModuleNotFoundError" in proc.stderr or "No module named" in proc.stderr:
        info.error = "not installed"
        return info
    if proc.returncode < 0:
        info.error = f"importing {name} crashed the process (signal {-proc.returncode})"
    elif proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        info.error = f"importing {name} failed: {short(last[0])}"
    else:
        info.error = (
            f"the {name} probe printed output that could not be read: {short(proc.stdout)!r}"
        )
    return info


def probe_all(frameworks: tuple[str, ...], python: str | None) -> dict[str, FrameworkInfo]:
    """Probe the frameworks in parallel child processes (each import takes seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(frameworks))) as pool:
        futures = {name: pool.submit(probe_framework, name, python) for name in frameworks}
        return {name: fut.result() for name, fut in futures.items()}
