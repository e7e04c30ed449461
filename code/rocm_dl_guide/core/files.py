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

A full disk (or quota, or file-size limit) is told in one line: the helpers
here turn ``OSError`` ENOSPC/EDQUOT/EFBIG and PyTorch's zip-writer errors
after a short write (:func:`is_disk_full`) into a :class:`DiskFullError`
naming the file, the space left on its file system, what is still intact and
how to continue, after removing what they had half written.
"""

from __future__ import annotations

import contextlib
import errno
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


# --------------------------------------------------------------------------- a full disk

DISK_FULL_ERRNOS = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk full (quota exceeded)",
    errno.EFBIG: "disk full (file-size limit reached)",
}
"""The ``OSError`` errnos that mean "no room to write this", and how the message says it."""
TORCH_WRITE_FAILURES = (
    "unexpected pos",
    "enforce fail at inline_container",
    "pytorchstreamwriter failed",
    "file write failed",
)
"""What PyTorch's zip writer (``torch.save``, DCP shards) says when a write came up short."""
RETRY_ADVICE = "free some space and run it again"
"""What to do after a full disk, unless the writer knows better (:data:`RESUME_ADVICE`)."""
RESUME_ADVICE = "free some space and rerun the same command with --resume"
"""What to do after a training checkpoint could not be written for want of space."""


def human_bytes(n: int | None) -> str:
    """Bytes in words: ``"170.5 MB"`` (``"?"`` for an unknown amount)."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


SHOWN_FOLDERS = ("ROCM_DL_GUIDE_RUNS", "ROCM_DL_GUIDE_DATA")
"""Environment variables naming the guide's own folders (training runs, data
cache): a path under one that is set prints from the variable."""


def shown(path: str | os.PathLike) -> str:
    """``path`` as messages and pages print it, naming no user and no machine:
    under a folder that one of :data:`SHOWN_FOLDERS` sets, from that variable
    (``$ROCM_DL_GUIDE_RUNS/cifar10/last.pt``); else under the home folder as
    ``~/...``, which reads the same on every reader's machine; else as it is."""
    path = Path(os.path.abspath(path))
    for variable in SHOWN_FOLDERS:
        root = os.environ.get(variable)
        if root:
            try:
                rest = path.relative_to(os.path.abspath(root))
            except ValueError:
                continue
            return f"${variable}" + ("" if rest == Path(".") else f"/{rest}")
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except ValueError:  # not under the home folder (or no home): as it is
        return str(path)


def existing_parent(path: str | os.PathLike) -> Path:
    """``path`` itself if it is a directory, else its nearest existing parent directory."""
    path = Path(os.path.abspath(path))
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return Path(path.anchor or "/")  # pragma: no cover - the root always exists


def free_space(path: str | os.PathLike) -> int | None:
    """Bytes free (for this user) on the file system that would hold ``path``."""
    try:
        return shutil.disk_usage(existing_parent(path)).free
    except OSError:
        return None


class DiskFullError(OSError):
    """A write that failed for want of space (``errno`` ENOSPC), told in one line.

    ``path`` is the file (or folder) that could not be written, ``free_bytes``
    the space left on its file system (``None`` when unknown), ``intact`` what
    is still good (e.g. ``"the last good checkpoint ... (epoch 3) is intact"``;
    ``None``: nothing earlier to keep), ``advice`` how to continue, and
    ``reason`` what the system said (``"disk full"``, a quota, a file-size
    limit). ``str()`` is the one line the command line prints; the original
    error is the ``__cause__``. Nothing half-written is left behind: the
    helpers of this module remove their temporary files and folders first.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        free_bytes: int | None = None,
        intact: str | None = None,
        advice: str = RETRY_ADVICE,
        reason: str = "disk full",
    ) -> None:
        super().__init__(errno.ENOSPC, reason, str(path))
        self.path = Path(path)
        self.free_bytes = free_bytes
        self.intact = intact
        self.advice = advice
        self.reason = reason

    def __str__(self) -> str:
        where = existing_parent(self.path)
        kept = self.intact or "nothing half-written was left behind"
        return (
            f"{self.reason}: could not write {self.path} ({human_bytes(self.free_bytes)} free "
            f"in {where}); {kept}; {self.advice}"
        )

    def __reduce__(self):  # pickled with its own fields (torchrun, multiprocessing)
        return (
            type(self),
            (self.path, self.free_bytes, self.intact, self.advice, self.reason),
        )

    def but(
        self,
        *,
        path: str | os.PathLike | None = None,
        intact: str | None = None,
        advice: str | None = None,
    ) -> DiskFullError:
        """The same error with the path, what is intact and the advice replaced (when given)."""
        return DiskFullError(
            self.path if path is None else path,
            self.free_bytes,
            self.intact if intact is None else intact,
            self.advice if advice is None else advice,
            self.reason,
        )


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the per-rank failures of a DCP
    ``CheckpointException`` or the members of an exception group, once each."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen or len(seen) > 50:
            continue
        seen.add(id(current))
        yield current
        todo.append(current.__cause__)
        if not current.__suppress_context__:  # `raise ... from None` hides the context
            todo.append(current.__context__)
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            for failure in failures.values():
                inner = failure if isinstance(failure, BaseException) else None
                inner = getattr(failure, "exception", inner)
                if inner is None and isinstance(failure, tuple) and failure:
                    inner = failure[0]
                if isinstance(inner, BaseException):
                    todo.append(inner)
        members = getattr(current, "exceptions", None) or ()  # an exception group
        todo += [e for e in members if isinstance(e, BaseException)]


def _disk_full_reason(exc: BaseException) -> str | None:
    """How the message says it when ``exc`` means "no room to write", else ``None``."""
    torch_short_write = False
    for cause in _causes(exc):
        if isinstance(cause, DiskFullError):
            return cause.reason
        if isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS:
            return DISK_FULL_ERRNOS[cause.errno]
        if isinstance(cause, RuntimeError):
            text = str(cause).lower()
            torch_short_write |= any(marker in text for marker in TORCH_WRITE_FAILURES)
    return "disk full" if torch_short_write else None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` means the disk (or a quota, or the file-size limit) is full:
    an ``OSError`` with errno ENOSPC, EDQUOT or EFBIG, PyTorch's ``RuntimeError``
    from its zip writer after a short write (``unexpected pos``, ``enforce fail
    at inline_container``, ``PytorchStreamWriter failed``, ``file write failed``),
    or any error caused by one of those (DCP's per-rank failures included)."""
    return _disk_full_reason(exc) is not None


