"""The distributed-training chapter: experiments that launch real torchrun jobs.

Everything here starts real worker processes through torchrun (``gloo`` on the
CPU, ``nccl``/RCCL on GPUs) and reads back what they wrote:

- :func:`run_equivalence`: the correctness proof. After ``steps`` SGD steps,
  N-rank DDP with per-rank batch ``b`` must hold the same parameters as one
  process with batch ``N * b``; the two classic bugs (no DDP wrapper, no
  ``DistributedSampler``) fail the same check.
- :func:`train_cli`: the guide's ``train EXAMPLE --nproc N --json`` command,
  optionally killing one worker once the first checkpoint is on disk, to show
  torchrun's elastic restart and the resume.
- :func:`two_node_launch`: two torchrun agents on this machine forming one job
  through a c10d rendezvous on 127.0.0.1 (what two nodes of a cluster do).
- :func:`throughput_table`: images/s for 1, 2, ... processes, measured in one run.

The worker side of :func:`run_equivalence` is :func:`equivalence_worker`, run
as ``python -m rocm_dl_guide.distributed.scaling CONFIG.json`` under torchrun.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from rocm_dl_guide.core import distributed, ports

if TYPE_CHECKING:  # pragma: no cover
    import pandas

MODES = {
    "ddp": "DistributedDataParallel + DistributedSampler (correct)",
    "no-wrapper": "DistributedSampler but no DDP wrapper: gradients are never averaged",
    "no-sampler": "DDP but no DistributedSampler: every rank trains on the same batches",
}
"""The equivalence experiment's variants."""


# --------------------------------------------------------------------------- equivalence


@dataclass
class Equivalence:
    """What :func:`run_equivalence` measured."""

    mode: str
    world_size: int
    steps: int
    batch_per_rank: int
    max_diff_vs_single: float
    """Largest absolute parameter difference between rank 0 and one process with
    batch ``world_size * batch_per_rank``."""
    max_diff_across_ranks: float
    """Largest absolute parameter difference between any two ranks."""
    tolerance: float

    @property
    def equivalent(self) -> bool:
        """Whether the ranks agree with each other and with the one-process run."""
        worst = max(self.max_diff_vs_single, self.max_diff_across_ranks)
        return worst <= self.tolerance


def _toy_model() -> nn.Module:
    """A small CNN without batch norm (whose statistics are per rank by design)."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 8 * 8, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
    )


def _toy_data(n: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(n, 3, 16, 16, generator=gen)
    y = torch.randint(0, 10, (n,), generator=gen)
    return TensorDataset(x, y)


def sgd_steps(model: nn.Module, loader: DataLoader, steps: int, lr: float) -> None:
    """``steps`` plain SGD steps: the loop every variant shares."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    batches = iter(loader)
    for _ in range(steps):
        x, y = next(batches)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def train_one_process(
    model: nn.Module,
    data: TensorDataset,
    batch: int,
    steps: int,
    lr: float,
) -> nn.Module:
    """The one-process program: ``steps`` SGD steps on batches of ``batch``."""
    loader = DataLoader(data, batch_size=batch)
    sgd_steps(model, loader, steps, lr)
    return model


def train_data_parallel(
    model: nn.Module,
    data: TensorDataset,
    batch: int,
    steps: int,
    lr: float,
    rank: int,
    world: int,
) -> nn.Module:
    """The same program on one rank of a DDP job (started by torchrun, with the
    process group joined): each rank reads its own share of the data, and DDP
    averages the gradients over the ranks in ``backward()``."""
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(data, batch_size=batch, sampler=sampler)
    sgd_steps(nn.parallel.DistributedDataParallel(model), loader, steps, lr)
    return model


