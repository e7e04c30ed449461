"""Files the data sets arrive in: checksums, archives and MNIST's IDX format.

:func:`verify_file` checks a download against the registry's hash;
:func:`extract_archive` unpacks a tar or zip archive, refusing members that
would land outside the target directory and never leaving a half-written tree;
:func:`load_idx` reads an IDX file. :mod:`rocm_dl_guide.core.datasets` (the registry,
the cache, downloads and fixtures) uses them; nothing here knows a data set.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

import numpy as np

from rocm_dl_guide.core import files

# --------------------------------------------------------------------------- errors


class ChecksumError(ValueError):
    """A file's checksum differs from the registry's."""


class ArchiveError(ValueError):
    """An archive is corrupt, truncated, of an unknown format or lacks expected files."""


class UnsafeArchiveError(ArchiveError):
    """An archive member would be written outside the target directory."""


class IdxFormatError(ValueError):
    """A file is not a well-formed IDX file."""


# --------------------------------------------------------------------------- checksums


def file_hash(path: Path, algorithm: str = "sha256") -> str:
    """Hex digest of ``path``."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _split_hash(known_hash: str) -> tuple[str, str]:
    if ":" in known_hash:
        alg, value = known_hash.split(":", 1)
        return alg.lower(), value.lower()
    return "sha256", known_hash.lower()


def verify_file(path: Path, known_hash: str | None, *, remove_bad: bool = True) -> None:
    """Check ``path`` against ``known_hash`` (``sha256:<hex>``, ``md5:<hex>`` or bare SHA-256).

    On a mismatch raise :class:`ChecksumError` naming the file and both hashes;
    with ``remove_bad`` (the default, for files in the cache) the file is
    deleted first so that it is never used again. ``known_hash=None`` checks
    nothing (the registry has no sourced checksum for that file).
    """
    if known_hash is None:
        return
    path = Path(path)
    algorithm, expected = _split_hash(known_hash)
    actual = file_hash(path, algorithm)
    if actual == expected:
        return
    if remove_bad:
        with contextlib.suppress(OSError):
            path.unlink()
        fate = "the file was deleted from the cache; fetch it again"
    else:
        fate = "the file was left where it is"
    raise ChecksumError(
        f"checksum mismatch for {path.name} ({path}): expected {algorithm} {expected}, "
        f"got {actual}; {fate}"
    )


# --------------------------------------------------------------------------- archives


def _has_dotdot_or_abs(name: str) -> bool:
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        return True
    return ".." in PurePosixPath(norm).parts


def _escapes(path: str, links: dict[str, str], depth: int = 0) -> bool:
    """Whether ``path`` (relative to the extraction root) leaves the root.

    Resolves ``..`` physically, following the archive's own symlinks (``links``:
    member name -> link target) the way the file system would once they exist.
    """
    if depth > 40 or path.startswith("/"):
        return True
    stack: list[str] = []
    queue = [p for p in path.split("/")]
    hops = 0
    while queue:
        part = queue.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return True
            stack.pop()
            continue
        stack.append(part)
        key = "/".join(stack)
        if key in links:
            hops += 1
            target = links[key]
            if hops > 40 or target.startswith("/"):
                return True
            stack.pop()
            queue = target.split("/") + queue
    return False


def _check_tar_members(archive: Path, members: list[tarfile.TarInfo]) -> None:
    links = {
        m.name.rstrip("/"): m.linkname for m in members if m.issym() and not m.name.endswith("/")
    }
    for m in members:
        name = m.name
        what = f"{archive.name}: refusing member {name!r}"
        if _has_dotdot_or_abs(name):
            raise UnsafeArchiveError(f"{what}: absolute path or '..' component")
        if m.ischr() or m.isblk() or m.isfifo():
            raise UnsafeArchiveError(f"{what}: device or FIFO file")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise UnsafeArchiveError(f"{what}: unsupported member type {m.type!r}")
        parent = str(PurePosixPath(name).parent)
        if parent not in (".", "") and _escapes(parent, links):
            raise UnsafeArchiveError(f"{what}: its directory resolves outside the destination")
        if m.issym():
            if m.linkname.startswith("/") or _escapes(f"{parent}/{m.linkname}", links):
                raise UnsafeArchiveError(
                    f"{what}: symlink to {m.linkname!r} points outside the destination"
                )
        if m.islnk():
            if m.linkname.startswith("/") or _escapes(m.linkname, links):
                raise UnsafeArchiveError(
                    f"{what}: hard link to {m.linkname!r} points outside the destination"
                )


