"""A real workload on every visible GPU before the doctor says "Ready".

``torch.cuda.is_available()`` is true on a GPU whose architecture the installed
PyTorch was not built for, and on a self-built PyTorch without the card's
target: such a machine fails at its first kernel, with "invalid device
function" or ``hipErrorNoBinaryForGpu``. So the doctor launches, in a child
Python per GPU with a time limit, an elementwise operation, a matrix product
and a convolution, and compares each with the CPU's result. A crash, a signal,
a hang or a wrong result is a failed check that names the GPU;
:func:`rocm_dl_guide.doctor.diagnose.workload_check` explains the likely cause
from the error text, the build's GPU targets, the GPU's own target and any
``HSA_OVERRIDE_GFX_VERSION`` in force.

The results are part of the snapshot (``gpu_workload``), so a replay shows
them; a snapshot from before this check has none, and then the doctor says
that no kernel was run rather than "Ready".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

TIMEOUT_S = 180.0
"""Per GPU: the first kernels may wait for code-object loading or compilation."""

TOLERANCE = {"elementwise": 1e-6, "matmul": 1e-2, "conv2d": 1e-2}
"""Largest relative error (against the largest CPU value) still counted as right;
matrix products and convolutions may run in TF32 or with other summation orders."""

_SCRIPT = r"""
import json, sys
import torch
import torch.nn.functional as F

index = int(sys.argv[1])
device = torch.device("cuda", index)
gen = torch.Generator().manual_seed(0)
a = torch.randn(256, 256, generator=gen)
images = torch.randn(2, 3, 32, 32, generator=gen)
weights = torch.randn(8, 3, 3, 3, generator=gen)
work = {
    "elementwise": (lambda x: x * 2.0 + 1.0, (a,)),
    "matmul": (lambda x: x @ x, (a,)),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), (images, weights)),
}
errors = {}
for name, (fn, args) in work.items():
    print(f"running {name} on {device}", file=sys.stderr, flush=True)
    want = fn(*args)
    got = fn(*(t.to(device) for t in args)).cpu()
    scale = float(want.abs().max()) or 1.0
    errors[name] = float((got - want).abs().max()) / scale
print(json.dumps({"index": index, "name": torch.cuda.get_device_name(index), "errors": errors}))
"""


def run_one(index: int, python: str | None = None, timeout: float = TIMEOUT_S) -> dict:
    """The workload on GPU ``index`` in a child ``python``: ``{"index", "name",
    "ok", "errors" (relative error per operation), "failure" (None or what went
    wrong), "stderr" (its last lines)}``."""
    python = python or sys.executable
    out: dict = {"index": index, "name": None, "ok": False, "errors": {}, "failure": None}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(
            [python, "-c", _SCRIPT, str(index)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raw = exc.stderr or b""
        out["failure"] = f"did not finish within {timeout:.0f} s (a hang in the GPU runtime)"
        out["stderr"] = _tail(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
        return out
    except OSError as exc:
        out["failure"] = f"could not start {python!r}: {exc}"
        return out
    out["stderr"] = _tail(proc.stderr)
    result = _last_json(proc.stdout)
    if proc.returncode < 0:
        name = _signal_name(-proc.returncode)
        out["failure"] = f"the process died with {name} {_during(proc.stderr)}".strip()
    elif proc.returncode != 0 or result is None:
        out["failure"] = _error_line(proc.stderr) or f"exit status {proc.returncode}"
    else:
        out.update(name=result.get("name"), errors=result.get("errors") or {})
        wrong = {k: v for k, v in out["errors"].items() if not v <= TOLERANCE.get(k, 1e-2)}
        if wrong:
            out["failure"] = "wrong result: " + ", ".join(
                f"{k} off by {v:.2g} (relative; tolerance {TOLERANCE.get(k, 1e-2):g})"
                for k, v in wrong.items()
            )
        out["ok"] = not wrong
    return out


def run_all(count: int, python: str | None = None, timeout: float = TIMEOUT_S) -> list[dict]:
    """:func:`run_one` on GPUs ``0 .. count-1``, one after another."""
    return [run_one(i, python, timeout) for i in range(count)]


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _during(stderr: str) -> str:
    steps = [ln for ln in stderr.splitlines() if ln.startswith("running ")]
    return f"while {steps[-1]}" if steps else "before the first kernel"


_EXCEPTION = re.compile(r"^(?P<kind>[A-Za-z_][\w.]*(?:Error|Exception))\b[^:]*: (?P<text>.*)$")


def _error_line(stderr: str) -> str | None:
    """The exception's line (``RuntimeError: HIP error: ...``), else the last line
    that names an error (the runtime's own message), else the last line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    # "RuntimeError: HIP error: ..." becomes "HIP error: ... (RuntimeError)": the
    # message first, as readers search for it
    raised = [
        f"{m['text']} ({m['kind']})" for ln in lines if (m := _EXCEPTION.match(ln)) is not None
    ]
    named = [ln for ln in lines if "rror" in ln or "Cannot read" in ln or "hsa" in ln.lower()]
    return (raised or named or lines or [None])[-1]