def ddp_diff() -> str:
    """What DDP adds to the one-process program: the unified diff of the source of
    :func:`train_one_process` and :func:`train_data_parallel`, the two functions
    the equivalence experiment runs."""
    import difflib
    import inspect

    def code(func) -> list[str]:  # the source without its docstring
        lines = inspect.getsource(func).splitlines()
        doc = ast.parse(inspect.getsource(func)).body[0].body[0]
        return lines[: doc.lineno - 1] + lines[doc.end_lineno :]

    one, ddp = code(train_one_process), code(train_data_parallel)
    diff = difflib.unified_diff(one, ddp, "one process", "one DDP rank", lineterm="", n=10)
    return "\n".join(diff)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def equivalence_worker(config: dict[str, Any]) -> list[dict[str, Any]] | None:
    """One rank of the equivalence experiment (run under torchrun), for each of
    ``config["modes"]`` in turn, in the one process group.

    For every mode, every rank starts from the same weights and rank 0 also
    trains the one-process reference with the global batch. Returns (on rank 0)
    the differences, one dict per mode.
    """
    import torch.distributed as dist

    ctx = distributed.setup("cpu")
    world, steps, b = ctx.world_size, config["steps"], config["batch"]
    data = _toy_data(world * b * steps)
    results = []
    for mode in config["modes"]:
        torch.manual_seed(0)
        model = _toy_model()
        reference = _toy_model()
        reference.load_state_dict(model.state_dict())
        if mode == "ddp":
            train_data_parallel(model, data, b, steps, config["lr"], ctx.rank, world)
        else:  # one of the two classic bugs
            sampler = None
            if mode != "no-sampler":
                sampler = DistributedSampler(data, num_replicas=world, rank=ctx.rank, shuffle=False)
            trained = model if mode == "no-wrapper" else nn.parallel.DistributedDataParallel(model)
            loader = DataLoader(data, batch_size=b, sampler=sampler)
            sgd_steps(trained, loader, steps, config["lr"])
        mine = _flat(model)
        gathered = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(gathered, mine)
        if not ctx.is_main:
            continue
        train_one_process(reference, data, world * b, steps, config["lr"])
        results.append(
            {
                "mode": mode,
                "world_size": world,
                "steps": steps,
                "batch_per_rank": b,
                "max_diff_vs_single": float((mine - _flat(reference)).abs().max()),
                "max_diff_across_ranks": max(
                    float((g - gathered[0]).abs().max()) for g in gathered
                ),
            }
        )
    return results if ctx.is_main else None


def run_equivalences(
    modes: Sequence[str] = tuple(MODES),
    nproc: int = 2,
    steps: int = 5,
    batch: int = 8,
    lr: float = 0.1,
    tolerance: float = 1e-5,
    timeout: float = 180,
) -> list[Equivalence]:
    """Launch the equivalence experiment for each of ``modes`` (see :data:`MODES`)
    in one torchrun job of ``nproc`` workers; one :class:`Equivalence` per mode.

    One job for all the variants: each is independent of the others (fresh
    model, same seed), and the processes' start-up, not the toy training,
    is what takes the time.
    """
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {unknown!r}: choose from {', '.join(MODES)}")
    if not modes:
        raise ValueError("no mode given: choose from " + ", ".join(MODES))
    with tempfile.TemporaryDirectory(prefix="rocm-dl-guide-ddp-") as tmp:
        config = {"modes": list(modes), "steps": steps, "batch": batch, "lr": lr}
        config["out"] = str(Path(tmp) / "result.json")
        cfg_path = Path(tmp) / "config.json"
        cfg_path.write_text(json.dumps(config))
        module = "rocm_dl_guide.distributed.scaling"
        cmd = distributed.torchrun_command([module, str(cfg_path)], nproc)
        proc = _run(cmd, timeout, env=_job_env(nproc))
        out = Path(config["out"])
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"the {', '.join(modes)} workers failed:\n{proc.stderr[-2000:]}")
        return [Equivalence(**r, tolerance=tolerance) for r in json.loads(out.read_text())]


