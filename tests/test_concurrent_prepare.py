"""Several processes preparing the same data at once (issue 27).

Each process is a fresh interpreter, as torchrun's ranks are, and they are
told to start preparing at the same instant on an empty data cache; more
processes than this machine has cores, for many rounds. One of them builds,
the others wait for its build lock and then read its copy, whole. Every child
process is started by the test and, if it overruns, killed with the processes
it started, nothing else; torchrun jobs pick their own free port
(``--standalone``).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import hang_limit
from rocm_dl_guide.core import distributed, files, fixtures, profiles

PROCESSES = 6
"""More processes than the test machines' cores, so they really interleave."""
ROUNDS = 10

WORKER = textwrap.dedent(
    """
    import dataclasses, pickle, shutil, sys, time
    from pathlib import Path

    go, mode, source = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    from rocm_dl_guide.core import archives, dataset_registry, datasets, profiles

    if mode == "fetch":  # the real-download path, served from a local file
        log = source.parent / "downloads.log"

        def downloader(url, output_file, pooch):
            time.sleep(0.2)  # a download takes a while: the window for the others
            shutil.copyfile(source, output_file)
            with open(log, "a") as fh:
                fh.write(url + "\\n")

        spec = dataset_registry.REGISTRY["cifar10"]
        digest = source.with_suffix(".sha256").read_text()
        rf = dataclasses.replace(spec.files[0], sha256=digest, md5=None)
        dataset_registry.REGISTRY["cifar10"] = dataclasses.replace(spec, files=(rf,))
        datasets._DOWNLOADER = downloader

    print("ready", flush=True)
    while not go.exists():  # the start line: every worker has imported and waits
        time.sleep(0.0005)
    if mode == "fixture":
        prepared = datasets.prepare("mnist", profiles.current("smoke"))
        raw = prepared.root / "MNIST" / "raw"
        counts = {}
        for stem in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
            counts[stem] = len(archives.load_idx(raw / stem))
            assert len(archives.load_idx(raw / (stem + ".gz"))) == counts[stem]
        assert counts["train-images-idx3-ubyte"] == counts["train-labels-idx1-ubyte"] > 0
        assert counts["t10k-images-idx3-ubyte"] == counts["t10k-labels-idx1-ubyte"] > 0
        n = counts["train-images-idx3-ubyte"]
    else:
        root = datasets.fetch("cifar10")
        n = 0
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            with open(root / "cifar-10-batches-py" / name, "rb") as fh:
                batch = pickle.load(fh, encoding="bytes")
            assert len(batch[b"data"]) == len(batch[b"labels"]) > 0
            n += len(batch[b"labels"])
    print("read", n, "samples")
    """
)


def spawn(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own (so that it and its children can be killed);
    :func:`finish` waits for it, bounded by a deadline."""
    return subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(procs: list[subprocess.Popen], deadline: float) -> list[str]:
    """Each process's output; kills every one of them (and what they started) past ``deadline``."""
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=max(0.1, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        pytest.fail(f"processes still running after the deadline: {[p.args for p in procs]}")
    return outs


def start_together(procs: list[subprocess.Popen], go: Path, deadline: float) -> None:
    """Wait until each process has printed ``ready`` (its imports are done and it
    polls for ``go``), then create ``go``: they all leave the start line within
    a millisecond of each other, as torchrun's ranks do, without a fixed delay."""
    try:
        for proc in procs:
            line = ""
            while line != "ready":
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([proc.stdout], [], [], wait)[0]:
                    return  # past the deadline: finish() stops them all
                line = proc.stdout.readline()
                if not line:
                    break  # it died before the start: finish() reports its output
                line = line.strip()
    finally:
        go.touch()


def child_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, ROCM_DL_GUIDE_DATA=str(cache))
    env.pop(profiles.DATA_SOURCE_VAR, None)
    return env


def race(tmp_path: Path, mode: str, source: Path, rounds: int) -> list[tuple[Path, list[str]]]:
    """``rounds`` times: :data:`PROCESSES` workers on a new empty cache, started together."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    results = []
    for r in range(rounds):
        cache, go = tmp_path / f"cache-{r}", tmp_path / f"go-{r}"
        procs = [
            spawn([sys.executable, str(script), str(go), mode, str(source)], child_env(cache))
            for _ in range(PROCESSES)
        ]
        deadline = time.monotonic() + hang_limit(20)
        start_together(procs, go, deadline)
        outs = finish(procs, deadline)
        failed = [out for proc, out in zip(procs, outs, strict=True) if proc.returncode != 0]
        assert not failed, f"round {r}: {len(failed)} of {PROCESSES} failed:\n{failed[0][-2000:]}"
        results.append((cache, outs))
    return results


def no_leftovers(folder: Path) -> list[str]:
    """Hidden staging, extraction or set-aside directories left in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and p.is_dir())