def _check_zip_members(archive: Path, zf: zipfile.ZipFile) -> None:
    infos = zf.infolist()
    links = {}
    for zi in infos:
        if stat.S_ISLNK(zi.external_attr >> 16):
            links[zi.filename.rstrip("/")] = zf.read(zi).decode("utf-8", "replace")
    for zi in infos:
        name = zi.filename
        what = f"{archive.name}: refusing member {name!r}"
        if _has_dotdot_or_abs(name):
            raise UnsafeArchiveError(f"{what}: absolute path or '..' component")
        mode = zi.external_attr >> 16
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode):
            raise UnsafeArchiveError(f"{what}: device or FIFO file")
        name = name.replace("\\", "/")
        parent = str(PurePosixPath(name).parent)
        if parent not in (".", "") and _escapes(parent, links):
            raise UnsafeArchiveError(f"{what}: its directory resolves outside the destination")
        if name.rstrip("/") in links:
            target = links[name.rstrip("/")]
            if target.startswith("/") or _escapes(f"{parent}/{target}", links):
                raise UnsafeArchiveError(
                    f"{what}: symlink to {target!r} points outside the destination"
                )


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError)


def extract_archive(path: Path, dest: Path) -> Path:
    """Safely extract the tar (any compression) or zip archive ``path`` into ``dest``.

    Every member is checked before anything is written: absolute paths, ``..``
    components, symlinks or hard links resolving outside ``dest``, and device
    or FIFO files are refused with :class:`UnsafeArchiveError` (a ``ValueError``)
    naming the member. Extraction happens in a temporary directory next to
    ``dest`` (tar additionally through Python's ``data`` filter); only when it
    has fully succeeded are the archive's top-level entries moved into ``dest``
    (replacing entries of the same name). A refused, corrupt or truncated
    archive leaves ``dest`` exactly as it was and raises :class:`ArchiveError`;
    a full disk leaves it so too and raises :class:`files.DiskFullError`.
    Returns ``dest``.
    """
    path, dest = Path(path), Path(dest)
    if not path.is_file():
        raise ArchiveError(f"{path}: no such archive file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as fh:
        head = fh.read(4)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.extract-", dir=dest.parent))
    try:
        if head.startswith(b"PK") and not zipfile.is_zipfile(path):
            raise ArchiveError(
                f"{path.name}: corrupt or truncated zip archive (its central directory is "
                f"missing) [{path}]"
            )
        if zipfile.is_zipfile(path):
            try:
                with zipfile.ZipFile(path) as zf:
                    _check_zip_members(path, zf)
                    zf.extractall(tmp)
            except UnsafeArchiveError:
                raise
            except _CORRUPT as exc:
                files.raise_if_disk_full(exc, dest, files.unchanged_note(dest))
                raise ArchiveError(
                    f"{path.name}: corrupt or truncated zip archive ({_first_line(exc)}) [{path}]"
                ) from exc
        else:
            try:
                with tarfile.open(path, "r:*") as tf:
                    members = tf.getmembers()  # reads the whole archive: catches truncation
                    _check_tar_members(path, members)
                    if hasattr(tarfile, "data_filter"):
                        tf.extractall(tmp, members=members, filter="data")
                    else:  # pragma: no cover - Python without extraction filters
                        tf.extractall(tmp, members=members)
            except UnsafeArchiveError:
                raise
            except _CORRUPT as exc:
                files.raise_if_disk_full(exc, dest, files.unchanged_note(dest))
                raise ArchiveError(
                    f"{path.name}: not a readable tar or zip archive, or corrupt/truncated "
                    f"({type(exc).__name__}: {_first_line(exc)}) [{path}]"
                ) from exc
        if not dest.exists():
            os.replace(tmp, dest)
            return dest
        for entry in sorted(tmp.iterdir()):
            target = dest / entry.name
            if target.exists() or target.is_symlink():
                files.remove(target)
            os.replace(entry, target)
        return dest
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- IDX


_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def load_idx(path: Path) -> np.ndarray:
    """Parse an IDX file (MNIST's format), gzip-compressed or not, into a numpy array.

    Raises :class:`IdxFormatError` naming the file when the header or the size
    is wrong.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise IdxFormatError(f"{path}: corrupt gzip data ({exc})") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise IdxFormatError(f"{path}: not an IDX file (bad magic number {raw[:4].hex()})")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise IdxFormatError(f"{path}: unknown IDX data type 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise IdxFormatError(f"{path}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise IdxFormatError(
            f"{path}: IDX header says shape {shape} ({expected} bytes of data) but the file "
            f"has {len(raw) - header} bytes of data"
        )
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)
