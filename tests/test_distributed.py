"""Distributed training: real torchrun jobs with the gloo backend on the CPU.

Every job here is a real set of processes (torchrun's agent and its workers),
bounded by a timeout, on ports chosen free by torchrun or by the test; a job
that overruns is killed with the processes it started, and nothing else.
"""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from rocm_dl_guide.core import distributed, runs
from rocm_dl_guide.distributed import scaling
from rocm_dl_guide.training import checkpoints, sharded

TIMEOUT = 240


# --------------------------------------------------------------------------- pieces


def test_torchrun_command_standalone_and_multi_node():
    one = distributed.torchrun_command(["pkg", "train", "x"], 2, max_restarts=1)
    assert one[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=2" in one and "--max-restarts=1" in one and "--standalone" in one
    assert one[-4:] == ["-m", "pkg", "train", "x"]
    two = distributed.torchrun_command(["pkg"], 1, nnodes=2, node_rank=1, rdzv_endpoint="h:5")
    assert "--standalone" not in two
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "--rdzv-endpoint=h:5"} <= set(two)
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        distributed.torchrun_command(["pkg"], 1, nnodes=2)
    with pytest.raises(ValueError, match="at least 1"):
        distributed.torchrun_command(["pkg"], 0)


def test_eval_shards_cover_every_sample_once():
    data = TensorDataset(torch.arange(11).float(), torch.arange(11))
    loader = DataLoader(data, batch_size=2)
    seen = []
    for rank in range(3):
        ctx = distributed.Context(rank, 3, rank, "gloo", torch.device("cpu"))
        seen += [int(v) for _, y in distributed.shard_eval_loader(loader, ctx) for v in y]
    assert sorted(seen) == list(range(11))  # no sample padded in twice, none lost


def test_one_process_context_without_torchrun(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    ctx = distributed.setup("cpu")
    assert (ctx.rank, ctx.world_size, ctx.backend, ctx.distributed, ctx.is_main) == (
        0,
        1,
        None,
        False,
        True,
    )
    assert distributed.all_reduce_sums([1.5, 2], ctx.device) == [1.5, 2.0]


def test_run_record_of_a_keras_style_run():
    class Result:
        history = None

    class Run:
        test_accuracy = 0.5
        result = Result()
        device = "CPU"
        profile = "smoke"

    record = runs.run_record("imdb", Run())
    assert record["world_size"] == 1 and record["backend"] is None
    assert record["test_accuracy"] == 0.5 and record["resumed_from_epoch"] is None


def test_lock_refuses_a_second_run_on_the_same_folder(tmp_path):
    """A second job pointed at a checkpoint folder in use fails at once, clearly."""
    lock = distributed.lock_checkpoint_dir(tmp_path)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "rocm_dl_guide",
                "train",
                "cifar10",
                "--epochs",
                "1",
                "--checkpoint-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        lock.release()
    assert proc.returncode == 1
    assert "in use by another training run" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / checkpoints.CHECKPOINT_NAME).exists()  # nothing was written