def run_equivalence(mode: str = "ddp", nproc: int = 2, **kwargs: Any) -> Equivalence:
    """:func:`run_equivalences` for one mode."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    return run_equivalences((mode,), nproc, **kwargs)[0]


# --------------------------------------------------------------------------- the CLI, killed


@dataclass
class CliRun:
    """What :func:`train_cli` observed."""

    record: dict[str, Any] | None
    """The JSON result line (``None`` if the job failed)."""
    returncode: int
    log: str
    """Standard output and error of the whole job (torchrun's agent and every worker)."""
    killed: list[int] = field(default_factory=list)
    """The ranks killed during the run."""
    seconds: float = 0.0
    signalled_after_step: int | None = None
    """The step ``last.pt`` held when the job was sent ``SIGTERM`` (``None``: never)."""

    def lines(self, *needles: str) -> list[str]:
        """The log lines containing any of ``needles``."""
        return [line for line in self.log.splitlines() if any(n in line for n in needles)]

    def worker_failures(self) -> list[str]:
        """torchrun's agent's report of each failed worker, from ``failed (exitcode``
        on, without its logger prefix and the interpreter's path (``of binary: ...``),
        which names the machine the job ran on, not anything the reader needs."""
        out = []
        for line in self.lines("failed (exitcode"):
            text = line[line.find("failed (exitcode") :]
            out.append(re.split(r"\s+of binary:", text, maxsplit=1)[0].rstrip())
        return out


def train_cli(
    example: str,
    checkpoint_dir: str | os.PathLike,
    *,
    nproc: int | None = None,
    max_restarts: int | None = None,
    extra: tuple[str, ...] = (),
    kill_rank_after_epoch: tuple[int, int] | None = None,
    sigterm_after_step: int | None = None,
    timeout: float = 600,
) -> CliRun:
    """Run ``python -m rocm_dl_guide train EXAMPLE --json ...`` as a reader would.

    ``kill_rank_after_epoch=(rank, epoch)`` SIGKILLs that worker once the
    checkpoint of that epoch is on disk, as a crashed GPU or an OOM-killed
    process would end it. ``sigterm_after_step=N`` sends the command ``SIGTERM``,
    as a scheduler preempting the job would, once ``last.pt`` holds step N or
    later (pass ``--checkpoint-every`` in ``extra`` so that it is written inside
    the epochs).
    """
    cmd = [sys.executable, "-m", "rocm_dl_guide", "train", example, "--json"]
    cmd += ["--checkpoint-dir", str(checkpoint_dir), *extra]
    if nproc is not None:
        cmd += ["--nproc", str(nproc)]
    if max_restarts is not None:
        cmd += ["--max-restarts", str(max_restarts)]
    tag = uuid.uuid4().hex
    env = _job_env(nproc, ROCM_DL_GUIDE_JOB=tag)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed, signalled = [], None
    try:
        if sigterm_after_step is not None:
            signalled = _wait_for_checkpoint(
                Path(checkpoint_dir), proc, timeout, step=sigterm_after_step
            )
            proc.send_signal(signal.SIGTERM)
        if kill_rank_after_epoch is not None:
            rank, epoch = kill_rank_after_epoch
            _wait_for_epoch(Path(checkpoint_dir), epoch, proc, timeout)
            pid = _worker_pids(tag).get(rank)
            if pid is None:
                raise RuntimeError(f"no worker of rank {rank} found to kill")
            os.kill(pid, signal.SIGKILL)
            killed.append(rank)
        out, err = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - start)))
    finally:
        if proc.poll() is None:
            _kill_job(proc, tag)
    record = _last_json(out)
    seconds = time.monotonic() - start
    return CliRun(record, proc.returncode, f"{out}\n{err}", killed, seconds, signalled)


def _wait_for_epoch(directory: Path, epoch: int, proc: subprocess.Popen, timeout: float) -> None:
    """Wait until ``last.pt`` in ``directory`` holds ``epoch`` (it is written atomically)."""
    _wait_for_checkpoint(directory, proc, timeout, epoch=epoch)


def _wait_for_checkpoint(
    directory: Path, proc: subprocess.Popen, timeout: float, *, epoch: int = 0, step: int = 0
) -> int:
    """Wait until ``last.pt`` in ``directory`` holds ``epoch`` and ``step`` or later
    (it is written atomically); returns the step it holds."""
    from rocm_dl_guide.training import checkpoints

    deadline = time.monotonic() + timeout
    path = directory / checkpoints.CHECKPOINT_NAME
    seen = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the job ended (exit {proc.returncode}) before a checkpoint of epoch {epoch}, "
                f"step {step}"
            )
        mtime = path.stat().st_mtime_ns if path.exists() else None
        if mtime is not None and mtime != seen:  # read each new version once
            seen = mtime
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
            if ckpt.get("epoch", 0) >= epoch and ckpt.get("step", 0) >= step:
                return int(ckpt.get("step", 0))
        time.sleep(0.05)
    raise TimeoutError(
        f"no checkpoint of epoch {epoch}, step {step} in {directory} after {timeout:.0f} s"
    )