# --------------------------------------------------------------------------- many processes


@pytest.mark.timeout(400)
def test_processes_preparing_one_fixture_at_once_all_read_it_whole(tmp_path):
    """The failure of issue 27: ranks generating the MNIST fixture deleted each
    other's copy while it was being read (about 1 start in 8 with 4 processes)."""
    rounds = race(tmp_path, "fixture", tmp_path, ROUNDS)
    for cache, outs in rounds:
        counts = {out.strip().splitlines()[-1] for out in outs}
        assert len(counts) == 1 and counts.pop().startswith("read ")
        waits = sum(out.count("waiting for another process preparing") for out in outs)
        assert waits <= PROCESSES - 1  # at most one line per waiting process
        assert no_leftovers(cache / "fixtures") == []
        assert sorted(p.name for p in (cache / "fixtures").iterdir()) == [".mnist.lock", "mnist"]


@pytest.mark.timeout(300)
def test_processes_downloading_one_data_set_at_once_download_it_once(tmp_path):
    """Eight ranks on a fresh node asking for CIFAR-10: one downloads, verifies
    and extracts it, the others wait and load that copy."""
    archive = fixtures.write_archive("cifar10", tmp_path / "serve" / "cifar-10-python.tar.gz")
    archive.with_suffix(".sha256").write_text(hashlib.sha256(archive.read_bytes()).hexdigest())
    log = archive.parent / "downloads.log"
    rounds = race(tmp_path, "fetch", archive, 5)
    assert len(log.read_text().splitlines()) == len(rounds)  # one download per round
    for cache, outs in rounds:
        assert len({out.strip().splitlines()[-1] for out in outs}) == 1
        assert no_leftovers(cache / "real") == []
        assert not (cache / "downloads" / "cifar10").exists()  # the archive went once used


# --------------------------------------------------------------------------- the pieces


@pytest.mark.timeout(30)
def test_a_complete_target_is_never_removed_by_a_second_staged_directory(tmp_path):
    root = tmp_path / "mnist"

    def complete(path: Path) -> bool:
        return (path / "done").is_file()

    with files.staged_directory(root, is_complete=complete) as late:
        (late / "who").write_text("late")
        with files.staged_directory(root, is_complete=complete) as early:
            (early / "who").write_text("early")
            (early / "done").touch()
        inode = root.stat().st_ino
        reader = open(root / "who")  # another process reading the first copy
        (late / "done").touch()
    assert reader.read() == "early"
    reader.close()
    assert root.stat().st_ino == inode and (root / "who").read_text() == "early"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnist"]  # the late copy went

    # An incomplete leftover (a process killed while filling it by hand) is replaced.
    (root / "done").unlink()
    with files.staged_directory(root, is_complete=complete) as staged:
        (staged / "who").write_text("new")
        (staged / "done").touch()
    assert (root / "who").read_text() == "new" and complete(root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnist"]


@pytest.mark.timeout(30)
def test_prepare_once_builds_once_and_never_locks_a_complete_target(tmp_path):
    target = tmp_path / "artefact"
    built = []

    def build() -> None:
        built.append(1)
        target.write_text("done")

    assert files.prepare_once(target, Path.exists, build) is True
    assert files.prepare_once(target, Path.exists, build) is False
    assert built == [1]
    assert files.lock_path(target) == tmp_path / ".artefact.lock"
    files.lock_path(target).unlink()
    tmp_path.chmod(0o555)  # a read-only cache that holds the artefact is used as it is
    try:
        assert files.prepare_once(target, Path.exists, build) is False
    finally:
        tmp_path.chmod(0o755)
    assert not files.lock_path(target).exists()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from rocm_dl_guide.core import files

    target = Path(sys.argv[1])
    with files.build_lock(target):
        print("holding", flush=True)
        time.sleep(1.5)
        target.write_text("built by the holder")
    """
)


@pytest.mark.timeout(60)
def test_a_waiting_process_says_so_once_and_uses_the_copy_built_meanwhile(tmp_path, capfd):
    target = tmp_path / "artefact"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = spawn([sys.executable, str(script), str(target)], dict(os.environ))
    try:
        assert holder.stdout.readline().strip() == "holding"

        def build() -> None:
            raise AssertionError("built again although the holder had built it")

        assert files.prepare_once(target, Path.exists, build, what="the test artefact") is False
    finally:
        finish([holder], time.monotonic() + hang_limit(10))
    assert holder.returncode == 0 and target.read_text() == "built by the holder"
    err = capfd.readouterr().err
    lock = files.lock_path(target)
    assert err.count("waiting for another process") == 1
    assert f"waiting for another process preparing the test artefact (lock {lock})" in err


EXPORTER = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from torch import nn
    from rocm_dl_guide.optimization import onnx_files

    go, path = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 2))
    real_export = onnx_files.export_onnx

    def counting_export(*args, **kwargs):
        print("exported", flush=True)
        return real_export(*args, **kwargs)

    onnx_files.export_onnx = counting_export
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)
    onnx = onnx_files.export_once(model, path, image_size=16)
    print("read", onnx.input_name, onnx.output_name)
    """
)