def test_lock_refuses_before_launching_any_worker(tmp_path):
    """With --nproc, the folder in use is refused by the launcher itself: no torchrun."""
    lock = distributed.lock_checkpoint_dir(tmp_path)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rocm_dl_guide", "train", "cifar10", "--nproc", "2"]
            + ["--epochs", "1", "--checkpoint-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        lock.release()
    assert proc.returncode == 1
    assert "in use by another training run" in proc.stderr, proc.stderr[-2000:]
    assert "Launching" not in proc.stderr  # refused before torchrun was started


# --------------------------------------------------------------------------- the proof


@pytest.fixture(scope="module")
def equivalences():
    """All three variants, in one torchrun job (as the chapter runs them)."""
    found = scaling.run_equivalences(nproc=2, steps=4, batch=8, timeout=TIMEOUT)
    return {r.mode: r for r in found}


def test_one_job_runs_every_variant(equivalences):
    assert list(equivalences) == list(scaling.MODES)
    assert all(r.world_size == 2 and r.steps == 4 for r in equivalences.values())


def test_ddp_equals_one_process_with_the_global_batch(equivalences):
    result = equivalences["ddp"]
    assert result.world_size == 2 and result.equivalent, result
    assert result.max_diff_vs_single <= 1e-5 and result.max_diff_across_ranks == 0.0


@pytest.mark.parametrize("mode", ["no-wrapper", "no-sampler"])
def test_the_classic_bugs_fail_the_same_check(equivalences, mode):
    result = equivalences[mode]
    assert not result.equivalent
    assert result.max_diff_vs_single > 1e-3, result
    if mode == "no-wrapper":  # gradients never averaged: the ranks drift apart
        assert result.max_diff_across_ranks > 1e-3
    else:  # same batches on every rank: the ranks agree, but on the wrong thing
        assert result.max_diff_across_ranks == 0.0


def test_one_mode_alone_matches_its_run_among_all(equivalences):
    alone = scaling.run_equivalence("no-wrapper", nproc=2, steps=4, batch=8, timeout=TIMEOUT)
    assert alone.max_diff_vs_single == equivalences["no-wrapper"].max_diff_vs_single


def test_unknown_modes_are_refused_before_any_launch():
    with pytest.raises(ValueError, match="unknown mode"):
        scaling.run_equivalences(("ddp", "no-such-thing"))
    with pytest.raises(ValueError, match="no mode given"):
        scaling.run_equivalences(())


FIT_WORKER = textwrap.dedent(
    """
    import json, sys, torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from rocm_dl_guide.core import distributed
    from rocm_dl_guide.training import train

    def data():
        g = torch.Generator().manual_seed(7)
        x = torch.randn(64, 12, generator=g)
        return TensorDataset(x, torch.randint(0, 3, (64,), generator=g))

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))

    batch, out = int(sys.argv[1]), sys.argv[2]
    m = model()
    opt = torch.optim.SGD(m.parameters(), lr=0.2)
    result = train.fit(m, DataLoader(data(), batch_size=batch), epochs=2, optimizer=opt,
                       val_loader=DataLoader(data(), batch_size=10), device="cpu",
                       progress=False, log=None)
    if distributed.setup("cpu").is_main:
        json.dump({"params": [p.detach().reshape(-1).tolist() for p in m.parameters()],
                   "world": result.world_size, "backend": result.backend,
                   "val": [h.val_accuracy for h in result.history],
                   "loss": [h.train_loss for h in result.history]}, open(out, "w"))
    distributed.shutdown()
    """
)


def test_the_shared_loop_under_torchrun_equals_one_process(tmp_path):
    """train.fit itself: 2 ranks x batch 4 == one process x batch 8 (no shuffling)."""
    script = tmp_path / "fit_worker.py"
    script.write_text(FIT_WORKER)
    outs = {}
    for name, cmd in (
        ("one", [sys.executable, str(script), "8", str(tmp_path / "one.json")]),
        (
            "ddp",
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node=2",
                str(script),
                "4",
                str(tmp_path / "ddp.json"),
            ],
        ),
    ):
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=TIMEOUT, env=distributed.launcher_env()
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    one, ddp = outs["one"], outs["ddp"]
    assert (one["world"], one["backend"]) == (1, None) and (ddp["world"], ddp["backend"]) == (
        2,
        "gloo",
    )
    for a, b in zip(one["params"], ddp["params"], strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-6)
    assert ddp["val"] == one["val"]  # metrics over the unpadded shards, summed over ranks
    assert ddp["loss"] == pytest.approx(one["loss"], rel=1e-6)


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("uninterrupted")
    run = scaling.train_cli("cifar10", ckpt, nproc=2, extra=("--epochs", "2"), timeout=TIMEOUT)
    assert run.returncode == 0, run.log[-3000:]
    return run, torch.load(ckpt / checkpoints.CHECKPOINT_NAME, weights_only=True)["history"]


def test_train_nproc_2_json(uninterrupted):
    run, history = uninterrupted
    rec = run.record
    assert rec["example"] == "cifar10" and rec["world_size"] == 2 and rec["backend"] == "gloo"
    assert rec["epochs_completed"] == 2 and rec["resumed_from_epoch"] is None
    assert rec["test_accuracy"] > 0.2  # chance is 0.1
    assert rec["img_per_s"] > 0
    assert len(run.lines("epoch 2/2")) == 1  # only rank 0 logs


def test_killed_worker_is_restarted_and_resumes_without_loss(tmp_path, uninterrupted):
    _, expected = uninterrupted
    run = scaling.train_cli(
        "cifar10",
        tmp_path,
        nproc=2,
        max_restarts=1,
        extra=("--epochs", "2"),
        kill_rank_after_epoch=(1, 1),
        timeout=TIMEOUT,
    )
    assert run.killed == [1]
    assert run.returncode == 0, run.log[-3000:]
    assert run.lines("exitcode: -9")  # torchrun saw the SIGKILL ...
    assert run.lines("resuming from")  # ... and the restarted group resumed
    failures = run.worker_failures()  # the page prints these: no interpreter path
    assert failures and all("exitcode: -9" in f and sys.executable not in f for f in failures)
    assert run.record["resumed_from_epoch"] == 1 and run.record["epochs_completed"] == 2
    history = torch.load(tmp_path / checkpoints.CHECKPOINT_NAME, weights_only=True)["history"]
    assert [h["epoch"] for h in history] == [1, 2]  # no epoch lost or repeated
    for got, want in zip(history, expected, strict=True):
        for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy"):
            assert got[key] == pytest.approx(want[key], rel=1e-6), (key, got, want)


