"""Where the time of one step goes: ``torch.profiler`` on the case studies.

:func:`profile_step` runs a few steps of a case study under
``torch.profiler.profile`` (CPU activity always, the GPU's too where there is
one: on ROCm that is PyTorch's ``cuda`` activity, recorded through AMD's
profiler library) with a schedule: one warm-up step that is not recorded, then
``steps`` recorded ones. Two kinds of step:

- ``training``: the shared loop's own step (:func:`rocm_dl_guide.training.train.step_function`:
  forward, loss, backward, optimizer step) on the CIFAR-10 network at the
  guide's batch size of 4, on batches from the real loader;
- ``inference``: an eager forward pass of Inception v3 at batch 1 on the
  sample photo, under ``torch.inference_mode``, as the optimisation chapter
  runs it.

It returns the top operators by self time (``key_averages``, per step) as a
table and writes the Chrome trace (``export_chrome_trace``) into the run
folder, atomically; open it in Perfetto (https://ui.perfetto.dev) or
``chrome://tracing``.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import files, profiles

KINDS = ("training", "inference")
EXAMPLES = {"training": "cifar10", "inference": "inception"}
"""The case study each kind of step profiles."""
TRACE_NAME = "trace.json"


_KINETO_INFO = re.compile(r"^(USDT|INFO):\S+ \S+ \d+:\d+ \S+\] ")
_KINETO_NO_GPU = re.compile(r"^ERROR:.*DeviceProperties\.cpp:\d+\] gpuGetDeviceCount failed")


@contextlib.contextmanager
def kineto_chatter_dropped(on_gpu: bool) -> Iterator[None]:
    """Keep Kineto's (the profiler library's) progress lines off standard error.

    Kineto writes ``USDT:``/``INFO:`` lines when a profile starts and stops and,
    on a machine without a GPU, an ``ERROR:`` line saying it counted no GPUs,
    straight to file descriptor 2, where a notebook shows them. Everything
    else written there in the block is passed on unchanged, after it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for line in held.read().decode("utf-8", "replace").splitlines():
                if _KINETO_INFO.match(line) or (not on_gpu and _KINETO_NO_GPU.match(line)):
                    continue
                print(line, file=sys.stderr)


class ProfilingError(ValueError):
    """A profile that cannot be taken as asked (unknown kind, no steps)."""