@pytest.mark.timeout(180)
def test_processes_exporting_one_onnx_model_at_once_export_it_once(tmp_path):
    script = tmp_path / "exporter.py"
    script.write_text(EXPORTER)
    target = tmp_path / "models" / "net.onnx"
    go = tmp_path / "go"
    procs = [
        spawn([sys.executable, str(script), str(go), str(target)], dict(os.environ))
        for _ in range(3)
    ]
    deadline = time.monotonic() + hang_limit(40)
    start_together(procs, go, deadline)
    outs = finish(procs, deadline)
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(o[-1500:] for o in outs)
    assert sum(out.count("exported") for out in outs) == 1
    assert all(out.strip().splitlines()[-1] == "read image logits" for out in outs)
    record = json.loads((tmp_path / "models" / "net.onnx.export.json").read_text())
    assert record["size"] == target.stat().st_size


# --------------------------------------------------------------------------- torchrun

ORDERED = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from rocm_dl_guide.core import distributed

    out, rank = Path(sys.argv[1]), int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    with distributed.local_main_first("the test data"):
        if local == 0:
            time.sleep(1.0)
            (out / "data").write_text("prepared")
        else:
            assert (out / "data").read_text() == "prepared", "ran before local rank 0 was done"
    try:
        with distributed.local_main_first("the second data set"):
            if local == 0:
                raise ValueError("no network here")
            print(f"rank {rank} ran the block although local rank 0 failed", flush=True)
    except (ValueError, RuntimeError) as exc:
        print(f"rank {rank}: {type(exc).__name__}: {exc}", flush=True)
    distributed.shutdown()
    """
)


@pytest.mark.timeout(200)
def test_local_rank_0_prepares_first_and_its_failure_stops_the_others(tmp_path):
    script = tmp_path / "ordered.py"
    script.write_text(ORDERED)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3"]
    proc = spawn([*cmd, str(script), str(tmp_path)], distributed.launcher_env())
    out = finish([proc], time.monotonic() + hang_limit(60))[0]
    assert proc.returncode == 0, out[-3000:]
    assert out.count("data: the test data prepared by local rank 0 before the other ranks") == 1
    assert "rank 0: ValueError: no network here" in out
    for rank in (1, 2):
        said = f"rank {rank}: RuntimeError: a node's local rank 0 could not prepare the second"
        assert said in out
    assert "although local rank 0 failed" not in out


@pytest.mark.timeout(320)
def test_train_nproc_4_on_an_empty_cache(tmp_path):
    """The command of issue 27, four ranks on an empty cache: the node prepares
    the data once, and the log says how."""
    env = child_env(tmp_path / "data")
    env["ROCM_DL_GUIDE_RUNS"] = str(tmp_path / "runs")
    cmd = [sys.executable, "-m", "rocm_dl_guide", "train", "mnist-pytorch", "--nproc", "4"]
    cmd += ["--profile", "smoke", "--epochs", "1", "--checkpoint-dir", str(tmp_path / "ckpt")]
    proc = spawn(cmd, env)
    out = finish([proc], time.monotonic() + hang_limit(100))[0]
    assert proc.returncode == 0, out[-3000:]
    assert out.count("data: the MNIST fixture prepared by local rank 0") == 1
    assert "waiting for another process" not in out  # the other ranks waited at the barrier
    assert "PyTorch MNIST: test accuracy" in out
    assert sorted(p.name for p in (tmp_path / "data" / "fixtures").iterdir()) == [
        ".mnist.lock",
        "mnist",
    ]
