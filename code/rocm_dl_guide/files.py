"""Crash-safe files: the one place that writes to a temporary name, fsyncs and renames.

Every file the package writes into place (checkpoints, ONNX exports, compiled
models, data-set markers) goes through :func:`atomic_write` (a file object) or
:func:`atomic_path` (a temporary path, for writers that want a file name):
the data goes to a hidden temporary file in the target's directory
(``.NAME.<random>.tmp``), is flushed and fsync'ed, renamed over the target
with :func:`os.replace` and the directory is fsync'ed. A reader sees the old
file or the new one, never half of one; an exception removes the temporary
file and leaves the target untouched; a process killed mid-write leaves at
most the hidden temporary file (:func:`stale_temp_files` finds those).

Whole directories built elsewhere and swapped in (a prepared data set) go
through :func:`staged_directory`, which never removes a complete copy that is
already in place.

Cached artefacts that several processes may want at once (a data set eight
torchrun ranks need, a fixture, an ONNX export) are built by one process at a
time: :func:`prepare_once` checks whether the artefact is complete, and only if
not takes its :func:`build_lock` (an OS file lock, ``.NAME.lock`` beside it),
checks again and builds. The others wait for the lock, saying so once on
standard error, and then use what the first one built.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from filelock import FileLock, Timeout

TEMP_SUFFIX = ".tmp"
LOCK_SUFFIX = ".lock"


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
"""Read once: new files get the usual ``0o666 & ~umask`` rather than mkstemp's ``0o600``."""


def temp_prefix(path: str | os.PathLike) -> str:
    """The prefix of :func:`atomic_write`'s temporary files for ``path``: ``.NAME.``."""
    return f".{Path(path).name}."


def stale_temp_files(path: str | os.PathLike) -> list[Path]:
    """Temporary files left next to ``path`` by a process killed while writing it."""
    path = Path(path)
    return sorted(path.parent.glob(temp_prefix(path) + "*" + TEMP_SUFFIX))


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    For writers that take a file name (``torch.onnx.export``,
    ``migraphx.save``, ONNX Runtime's ``optimized_model_filepath``). The
    temporary file exists (empty) when the block starts. When the block ends
    normally it is fsync'ed and renamed over ``path``, and the directory is
    fsync'ed; on any exception it is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=TEMP_SUFFIX)
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", encoding: str | None = None
) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; on success it replaces ``path``.

    ``mode`` is ``"wb"`` (the default) or ``"w"`` (text; ``encoding`` defaults to
    UTF-8). Readers see the old ``path`` or the complete new one, never half;
    an exception inside the block removes the temporary file and leaves
    ``path`` untouched.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', not {mode!r}")
    if mode == "w" and encoding is None:
        encoding = "utf-8"
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as fh:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def remove(path: Path) -> None:
    """Remove a file, a symlink or a whole directory tree at ``path``."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


@contextlib.contextmanager
def staged_directory(
    target: str | os.PathLike,
    label: str = "build",
    is_complete: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """Yield a new hidden directory next to ``target`` to fill; on success it becomes ``target``.

    The directory is ``.NAME.<label>-<random>`` in ``target``'s parent. When the
    block ends normally it is renamed into ``target``'s place (the parent is
    fsync'ed), unless ``is_complete(target)`` says a complete copy is there
    already, put there by another process: that one is kept and the staged
    one discarded, so a copy that others may be reading is never removed. An
    incomplete leftover at ``target`` (or any existing one, without
    ``is_complete``) is first renamed aside and then removed. On an exception
    the staged directory is removed and ``target`` is untouched.

    Two processes building the same ``target`` should hold its
    :func:`build_lock` (:func:`prepare_once` does).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.{label}-", dir=target.parent))
    try:
        yield staged
        if is_complete is not None and is_complete(target):
            return
        _swap_in(staged, target, is_complete)
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)


def _swap_in(staged: Path, target: Path, is_complete: Callable[[Path], bool] | None) -> None:
    """Rename ``staged`` to ``target``, moving whatever is at ``target`` aside first."""
    aside = None
    if target.exists() or target.is_symlink():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, aside / target.name)
    try:
        os.replace(staged, target)
    except OSError:
        # Another process put a directory there between the two renames (it
        # did not hold the build lock): keep it if complete, else fail.
        if is_complete is None or not is_complete(target):
            if aside is not None and not (target.exists() or target.is_symlink()):
                os.replace(aside / target.name, target)  # put the old one back
            raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(target.parent)


def lock_path(target: str | os.PathLike) -> Path:
    """The lock file of ``target``'s :func:`build_lock`: ``.NAME.lock`` beside it."""
    target = Path(target)
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


@contextlib.contextmanager
def build_lock(target: str | os.PathLike, what: str | None = None) -> Iterator[Path]:
    """Hold the lock for building ``target`` (one process at a time) during the block.

    The lock is an OS file lock (``filelock``) on :func:`lock_path`: it is
    released when the block ends or the holder dies, and the lock file stays
    (removing it would let two processes hold "the" lock at once). When
    another process holds it, one line goes to standard error, ``waiting for
    another process preparing WHAT (lock PATH)``, and the block starts once
    that process is done. Yields the lock file's path.
    """
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"waiting for another process preparing {what or Path(target).name} (lock {path})",
            file=sys.stderr,
            flush=True,
        )
        lock.acquire()
    try:
        yield path
    finally:
        lock.release()


def prepare_once(
    target: str | os.PathLike,
    is_complete: Callable[[Path], bool],
    build: Callable[[], object],
    what: str | None = None,
) -> bool:
    """Build ``target`` with ``build()`` unless ``is_complete(target)``; True if this call built it.

    Double-checked: a complete ``target`` is used without taking any lock (so
    a read-only cache works); otherwise the :func:`build_lock` is taken, and
    ``target`` checked again, since the process that held the lock may just
    have built it. ``build`` runs only when it is still missing, so however
    many processes ask at once, one builds and the others use its copy.
    ``what`` names the artefact in the waiting message.
    """
    target = Path(target)
    if is_complete(target):
        return False
    with build_lock(target, what):
        if is_complete(target):
            return False
        build()
    return True
