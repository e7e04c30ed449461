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
through :func:`staged_directory`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIX = ".tmp"


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
    keep_existing: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """Yield a new hidden directory next to ``target`` to fill; on success it becomes ``target``.

    The directory is ``.NAME.<label>-<random>`` in ``target``'s parent. When the
    block ends normally, whatever is at ``target`` is removed and the staged
    directory renamed into its place (the parent is fsync'ed). If the rename
    fails because another process put a directory there first, and
    ``keep_existing(target)`` says that one is complete, it is kept. On an
    exception the staged directory is removed and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.{label}-", dir=target.parent))
    try:
        yield staged
        if target.exists() or target.is_symlink():
            remove(target)
        try:
            os.replace(staged, target)
        except OSError:
            if keep_existing is None or not keep_existing(target):
                raise
        fsync_dir(target.parent)
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)
