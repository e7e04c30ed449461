"""Crash-safe writes (rocm_dl_guide.core.files): the old file or the new one, never half."""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocm_dl_guide.core import files

# Writes 1 MiB into the temporary file, says "ready", then keeps writing slowly.
CHILD = textwrap.dedent(
    """
    import sys, time
    from rocm_dl_guide.core.files import atomic_write

    chunk = b"n" * (1 << 20)
    with atomic_write(sys.argv[1]) as fh:
        fh.write(chunk)
        fh.flush()
        print("ready", flush=True)
        for _ in range(1200):
            fh.write(chunk)
            time.sleep(0.05)
    print("finished", flush=True)
    """
)


def test_sigkill_while_writing_leaves_the_old_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "model.bin"
    old = os.urandom(4096)
    target.write_bytes(old)
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the child did not start writing within 120 s"
        line = proc.stdout.readline().strip()
        assert line == "ready", (line, proc.stderr.read() if proc.poll() is not None else "")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()

    assert target.read_bytes() == old
    leftovers = sorted(p for p in tmp_path.iterdir() if p != target)
    assert len(leftovers) <= 1, leftovers
    for p in leftovers:
        assert p.name.startswith(".model.bin.") and p.name.endswith(".tmp"), p.name
        assert p.stat().st_size >= 1 << 20  # it really was killed in the middle of writing
    assert files.stale_temp_files(target) == leftovers


def test_exception_inside_the_block_leaves_the_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "marker.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError, match="disk full"):
        with files.atomic_write(target, "w") as fh:
            fh.write("new and half")
            raise RuntimeError("disk full")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["marker.json"]

    # a new file that fails is not created at all
    fresh = tmp_path / "fresh.bin"
    with pytest.raises(KeyboardInterrupt):
        with files.atomic_write(fresh) as fh:
            fh.write(b"x")
            raise KeyboardInterrupt
    assert [p.name for p in tmp_path.iterdir()] == ["marker.json"]


def test_atomic_write_replaces_and_creates(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.txt"
    with files.atomic_write(target, "w") as fh:
        fh.write("first ✓")
    assert target.read_text(encoding="utf-8") == "first ✓"
    with files.atomic_write(target) as fh:
        fh.write(b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0o600
    with pytest.raises(ValueError, match="mode"):
        with files.atomic_write(target, "a"):
            pass


def test_atomic_path_for_writers_that_take_a_file_name(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    with files.atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".model.onnx.")
        tmp.write_bytes(b"onnx")
        assert not target.exists()
    assert target.read_bytes() == b"onnx"
    with pytest.raises(OSError):
        with files.atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise OSError(28, "No space left on device")
    assert target.read_bytes() == b"onnx"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_staged_directory_swaps_in_or_leaves_the_old_one(tmp_path: Path) -> None:
    root = tmp_path / "mnist"
    root.mkdir()
    (root / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with files.staged_directory(root) as staged:
            (staged / "new.txt").write_text("new")
            raise RuntimeError("interrupted")
    assert [p.name for p in tmp_path.iterdir()] == ["mnist"]
    assert [p.name for p in root.iterdir()] == ["old.txt"]

    with files.staged_directory(root) as staged:
        assert staged.name.startswith(".mnist.build-")
        (staged / "new.txt").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["mnist"]
    assert [p.name for p in root.iterdir()] == ["new.txt"]


def test_paths_under_the_home_folder_are_shown_from_tilde(monkeypatch, tmp_path: Path) -> None:
    """Messages and pages print ``~/.cache/...``, not ``/root/.cache/...`` or a
    user's name (issue 44); other paths stay as they are."""
    from rocm_dl_guide.core import files

    monkeypatch.setenv("HOME", str(tmp_path / "home" / "ada"))
    for variable in files.SHOWN_FOLDERS:
        monkeypatch.delenv(variable, raising=False)
    assert files.shown(tmp_path / "home" / "ada" / ".cache" / "x.pt") == "~/.cache/x.pt"
    assert files.shown(str(tmp_path / "elsewhere")) == str(tmp_path / "elsewhere")
    assert files.shown(tmp_path / "home" / "adam") == str(tmp_path / "home" / "adam")


def test_paths_under_the_guides_own_folders_are_shown_from_their_variables(
    monkeypatch, tmp_path: Path
) -> None:
    """Where ROCM_DL_GUIDE_RUNS or ROCM_DL_GUIDE_DATA names the folder (a test
    session's, a cluster's scratch disk), a page prints the variable, not the
    machine's path (issue 56); the home folder still prints as ~."""
    from rocm_dl_guide.core import files

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(tmp_path / "scratch" / "runs") + "/")
    monkeypatch.setenv("ROCM_DL_GUIDE_DATA", str(tmp_path / "home" / "data"))
    runs = tmp_path / "scratch" / "runs"
    assert files.shown(runs / "cifar10" / "last.pt") == "$ROCM_DL_GUIDE_RUNS/cifar10/last.pt"
    assert files.shown(runs) == "$ROCM_DL_GUIDE_RUNS"
    assert files.shown(tmp_path / "home" / "data" / "x") == "$ROCM_DL_GUIDE_DATA/x"
    assert files.shown(tmp_path / "home" / "other") == "~/other"
    assert files.shown(tmp_path / "scratch" / "runs2") == str(tmp_path / "scratch" / "runs2")
    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", "")
    assert files.shown(runs / "x") == str(runs / "x")