def test_a_killed_worker_without_restarts_fails_the_command(tmp_path):
    """The launch runs torchrun's agent in the command's process: a group out of
    restarts still ends the command with exit code 1 and torchrun's summary."""
    run = scaling.train_cli(
        "cifar10",
        tmp_path,
        nproc=2,
        max_restarts=0,
        extra=("--epochs", "3"),
        kill_rank_after_epoch=(1, 1),
        timeout=TIMEOUT,
    )
    assert run.killed == [1]
    assert run.returncode == 1, run.log[-3000:]
    assert run.lines("Root Cause") and run.lines("exitcode: -9")
    assert run.record is None  # no result is reported for a failed job


def test_two_nodes_on_localhost_match_one_node(tmp_path, uninterrupted):
    _, expected = uninterrupted
    run = scaling.two_node_launch("cifar10", tmp_path, extra=("--epochs", "2"), timeout=TIMEOUT)
    assert run.returncode == 0, run.log[-3000:]
    assert run.record["world_size"] == 2
    history = torch.load(tmp_path / checkpoints.CHECKPOINT_NAME, weights_only=True)["history"]
    assert [h["train_loss"] for h in history] == pytest.approx(
        [h["train_loss"] for h in expected], rel=1e-6
    )


def test_fsdp_checkpoint_saved_by_two_ranks_resumes_on_one(tmp_path):
    """FSDP2 shards; DCP writes one file per rank and reshards when one rank loads them."""
    first = scaling.train_cli(
        "mnist-pytorch", tmp_path, nproc=2, extra=("--fsdp", "--epochs", "1"), timeout=TIMEOUT
    )
    assert first.returncode == 0, first.log[-3000:]
    assert first.lines("fully sharded (FSDP2): 2 processes")
    folder = tmp_path / f"{checkpoints.SHARDED_PREFIX}1"
    assert sorted(p.name for p in folder.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    layout = sharded.layout(folder)
    assert set(layout["file"]) == {"__0_0.distcp", "__1_0.distcp"}  # each rank holds a part
    dense = layout[layout["tensor"] == "7.weight"]  # Linear(9216, 128): 64 rows per rank
    assert list(dense["offsets"]) == [(0, 0), (64, 0)] and dense["shape"].iloc[0] == (128, 9216)
    ckpt = torch.load(tmp_path / checkpoints.CHECKPOINT_NAME, weights_only=True)
    assert ckpt["sharded"] == folder.name and ckpt["model"] is None

    second = scaling.train_cli(
        "mnist-pytorch",
        tmp_path,
        nproc=1,
        extra=("--fsdp", "--resume", "--epochs", "2"),
        timeout=TIMEOUT,
    )
    assert second.returncode == 0, second.log[-3000:]
    assert second.record["world_size"] == 1 and second.record["resumed_from_epoch"] == 1
    assert second.record["test_accuracy"] > 0.5  # chance is 0.1
    history = torch.load(tmp_path / checkpoints.CHECKPOINT_NAME, weights_only=True)["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    assert not folder.exists() and (tmp_path / f"{checkpoints.SHARDED_PREFIX}2").is_dir()


def test_throughput_table_from_runs():
    def run(n, ips, seconds):
        record = {"backend": "gloo" if n > 1 else None, "img_per_s": ips}
        return scaling.CliRun(record, 0, "", seconds=seconds)

    frame = scaling.throughput_table({2: run(2, 150.0, 20.0), 1: run(1, 100.0, 10.0)})
    assert list(frame["processes"]) == [1, 2]
    assert list(frame["launcher"]) == ["plain python (no DDP)", "torchrun"]
    assert list(frame["backend"]) == ["-", "gloo"]
    assert list(frame["speed-up"]) == pytest.approx([1.0, 1.5])
    assert list(frame["efficiency"]) == pytest.approx([1.0, 0.75])


def test_jobs_hide_the_gpus_only_when_there_are_fewer_than_processes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert scaling.gpus_hidden(2) and not scaling.gpus_hidden(1)
    env = scaling._job_env(2)  # noqa: SLF001 - the environment the demo jobs get
    assert env["CUDA_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == ""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert not scaling.gpus_hidden(2)  # a CPU machine: gloo anyway, nothing to hide
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert not scaling.gpus_hidden(2) and "CUDA_VISIBLE_DEVICES" not in scaling._job_env(2)


def test_setup_refuses_a_local_rank_without_a_gpu_of_its_own(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(RuntimeError, match="local rank 1 has no GPU of its own: only 1 visible"):
        distributed.setup()


def test_worker_failures_leave_out_the_interpreter_path():
    log = (
        "I1127 agent.py:1] rank 0 ok\n"
        "E1127 api.py:9] failed (exitcode: -9) local_rank: 1 (pid: 42) of binary: "
        "/home/me/.venv/bin/python\n"
    )
    run = scaling.CliRun(None, 1, log)
    assert run.worker_failures() == ["failed (exitcode: -9) local_rank: 1 (pid: 42)"]
