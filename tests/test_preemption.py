"""A run stopped by SIGTERM inside an epoch resumes exactly where it stopped.

The loop (rocm_dl_guide.training.train.fit) saves the loader's position, the running
sums and the RNG states on the signal; the resumed run must end with the same
losses and accuracies as a run that was never interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from conftest import hang_limit
from rocm_dl_guide.core import preemption
from rocm_dl_guide.training import checkpoints, setup, train

ROOT = Path(__file__).resolve().parents[1]

EPOCHS = 3
BATCHES = 8  # per epoch
BATCH = 8


class SignalAt(Dataset):
    """A small fixed classification set that sends this process ``signum`` when
    its ``at``-th item (counting every fetch) is read."""

    def __init__(self, at: int | None = None, signum: int = signal.SIGTERM) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(BATCHES * BATCH, 12, generator=g)
        self.y = (self.x[:, :3].sum(dim=1) > 0).long() + (self.x[:, 3] > 1).long()
        self.at, self.signum, self.fetched = at, signum, 0

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        self.fetched += 1
        if self.fetched == self.at:
            os.kill(os.getpid(), self.signum)
        return self.x[i], self.y[i]


def _fit(tmp_path, data: Dataset, resume: bool = False, **knobs) -> train.TrainResult:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5)
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    val = DataLoader(SignalAt(), batch_size=16)
    return train.fit(
        model,
        loader,
        epochs=EPOCHS,
        optimizer=opt,
        scheduler=sched,
        scheduler_interval="batch",
        val_loader=val,
        device="cpu",
        checkpoint_dir=tmp_path,
        resume=resume,
        progress=False,
        log=None,
        **knobs,
    )


def _numbers(result: train.TrainResult) -> list[tuple]:
    return [
        (m.epoch, m.train_loss, m.train_accuracy, m.val_loss, m.val_accuracy, m.lr)
        for m in result.history
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_inside_epoch_2_resumes_there_and_ends_like_an_uninterrupted_run(tmp_path, signum):
    whole = _fit(tmp_path / "whole", SignalAt())
    # Item 8 * 8 + 3 * 8 + 5 is read while batch 4 of epoch 2 is being drawn:
    # the step in progress (batch 4) finishes, then the loop stops.
    at = BATCHES * BATCH + 3 * BATCH + 5
    before = signal.getsignal(signum)
    with pytest.raises(preemption.Preempted) as stopped:
        _fit(tmp_path / "cut", SignalAt(at=at, signum=signum))
    assert signal.getsignal(signum) == before  # the loop put the handler back
    stop = stopped.value
    assert (stop.signame, stop.step, stop.epoch, stop.batch) == (
        signal.Signals(signum).name,
        BATCHES + 4,
        2,
        4,
    )
    assert "--resume" in str(stop)
    ckpt = checkpoints.read_checkpoint(tmp_path / "cut" / checkpoints.CHECKPOINT_NAME)
    assert ckpt["epoch"] == 1 and ckpt["step"] == BATCHES + 4
    assert ckpt["in_epoch"]["epoch"] == 2 and ckpt["in_epoch"]["batches"] == 4

    resumed = _fit(tmp_path / "cut", SignalAt(), resume=True)
    assert resumed.resumed_from_step == BATCHES + 4
    assert resumed.resumed_from_epoch == 1
    assert _numbers(resumed) == _numbers(whole)
    assert len(resumed.history) == EPOCHS


@pytest.mark.timeout(120)
def test_checkpoint_every_n_steps_is_resumable_from_inside_an_epoch(tmp_path):
    whole = _fit(tmp_path / "whole", SignalAt())
    _fit(tmp_path / "every", SignalAt(), checkpoint_every=5)
    ckpt = checkpoints.read_checkpoint(tmp_path / "every" / checkpoints.CHECKPOINT_NAME)
    assert ckpt["step"] == EPOCHS * BATCHES and ckpt["in_epoch"] is None  # the end wins

    # A run killed outright (no signal handler runs) after step 13 keeps the
    # checkpoint of step 10, inside epoch 2: simulate it by stopping at step 13
    # with on an exception raised from the data set, then resume.
    class Crash(SignalAt):
        def __getitem__(self, i):
            if self.fetched == (BATCHES + 5) * BATCH + 1:
                raise RuntimeError("node lost")
            return super().__getitem__(i)

    with pytest.raises(RuntimeError, match="node lost"):
        _fit(tmp_path / "crash", Crash(), checkpoint_every=5)
    ckpt = checkpoints.read_checkpoint(tmp_path / "crash" / checkpoints.CHECKPOINT_NAME)
    assert ckpt["step"] == 10 and ckpt["in_epoch"]["batches"] == 2
    resumed = _fit(tmp_path / "crash", SignalAt(), resume=True, checkpoint_every=5)
    assert resumed.resumed_from_step == 10
    assert _numbers(resumed) == _numbers(whole)


def test_checkpoint_every_needs_a_folder_and_a_positive_count():
    with pytest.raises(ValueError, match="checkpoint_dir"):
        setup.FitOptions(checkpoint_every=10)
    with pytest.raises(ValueError, match="at least 1"):
        setup.FitOptions(checkpoint_every=0, checkpoint_dir="x")


def test_watch_catches_repeated_signals_and_restores_the_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with preemption.watch() as request:
        assert not request.requested
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # a second one must not kill the process
        assert request.requested and request.name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == before


# --------------------------------------------------------------------------- the command


HOOKS = Path(__file__).parent / "hooks"
SMOKE_BATCHES = 20  # the smoke profile's max_train_batches: steps per epoch


COMMAND_EPOCHS = 2
"""The signal lands in epoch 2, and the resumed run finishes it: the epoch that
was cut is compared with the uninterrupted one (a third epoch added 1/3 to
each run and checked nothing the second does not)."""


def _train(tmp_path: Path, name: str, *extra: str, nproc: int | None = None, at_step=None):
    """``train mnist-pytorch --epochs 2 --json`` as a reader runs it; with ``at_step``
    a real SIGTERM arrives after that optimizer step (tests/hooks/sitecustomize.py)."""
    env = dict(os.environ, ROCM_DL_GUIDE_PROFILE="smoke")
    env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), str(ROOT / "code"), env.get("PYTHONPATH", "")])
    if at_step is not None:
        env["ROCM_DL_GUIDE_TEST_SIGTERM_AT_STEP"] = str(at_step)
    cmd = [sys.executable, "-m", "rocm_dl_guide", "train", "mnist-pytorch"]
    cmd += ["--epochs", str(COMMAND_EPOCHS)]
    cmd += ["--json", "--checkpoint-dir", str(tmp_path / name), *extra]
    if nproc:
        cmd += ["--nproc", str(nproc)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=hang_limit(140))


def _record(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _losses(record: dict) -> list[tuple]:
    keys = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy")
    return [tuple(row[k] for k in keys) for row in record["history"]]


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "nproc, flags",
    [(None, ()), (2, ()), (2, ("--fsdp",))],
    ids=["one-process", "nproc-2", "nproc-2-fsdp"],
)
def test_sigterm_inside_epoch_2_then_resume_equals_an_uninterrupted_run(tmp_path, nproc, flags):
    whole = _record(_train(tmp_path, "whole", *flags, nproc=nproc))
    at = SMOKE_BATCHES + 3  # the 3rd step of epoch 2
    cut = _train(tmp_path, "cut", *flags, nproc=nproc, at_step=at)
    assert cut.returncode == preemption.EXIT_PREEMPTED, cut.stderr[-3000:]
    assert "--resume" in cut.stderr.splitlines()[-1]
    ckpt = checkpoints.read_checkpoint(tmp_path / "cut" / checkpoints.CHECKPOINT_NAME)
    where = ckpt["in_epoch"]
    assert ckpt["epoch"] == 1 and where["epoch"] == 2, where
    if nproc is None:
        assert ckpt["step"] == at and where["batches"] == 3
    else:  # the agent passes the signal on: every rank stops after the same later step
        assert at <= ckpt["step"] < 2 * SMOKE_BATCHES and len(where["ranks"]) == nproc
    assert f"step {ckpt['step']}" in cut.stderr.splitlines()[-1]
    if flags:  # FSDP: the model and optimizer are in the DCP folder of that step
        assert ckpt["sharded"] == f"{checkpoints.SHARDED_STEP_PREFIX}{ckpt['step']}"

    resumed = _record(_train(tmp_path, "cut", "--resume", *flags, nproc=nproc))
    assert resumed["resumed_from_step"] == ckpt["step"]
    assert resumed["epochs_completed"] == COMMAND_EPOCHS
    assert _losses(resumed) == _losses(whole)


SBATCH = ROOT / "book" / "distributed" / "train-requeue.sbatch"


@pytest.mark.timeout(60)
def test_the_slurm_script_forwards_sigterm_and_requeues_on_exit_75(tmp_path):
    """The page's Slurm script, run by bash with stand-ins for ``python`` (a job
    that exits 75 on SIGTERM, as ``train`` does) and ``scontrol``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(
        "#!/bin/bash\n"
        f'echo "$@" > {tmp_path}/args\n'
        "sleep 50 >/dev/null 2>&1 &\n"
        "trap 'kill $!; exit 75' TERM\n"
        "wait\n"
    )
    (bin_dir / "scontrol").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path}/scontrol\n')
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.update(SLURM_JOB_ID="4242", SLURM_GPUS_ON_NODE="2", CHECKPOINTS=str(tmp_path / "ck"))
    job = subprocess.Popen(["bash", str(SBATCH)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + hang_limit(7)
        while not (tmp_path / "args").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the trap is set right after the job starts
        job.send_signal(signal.SIGTERM)  # what --signal=B:TERM@120 does
        out, _ = job.communicate(timeout=hang_limit(7))
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == preemption.EXIT_PREEMPTED
    assert (tmp_path / "args").read_text().split() == [
        "-m", "rocm_dl_guide", "train", "cifar10", "--nproc", "2",
        "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "500", "--resume",
    ]  # fmt: skip
    assert (tmp_path / "scontrol").read_text().split() == ["requeue", "4242"]
    assert "requeueing job 4242" in out