def disk_full_from(
    exc: BaseException,
    path: str | os.PathLike,
    intact: str | None = None,
    advice: str | None = None,
) -> DiskFullError | None:
    """A :class:`DiskFullError` for writing ``path`` if ``exc`` means a full disk, else None.

    A :class:`DiskFullError` already is one (returned with ``intact`` and
    ``advice`` replaced when given, its path kept). ``path`` is the file the
    writer could not write; the free space is measured on its file system now.
    """
    if isinstance(exc, DiskFullError):
        return exc if intact is None and advice is None else exc.but(intact=intact, advice=advice)
    reason = _disk_full_reason(exc)
    if reason is None:
        return None
    return DiskFullError(path, free_space(path), intact, advice or RETRY_ADVICE, reason)


def raise_if_disk_full(
    exc: BaseException,
    path: str | os.PathLike,
    intact: str | None = None,
    advice: str | None = None,
) -> None:
    """Raise :func:`disk_full_from`'s error (``from exc``) when ``exc`` means a full
    disk; else return, and the caller re-raises ``exc``."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return  # not a write that failed (DCP's CheckpointException is a BaseException)
    full = disk_full_from(exc, path, intact, advice)
    if full is not None and full is not exc:
        raise full from exc


def unchanged_note(path: str | os.PathLike) -> str | None:
    """What a failed atomic write of ``path`` kept, for :class:`DiskFullError`'s
    ``intact``: ``"the earlier PATH is unchanged"`` if there was one, else ``None``."""
    path = Path(path)
    return f"the earlier {path} is unchanged" if path.exists() else None


# --------------------------------------------------------------------------- atomic writes


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    For writers that take a file name (``torch.onnx.export``,
    ``migraphx.save``, ONNX Runtime's ``optimized_model_filepath``). The
    temporary file exists (empty) when the block starts. When the block ends
    normally it is fsync'ed and renamed over ``path``, and the directory is
    fsync'ed; on any exception it is removed and ``path`` is untouched. A
    full disk raises :class:`DiskFullError` naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=TEMP_SUFFIX)
    except OSError as exc:
        raise_if_disk_full(exc, path, unchanged_note(path))
        raise
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise_if_disk_full(exc, path, unchanged_note(path))  # one line naming the file
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
    the staged directory is removed and ``target`` is untouched; a full disk
    raises :class:`DiskFullError` naming the file's place under ``target``.

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
    except BaseException as exc:
        full = _staged_disk_full(exc, staged, target)
        if full is not None:
            raise full from exc
        raise
    finally:
        if staged.exists():
            shutil.rmtree(staged, ignore_errors=True)


def _staged_disk_full(exc: BaseException, staged: Path, target: Path) -> DiskFullError | None:
    """A full disk while filling ``staged``, told with the file's place in ``target``
    (the staged folder is gone by the time anyone reads the message)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return None
    name = getattr(exc, "filename", None)
    where = Path(name) if name else target
    with contextlib.suppress(ValueError):
        where = target / where.relative_to(staged)
    full = disk_full_from(exc, where)
    return None if full is None else full.but(path=where, intact=unchanged_note(target))


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