@dataclass
class StepProfile:
    """What :func:`profile_step` returns."""

    kind: str
    example: str
    title: str
    """What was profiled, in words ("CIFAR-10 network, one training step, batch 4")."""
    device: str
    steps: int
    """Recorded steps (after one unrecorded warm-up step); times are per step."""
    frame: Any
    """Top operators: ``operator``, ``calls`` (per step), ``self ms`` and ``total ms``
    on the CPU (per step), ``self %`` of all CPU self time, and on a GPU
    ``GPU self ms`` (sorted by it there, by CPU self time otherwise)."""
    trace: Path
    """The Chrome trace (JSON) in the run folder."""
    step_ms: float
    """Wall time of one recorded step, the mean over the recorded steps: the
    table's figures are per-step means too, so their shares add up to it (a
    median hid a slow first batch that the table's loader row counted)."""
    note: str
    """Where the data and weights came from."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "example": self.example,
            "title": self.title,
            "device": self.device,
            "steps": self.steps,
            "step_ms": self.step_ms,
            "trace": str(self.trace),
            "note": self.note,
            "top_operators": self.frame.to_dict(orient="records"),
        }

    def table(self):
        """:attr:`frame` as a page shows it: Python-level events by a short name
        (:func:`short_name`), for :func:`rocm_dl_guide.core.tables.show` with
        :data:`FORMATS`."""
        return self.frame.assign(operator=self.frame["operator"].map(short_name))

    def top_note(self) -> str:
        """What the operator at the top of :attr:`frame` does (:func:`operator_note`)."""
        row = self.frame.iloc[0]
        return operator_note(str(row["operator"]), float(row["self ms"]), float(row["calls"]))

    def summary(self, rows: int = 10) -> str:
        shown = self.frame.head(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")
        return (
            f"{self.title} on {self.device}: {self.step_ms:.1f} ms per step "
            f"({self.steps} recorded steps)\n{shown}\n"
            f"Chrome trace: {self.trace}\n{self.note}"
        )

    def download_link(self):
        """The trace as a download link for a notebook: the file itself, gzipped
        and base64-encoded into the page, so that the rendered book carries it."""
        from IPython.display import HTML

        data = gzip.compress(self.trace.read_bytes(), mtime=0)
        name = f"{self.example}-{self.kind}-trace.json.gz"
        href = "data:application/gzip;base64," + base64.b64encode(data).decode("ascii")
        return HTML(
            f'<a download="{name}" href="{href}">Download the trace ({name}, '
            f"{len(data) / 1024:.0f} KiB)</a> and open it in "
            '<a href="https://ui.perfetto.dev">Perfetto</a>.'
        )


FORMATS = {
    "calls": "{:g}",
    "self ms": "{:.2f}",
    "self %": "{:.1f}",
    "total ms": "{:.2f}",
    "GPU self ms": "{:.2f}",
}
"""One format per column of :meth:`StepProfile.table`: the same digits on every row."""

NO_ARITHMETIC = (
    "aten::detach",
    "aten::alias",
    "aten::view",
    "aten::_reshape_alias",
    "aten::reshape",
    "aten::as_strided",
    "aten::t",
    "aten::transpose",
    "aten::expand",
    "aten::select",
    "aten::slice",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::empty",
    "aten::empty_strided",
)
"""Operators that compute nothing: each makes a new handle on a tensor that
exists (a view, a tensor without autograd's history) or allocates an empty one."""


def short_name(op: str) -> str:
    """An operator's name as a table shows it. PyTorch names Python-level events
    ``CALLER#CALLEE`` (``Optimizer.step#SGD.step``); the short name is the part
    after ``#``, and the loader's ``__next__`` is ``DataLoader: next batch``."""
    if "DataLoader" in op and op.endswith("__next__"):
        return "DataLoader: next batch"
    return op.rsplit("#", 1)[-1]


def operator_note(op: str, self_ms: float, calls: float) -> str:
    """Short sentences on what operator ``op`` does, for the one at the top of a
    profile (``self_ms`` of self time per step over ``calls`` calls)."""
    name = short_name(op)
    if op in NO_ARITHMETIC:
        each = self_ms / calls if calls else self_ms
        took = f"{each:.2f} ms" if each >= 0.1 else f"{1000 * each:.0f} µs"
        return (
            f"{name} computes nothing: it only makes a new handle on a tensor that "
            f"already exists, or an empty one. Yet its calls took {took} each here. "
            "Such time is a pause that fell into a cheap call, such as the process "
            "waiting for a CPU core that another process held. It says more about the "
            "machine than about the step, so profile again before acting on it."
        )
    if "DataLoader" in op:
        return f"{name} is the loader reading and transforming the next batch."
    if "conv" in op:
        return f"{name} is the convolutions' own arithmetic."
    if "Optimizer" in op or op.endswith(".step"):
        return f"{name} is the optimizer updating the weights."
    return f"{name} is one of the step's computations, run {calls:g} times per step."


def top_operators(events, steps: int, on_gpu: bool, limit: int = 12):
    """The ``limit`` operators with the most self time, per step, from
    ``profiler.key_averages()``; the profiler's own step markers are left out."""
    import pandas as pd

    rows = []
    for e in events:
        if e.key.startswith("ProfilerStep"):
            continue
        row = {
            "operator": e.key,
            "calls": e.count / steps,
            "self ms": e.self_cpu_time_total / 1000 / steps,
            "total ms": e.cpu_time_total / 1000 / steps,
        }
        if on_gpu:
            device_self = getattr(e, "self_device_time_total", None)
            if device_self is None:  # older PyTorch
                device_self = getattr(e, "self_cuda_time_total", 0)
            row["GPU self ms"] = device_self / 1000 / steps
        rows.append(row)
    if not rows:
        raise ProfilingError("the profiler recorded no operators")
    frame = pd.DataFrame(rows)
    total_self = frame["self ms"].sum()
    frame["self %"] = 100 * frame["self ms"] / total_self if total_self else 0.0
    key = "GPU self ms" if on_gpu else "self ms"
    frame = frame.sort_values(key, ascending=False).head(limit).reset_index(drop=True)
    columns = ["operator", "calls", "self ms", "self %", "total ms"]
    return frame[columns + (["GPU self ms"] if on_gpu else [])]


def _training_step(prof, device) -> tuple[Callable[[], Any], str, str]:
    import torch

    from rocm_dl_guide.casestudies import cifar10
    from rocm_dl_guide.training import train

    data = cifar10.load(prof, device=device)
    torch.manual_seed(0)
    model = cifar10.Net()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=cifar10.LEARNING_RATE, momentum=cifar10.MOMENTUM
    )
    step = train.step_function(model, optimizer, device=device)
    batches = iter(data.train_loader)

    def one() -> Any:
        nonlocal batches
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(data.train_loader)
            x, y = next(batches)
        return step(x, y)

    title = f"CIFAR-10 network, one training step (batch {cifar10.BATCH_SIZE})"
    return one, title, f"data: {data.prepared.note}"


