"""A full disk: every writer says so in one line, and leaves nothing half-written.

The writes here really come up short. A child process runs with a file-size
limit (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored), so a write past it fails with
EFBIG as on a full disk, whoever runs the tests; as root, a small tmpfs
(``mount -t tmpfs -o size=1m``) fills up for real and writes fail with ENOSPC
(skipped with the reason where it cannot be mounted). Each test checks the
one-line :class:`rocm_dl_guide.core.files.DiskFullError` (the file, the free space,
what is intact, what to do), that the earlier file is unchanged and that no
temporary file or folder is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from conftest import LEAN_PYTHON, ROOT
from rocm_dl_guide.core import files, runs
from rocm_dl_guide.training import checkpoints

# Sets the file-size limit (argv[1] bytes), ignores SIGXFSZ (so a write past
# the limit fails with EFBIG instead of killing the process) and becomes the
# command in argv[2:]; both survive the exec.
LIMITED = (
    "import os, resource, signal, sys; "
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


def run_limited(
    limit: int | None, *args: str, timeout: int = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``python ARGS`` in a child with a file-size limit of ``limit`` bytes (None: none)."""
    env = {
        **os.environ,
        "ROCM_DL_GUIDE_PROFILE": "smoke",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(env or {}),
    }
    prefix = [sys.executable] if limit is None else [sys.executable, "-c", LIMITED, str(limit)]
    return subprocess.run(
        [*prefix, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def child_error(script: str, limit: int, *argv: str, env: dict | None = None) -> dict:
    """Run ``script`` (which must raise) under the limit; the DiskFullError as a dict.

    The script's exception is caught in the child and written as JSON on
    stdout: its type, ``str()``, errno and DiskFullError's attributes."""
    wrapper = textwrap.dedent(
        """
        import json, sys
        code = sys.argv.pop(1)  # the script sees its own arguments from sys.argv[1]
        try:
            exec(compile(code, "<script>", "exec"), {"__name__": "__child__"})
        except BaseException as exc:  # DCP's CheckpointException is one
            out = {"type": type(exc).__name__, "message": str(exc),
                   "errno": getattr(exc, "errno", None)}
            for name in ("path", "free_bytes", "intact", "advice", "reason"):
                value = getattr(exc, name, None)
                out[name] = str(value) if name == "path" and value is not None else value
            print(json.dumps(out))
        else:
            print(json.dumps({"type": None}))
        """
    )
    proc = run_limited(limit, "-c", wrapper, textwrap.dedent(script), *argv, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def leftovers(folder: Path) -> list[str]:
    """Temporary files and staging folders under ``folder`` (none should survive a failure)."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.name.endswith(files.TEMP_SUFFIX)
        or ".build-" in p.name
        or ".extract-" in p.name
        or p.name.endswith(".partial")
    )


def assert_one_line(message: str, path: Path | str) -> None:
    assert "\n" not in message
    assert message.startswith("disk full"), message
    assert f"could not write {path}" in message, message
    assert " free in " in message, message


@contextlib.contextmanager
def small_tmpfs(where: Path, options: str = "size=1m") -> Iterator[Path]:
    """A tmpfs of its own at ``where`` (root only), unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {(proc.stderr or proc.stdout).strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, timeout=60).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)


def fill(folder: Path) -> None:
    """Write into ``folder`` until its file system is full."""
    with open(folder / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while fh.write(b"\0" * 4096):
            pass


# --------------------------------------------------------------------------- the classifier


@pytest.mark.timeout(30)
def test_the_classifier_knows_a_full_disk_from_other_errors(tmp_path: Path) -> None:
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        assert files.is_disk_full(OSError(code, os.strerror(code)))
    for text in (
        "[enforce fail at inline_container.cc:672] . unexpected pos 267840 vs 267728",
        "PytorchStreamWriter failed writing file data/0: file write failed",
    ):
        assert files.is_disk_full(RuntimeError(text))
    assert not files.is_disk_full(OSError(errno.ENOENT, "No such file or directory"))
    assert not files.is_disk_full(ValueError("unexpected pos"))
    assert not files.is_disk_full(RuntimeError("CUDA out of memory"))
    # Raised while handling one: torch's RuntimeError after Python's EFBIG, a
    # DCP CheckpointException holding each rank's failure.
    try:
        try:
            raise OSError(errno.EFBIG, "File too large")
        except OSError:
            raise RuntimeError("something else went wrong") from None
    except RuntimeError as exc:
        assert not files.is_disk_full(exc)  # `from None`: not its cause
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("could not save the model")  # noqa: B904 - the point
    except RuntimeError as exc:
        assert files.is_disk_full(exc)  # raised while handling ENOSPC
    from torch.distributed.checkpoint.api import CheckpointException

    dcp_failure = CheckpointException("write", {0: RuntimeError("unexpected pos 704 vs 598")})
    assert files.is_disk_full(dcp_failure)

    err = files.disk_full_from(OSError(errno.ENOSPC, "No space left"), tmp_path / "a" / "b.pt")
    assert isinstance(err, files.DiskFullError) and isinstance(err, OSError)
    assert err.errno == errno.ENOSPC and err.path == tmp_path / "a" / "b.pt"
    assert err.free_bytes is not None and err.free_bytes > 0  # measured on tmp_path
    assert err.intact is None and err.advice == files.RETRY_ADVICE
    assert_one_line(str(err), tmp_path / "a" / "b.pt")
    assert f" free in {tmp_path});" in str(err)  # the nearest existing parent
    assert "nothing half-written was left behind" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.errno == errno.ENOSPC
    assert files.disk_full_from(ValueError("no"), tmp_path) is None


# --------------------------------------------------------------------------- atomic files


@pytest.mark.timeout(60)
def test_atomic_write_past_the_limit_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.bin"
    target.write_bytes(b"old contents")
    got = child_error(
        """
        import sys
        from rocm_dl_guide.core import files
        with files.atomic_write(sys.argv[1]) as fh:
            fh.write(b"x" * 200_000)
        """,
        50_000,
        str(target),
    )
    assert got["type"] == "DiskFullError" and got["errno"] == errno.ENOSPC
    assert got["path"] == str(target) and got["reason"].startswith("disk full")
    assert got["intact"] == f"the earlier {target} is unchanged"
    assert_one_line(got["message"], target)
    assert target.read_bytes() == b"old contents"
    assert leftovers(tmp_path) == [] and files.stale_temp_files(target) == []


@pytest.mark.timeout(60)
def test_torch_save_past_the_limit_names_the_last_good_checkpoint(tmp_path: Path) -> None:
    """torch.save's own failure (its zip writer's RuntimeError, or Python's EFBIG)
    becomes one line naming last.pt and its epoch, with the advice to resume."""
    last = tmp_path / checkpoints.CHECKPOINT_NAME
    checkpoints.atomic_torch_save({"format": checkpoints.FORMAT, "epoch": 3}, last)
    before = last.read_bytes()
    got = child_error(
        """
        import sys, torch
        from pathlib import Path
        from rocm_dl_guide.training import checkpoints
        checkpoints.atomic_torch_save({"w": torch.zeros(100_000)}, Path(sys.argv[1]))
        """,
        100_000,
        str(tmp_path / checkpoints.BEST_NAME),
    )
    assert got["type"] == "DiskFullError", got
    assert got["intact"] == f"the last good checkpoint {last} (epoch 3) is intact"
    assert got["advice"] == files.RESUME_ADVICE and "--resume" in got["message"]
    assert_one_line(got["message"], tmp_path / checkpoints.BEST_NAME)
    assert last.read_bytes() == before
    assert leftovers(tmp_path) == []


@pytest.mark.timeout(60)
def test_dcp_shards_past_the_limit_leave_no_partial_folder(tmp_path: Path) -> None:
    """sharded.save (DCP) writes into a hidden folder and renames it when complete;
    a short write (DCP's CheckpointException around torch's) removes that folder."""
    script = """
        import sys, warnings
        from pathlib import Path
        import torch
        from torch import nn
        from rocm_dl_guide.training import sharded
        warnings.simplefilter("ignore")  # DCP without a process group says so
        model = nn.Linear(200, 200)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        sharded.save(Path(sys.argv[1]), model, optimizer)
        """
    earlier = tmp_path / "sharded-epoch-1"
    assert child_error(script, 10**9, str(earlier))["type"] is None
    assert (earlier / ".metadata").is_file()
    target = tmp_path / "sharded-epoch-2"
    got = child_error(script, 50_000, str(target))  # a shard holds 160 kB of weights
    assert got["type"] == "DiskFullError", got
    assert got["path"] == str(target) and got["advice"] == files.RESUME_ADVICE
    assert "sharded-epoch-1" in got["intact"]
    assert_one_line(got["message"], target)
    assert not target.exists() and (earlier / ".metadata").is_file()
    assert leftovers(tmp_path) == []


# --------------------------------------------------------------------------- train


@pytest.mark.timeout(120)
def test_train_on_a_full_disk_says_so_and_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    """``train cifar10``: epoch 1's last.pt fits under the limit, epoch 2's (a longer
    history) does not; the command says so in one line and --resume continues."""
    ckpt = tmp_path / "ckpt"
    train = ["-m", "rocm_dl_guide", "train", "cifar10", "--profile", "smoke"]
    first = run_limited(None, *train, "--epochs", "1", "--checkpoint-dir", str(ckpt))
    assert first.returncode == 0, first.stderr[-3000:]
    last = ckpt / checkpoints.CHECKPOINT_NAME
    size, good = last.stat().st_size, last.read_bytes()

    full = run_limited(size, *train, "--epochs", "2", "--resume", "--checkpoint-dir", str(ckpt))
    assert full.returncode == 1, full.stdout + full.stderr
    line = full.stderr.strip().splitlines()[-1]
    assert "Traceback" not in full.stderr and "unexpected pos" not in full.stderr
    assert line.startswith("train: disk full"), line
    assert_one_line(line.removeprefix("train: "), last)
    assert f"the last good checkpoint {last} (epoch 1) is intact" in line
    assert line.endswith("rerun the same command with --resume"), line
    assert last.read_bytes() == good
    assert checkpoints.read_checkpoint(last)["epoch"] == 1
    assert leftovers(ckpt) == []

    again = run_limited(
        None, *train, "--epochs", "2", "--resume", "--checkpoint-dir", str(ckpt), "--json"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    record = json.loads(again.stdout.strip().splitlines()[-1])
    assert record["resumed_from_epoch"] == 1 and record["epochs_completed"] == 2


@pytest.mark.timeout(120)
def test_train_on_a_full_tmpfs(tmp_path: Path) -> None:
    """A real full file system: 1 MiB holds epoch 1's last.pt and best.pt, not epoch 2's."""
    with small_tmpfs(tmp_path / "mnt") as mnt:
        ckpt = mnt / "ckpt"
        proc = run_limited(
            None,
            *["-m", "rocm_dl_guide", "train", "cifar10", "--profile", "smoke"],
            *["--epochs", "2", "--checkpoint-dir", str(ckpt)],
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert "Traceback" not in proc.stderr
        assert line.startswith("train: disk full: could not write "), line
        assert " free in " in line and "--resume" in line
        last = ckpt / checkpoints.CHECKPOINT_NAME
        assert f"the last good checkpoint {last} (epoch 1) is intact" in line
        assert checkpoints.read_checkpoint(last)["epoch"] == 1
        assert leftovers(mnt) == []


# --------------------------------------------------------------------------- data


@pytest.mark.timeout(60)
def test_fixture_prepare_on_a_full_disk_leaves_no_staged_folder(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    got = child_error(
        """
        from rocm_dl_guide.core import datasets
        datasets.prepare_fixture("cifar10")
        """,
        100_000,  # the fixture's data batches are about 600 kB each
        env={"ROCM_DL_GUIDE_DATA": str(cache)},
    )
    root = cache / "fixtures" / "cifar10"
    assert got["type"] == "DiskFullError", got
    assert got["path"].startswith(str(root)), got  # the file's place, not the staged folder
    assert_one_line(got["message"], got["path"])
    assert not root.exists()
    assert leftovers(cache) == []


@pytest.mark.timeout(60)
def test_extraction_on_a_full_disk_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    archive = tmp_path / "data.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("small.txt", b"hello\n"), ("big.bin", os.urandom(300_000))):
            info = tarfile.TarInfo(f"top/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "old.txt").write_text("kept\n")
    got = child_error(
        """
        import sys
        from pathlib import Path
        from rocm_dl_guide.core import archives
        archives.extract_archive(Path(sys.argv[1]), Path(sys.argv[2]))
        """,
        100_000,
        str(archive),
        str(dest),
    )
    assert got["type"] == "DiskFullError", got  # not "corrupt or truncated archive"
    assert got["path"] == str(dest) and got["intact"] == f"the earlier {dest} is unchanged"
    assert_one_line(got["message"], dest)
    assert sorted(p.name for p in dest.iterdir()) == ["old.txt"]
    assert leftovers(tmp_path) == []


@pytest.mark.timeout(60)
def test_download_on_a_full_disk_keeps_no_partial_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    got = child_error(
        """
        from pathlib import Path
        from rocm_dl_guide.core import datasets

        def downloader(url, output_file, pooch):  # a server sending 300 kB, written for real
            with open(output_file, "wb") as fh:
                for _ in range(30):
                    fh.write(b"x" * 10_000)

        datasets._DOWNLOADER = downloader
        datasets.fetch("mnist")
        """,
        100_000,
        env={"ROCM_DL_GUIDE_DATA": str(cache)},
    )
    downloads = cache / "downloads" / "mnist"
    assert got["type"] == "DiskFullError", got
    assert Path(got["path"]).parent == downloads
    assert_one_line(got["message"], got["path"])
    assert list(downloads.iterdir()) == []  # pooch's temporary file is gone
    assert not (cache / "real" / "mnist").exists()


# --------------------------------------------------------------------------- exports, reports


@pytest.mark.timeout(60)
def test_onnx_export_on_a_full_disk_keeps_the_old_export(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"an earlier export")
    got = child_error(
        """
        import sys, torch
        from torch import nn
        from rocm_dl_guide.optimization import onnx_files
        model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 6 * 6, 500))
        onnx_files.export_onnx(model, sys.argv[1], image_size=8)
        """,
        50_000,  # the Linear layer alone is about 580 kB
        str(path),
    )
    assert got["type"] == "DiskFullError", got
    assert got["path"] == str(path) and got["intact"] == f"the earlier {path} is unchanged"
    assert_one_line(got["message"], path)
    assert path.read_bytes() == b"an earlier export"
    assert leftovers(tmp_path) == []


@pytest.mark.timeout(90)
def test_doctor_collect_on_a_full_disk(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot.json"
    # The framework probes run in a Python with none (conftest.LEAN_PYTHON): the
    # test is about the snapshot's write, not about importing TensorFlow.
    lean = {"GUIDE_BASE_PYTHON": sys.executable}
    doctor = ("doctor", "--collect", str(snapshot), "--python", str(LEAN_PYTHON))
    proc = run_limited(1000, "-m", "rocm_dl_guide", *doctor, env=lean)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr
    assert line.startswith("doctor: disk full"), line
    assert_one_line(line.removeprefix("doctor: "), snapshot)
    assert not snapshot.exists() and leftovers(tmp_path) == []


@pytest.mark.timeout(60)
def test_a_report_on_a_full_disk(tmp_path: Path) -> None:
    """selfcheck's report files, written through the same helpers."""
    got = child_error(
        """
        import sys
        from rocm_dl_guide.selfcheck.report import Outcome, Report
        check = Outcome("train:mnist", "pass", "x" * 5000, 1.0)
        report = Report("cpu", {}, {}, "smoke", "fixtures", 1, "now", [check])
        report.write(sys.argv[1])
        """,
        2000,
        str(tmp_path / "report"),
    )
    assert got["type"] == "DiskFullError", got
    assert got["path"] == str(tmp_path / "report" / "selfcheck.json")
    assert_one_line(got["message"], got["path"])
    assert leftovers(tmp_path) == []


@pytest.mark.timeout(60)
def test_a_run_folder_on_a_full_tmpfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """runs_dir on a file system without room for one more folder (no inodes left)."""
    with small_tmpfs(tmp_path / "mnt", "size=1m,nr_inodes=8") as mnt:
        monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(mnt / "runs"))
        made = []
        with pytest.raises(files.DiskFullError) as caught:
            for i in range(20):
                made.append(runs.runs_dir(f"run-{i}"))
        assert made, "the tmpfs had no room for even one run folder"
        err = caught.value
        assert err.errno == errno.ENOSPC and err.path.parent == mnt / "runs"
        assert_one_line(str(err), err.path)


@pytest.mark.timeout(60)
def test_a_checkpoint_on_a_full_tmpfs_in_process(tmp_path: Path) -> None:
    """ENOSPC from a really full file system, with last.pt there already."""
    with small_tmpfs(tmp_path / "mnt") as mnt:
        last = mnt / checkpoints.CHECKPOINT_NAME
        checkpoints.atomic_torch_save({"format": checkpoints.FORMAT, "epoch": 7}, last)
        fill(mnt)
        with pytest.raises(files.DiskFullError) as caught:
            checkpoints.atomic_torch_save({"w": torch.zeros(50_000)}, last)
        err = caught.value
        assert err.reason == "disk full" and err.free_bytes == 0
        assert str(err).startswith(f"disk full: could not write {last} (0 B free in {mnt}); ")
        assert f"the last good checkpoint {last} (epoch 7) is intact" in str(err)
        assert torch.load(last, weights_only=True)["epoch"] == 7
        assert leftovers(mnt) == []