def _worker_pids(tag: str) -> dict[int, int]:
    """rank -> pid of the running workers of the job tagged ``tag`` (Linux /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = dict(
                item.split("=", 1)
                for item in (entry / "environ").read_bytes().decode(errors="replace").split("\0")
                if "=" in item
            )
        except OSError:
            continue
        if env.get("ROCM_DL_GUIDE_JOB") == tag and "RANK" in env and "LOCAL_RANK" in env:
            found[int(env["RANK"])] = int(entry.name)
    return found


def _kill_job(proc: subprocess.Popen, tag: str) -> None:
    """End a job that overran: its launcher, and every worker it started (only those)."""
    proc.kill()
    for pid in _worker_pids(tag).values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def _last_json(text: str) -> dict[str, Any] | None:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _job_env(nproc: int | None, **extra: str) -> dict[str, str]:
    """The environment of a job of ``nproc`` local processes: on a machine with fewer
    GPUs than that (but some), the GPUs are hidden so the job runs on the CPU with
    gloo instead of failing; :func:`gpus_hidden` says when."""
    env = _quiet_env(**extra)
    if gpus_hidden(nproc):
        env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = ""
    return env


def gpus_hidden(nproc: int | None) -> bool:
    """Whether a job of ``nproc`` local processes runs with the GPUs hidden (there are
    some GPUs here, but fewer than processes)."""
    return bool(nproc) and 0 < torch.cuda.device_count() < nproc


def _quiet_env(**extra: str) -> dict[str, str]:
    env = distributed.launcher_env()
    env.update(TF_CPP_MIN_LOG_LEVEL="3", ROCM_DL_GUIDE_PROGRESS="0", **extra)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run(cmd: list[str], timeout: float, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


# --------------------------------------------------------------------------- two nodes


def two_node_launch(
    example: str, checkpoint_dir: str | os.PathLike, extra: tuple[str, ...] = (), timeout=600
) -> CliRun:
    """Two torchrun agents (``--nnodes 2``, ``--node-rank 0/1``), one worker each,
    meeting through a c10d rendezvous on 127.0.0.1: one job of world size 2.

    Returns the run as node 0 saw it (its JSON record) with both agents' logs.
    """
    endpoint = f"127.0.0.1:{ports.free_ports(1)[0]}"
    args = ["rocm_dl_guide", "train", example, "--json", "--checkpoint-dir", str(checkpoint_dir)]
    env = _job_env(2, ROCM_DL_GUIDE_JOB=uuid.uuid4().hex)
    procs = []
    start = time.monotonic()
    try:
        for node in (0, 1):
            cmd = distributed.torchrun_command(
                [*args, *extra], 1, nnodes=2, node_rank=node, rdzv_endpoint=endpoint
            )
            procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        outputs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                _kill_job(p, env["ROCM_DL_GUIDE_JOB"])
    log = "\n".join(
        f"[node {i}] {line}"
        for i, (out, err) in enumerate(outputs)
        for line in (out + err).splitlines()
    )
    code = max(p.returncode for p in procs)
    return CliRun(_last_json(outputs[0][0]), code, log, [], time.monotonic() - start)


# --------------------------------------------------------------------------- throughput


def demo_nprocs() -> list[int]:
    """Process counts worth measuring here: 2 up to every local GPU (at least 2)."""
    return list(range(2, max(2, torch.cuda.device_count()) + 1))


def throughput_runs(
    example: str, folder: str | os.PathLike, nprocs: list[int] | None = None, epochs: int = 1
) -> dict[int, CliRun]:
    """``train EXAMPLE --epochs E --json`` as one plain process (no torchrun, no DDP)
    and with ``--nproc N`` for each N in ``nprocs`` (default :func:`demo_nprocs`),
    one after another; checkpoints under ``folder/nN``."""
    extra = ("--epochs", str(epochs))
    runs = {1: train_cli(example, Path(folder) / "n1", extra=extra)}
    for n in nprocs or demo_nprocs():
        runs[n] = train_cli(example, Path(folder) / f"n{n}", nproc=n, extra=extra)
    for n, run in runs.items():
        if run.record is None:
            raise RuntimeError(f"{example} with {n} process(es) failed:\n{run.log[-2000:]}")
    return runs


THROUGHPUT_FORMATS = {
    "images/s": "{:.0f}",
    "wall s": "{:.1f}",
    "speed-up": "{:.2f}",
    "efficiency": "{:.2f}",
}
"""How a page shows :func:`throughput_table`'s figures (``tables.show(formats=...)``)."""


def throughput_table(runs: dict[int, CliRun]) -> pandas.DataFrame:
    """One row per process count: launcher, backend, images/s (summed over ranks, last
    epoch), wall time of the whole command (start-up included), the speed-up over
    one process and the scaling efficiency (speed-up / processes)."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "processes": n,
            "launcher": "torchrun" if n > 1 else "plain python (no DDP)",
            "backend": run.record["backend"] or "-",
            "images/s": run.record["img_per_s"],
            "wall s": run.seconds,
        }
        for n, run in sorted(runs.items())
    )
    frame["speed-up"] = frame["images/s"] / frame["images/s"].iloc[0]
    frame["efficiency"] = frame["speed-up"] / frame["processes"]
    return frame


if __name__ == "__main__":  # a torchrun worker of run_equivalence
    _config = json.loads(Path(sys.argv[1]).read_text())
    _result = equivalence_worker(_config)
    if _result is not None:
        Path(_config["out"]).write_text(json.dumps(_result))
    distributed.shutdown()
    gc.freeze()  # a faster exit, as in rocm_dl_guide/__main__.py