def _inference_step(prof, device) -> tuple[Callable[[], Any], str, str]:
    import torch

    from rocm_dl_guide.casestudies import inception_pretrained
    from rocm_dl_guide.optimization import inference

    loaded = inception_pretrained.load_pretrained(prof)
    model = loaded.model.to(device).eval()
    x = torch.from_numpy(inference.image_batch(batch_size=1)).to(device)

    def one() -> Any:
        with torch.inference_mode():
            return model(x)

    return one, "Inception v3, one eager forward pass (batch 1, 299x299)", loaded.note


def record_steps(one: Callable[[], Any], steps: int, device) -> tuple[Any, list[float]]:
    """Call ``one`` 1 + ``steps`` times under ``torch.profiler``: the first call
    is the schedule's warm-up (run, not recorded), the others are recorded.
    Returns the profiler and the wall time of each recorded call in ms."""
    import torch
    from torch import profiler

    on_gpu = torch.device(device).type == "cuda"
    activities = [profiler.ProfilerActivity.CPU]
    if on_gpu:  # on ROCm, PyTorch's "cuda" activity records the HIP kernels
        activities.append(profiler.ProfilerActivity.CUDA)
    times = []
    with (
        kineto_chatter_dropped(on_gpu),
        profiler.profile(
            activities=activities,
            schedule=profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
            record_shapes=True,
        ) as p,
    ):
        for k in range(1 + steps):
            start = time.perf_counter()
            one()
            if on_gpu:
                torch.cuda.synchronize(device)
            if k:
                times.append(1000 * (time.perf_counter() - start))
            p.step()  # tell the schedule that one step ended
    return p, times


def profile_step(
    profile: profiles.Profile,
    kind: str = "training",
    steps: int = 3,
    device=None,
    folder: str | Path | None = None,
    limit: int = 12,
) -> StepProfile:
    """Profile ``steps`` steps of ``kind`` (``training`` or ``inference``) after one
    unrecorded warm-up step; write the Chrome trace to ``folder`` (default: the
    run folder ``profile-<example>-<kind>``) and return the top operators."""
    import statistics

    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core import runs

    if kind not in KINDS:
        raise ProfilingError(f"unknown kind of step {kind!r}: choose from {', '.join(KINDS)}")
    if steps < 1:
        raise ProfilingError(f"steps must be 1 or more, not {steps}")
    dev = torch.device(device) if device is not None else devices.pick()
    make = _training_step if kind == "training" else _inference_step
    one, title, note = make(profile, dev)
    on_gpu = dev.type == "cuda"
    example = EXAMPLES[kind]
    target = Path(folder) if folder is not None else runs.runs_dir(f"profile-{example}-{kind}")
    p, times = record_steps(one, steps, dev)
    trace = target / TRACE_NAME
    with kineto_chatter_dropped(on_gpu), tempfile.TemporaryDirectory() as tmp:
        frame = top_operators(p.key_averages(), steps, on_gpu, limit)
        raw = Path(tmp) / TRACE_NAME
        p.export_chrome_trace(str(raw))
        json.loads(raw.read_text(encoding="utf-8"))  # a trace that does not parse is an error
        with files.atomic_write(trace) as fh:
            fh.write(raw.read_bytes())
    return StepProfile(
        kind=kind,
        example=example,
        title=title,
        device=str(devices.describe()) if device is None else str(dev),
        steps=steps,
        frame=frame,
        trace=trace,
        step_ms=statistics.fmean(times),
        note=note,
    )
