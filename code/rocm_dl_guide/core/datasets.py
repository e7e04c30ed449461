"""Getting the guide's data sets onto disk: the cache, downloads, imports and preparation.

Every case study gets its data through :func:`prepare`, which returns a
:class:`PreparedData` whose ``root`` has exactly the layout the real loaders
expect (``torchvision.datasets.MNIST(root)``, ``CIFAR10``, ``ImageFolder``,
``tf.keras.utils.text_dataset_from_directory`` ...). With the ``fixtures`` data
source (the ``smoke`` profile's default, or asked for), ``root`` holds a
generated fixture in the upstream format (:mod:`rocm_dl_guide.core.fixtures`) and
``PreparedData.note`` says so plainly; with ``real``, data that cannot be
downloaded is an error (:class:`DataUnavailableError`), never a fixture.

What each data set is, and its checksums, is the registry's
(:mod:`rocm_dl_guide.core.dataset_registry`); the helpers that read a prepared
``root`` for a framework are :mod:`rocm_dl_guide.core.loaders`'.

Real downloads go through pooch with the registry's checksum and a progress
bar; archives are extracted by :func:`rocm_dl_guide.core.archives.extract_archive`,
which refuses members that would land outside the target directory and never
leaves a half-written tree. Air-gapped machines can :func:`import_archive` a file downloaded
elsewhere (``python -m rocm_dl_guide data import NAME ARCHIVE``).

Cache: ``$ROCM_DL_GUIDE_DATA`` if set, else ``pooch.os_cache("rocm-dl-guide")``
(``~/.cache/rocm-dl-guide`` on Linux), laid out as::

    <cache>/downloads/<name>/   files being downloaded (archives are removed once extracted)
    <cache>/real/<name>/        the prepared real data set (the ``root`` of PreparedData)
    <cache>/fixtures/<name>/    the generated fixture
    <cache>/keras-home/<kind>/  a KERAS_HOME for keras.datasets.fashion_mnist
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from rocm_dl_guide.core import files, fixtures, profiles
from rocm_dl_guide.core.archives import (
    ArchiveError,
    ChecksumError,
    extract_archive,
    file_hash,
    verify_file,
)
from rocm_dl_guide.core.dataset_registry import REGISTRY, DatasetInfo, RemoteFile, info
from rocm_dl_guide.core.progress import enabled as progress_enabled

ENV_VAR = "ROCM_DL_GUIDE_DATA"
DATA_SOURCE_HINT = f"{profiles.DATA_SOURCE_VAR}=fixtures asks for the fixture"
MARKER = ".rocm-dl-guide.json"
"""Written into a prepared ``root`` last: its presence means the directory is complete."""


# --------------------------------------------------------------------------- errors


class DataUnavailableError(RuntimeError):
    """The real data set cannot be had here (no network, server error)."""


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """``$ROCM_DL_GUIDE_DATA`` if set, else pooch's per-user cache for ``rocm-dl-guide``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import pooch

    return Path(pooch.os_cache("rocm-dl-guide"))


def real_root(name: str) -> Path:
    """Where the real data set ``name`` is prepared: ``<cache>/real/<name>``."""
    return cache_dir() / "real" / name


def fixture_root(name: str) -> Path:
    """Where the fixture of ``name`` is generated: ``<cache>/fixtures/<name>``."""
    return cache_dir() / "fixtures" / name


def read_marker(root: Path) -> dict[str, Any] | None:
    """The :data:`MARKER` of a prepared ``root`` (``kind``, ``note`` ...), or ``None``
    when it is missing or unreadable (``root`` is not complete)."""
    try:
        return json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_marker(root: Path, **content: Any) -> None:
    """Write ``root``'s :data:`MARKER` (atomically, with a ``created`` time): last, once
    ``root`` is complete."""
    content.setdefault("created", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    with files.atomic_write(root / MARKER, "w") as fh:
        fh.write(json.dumps(content, indent=1, sort_keys=True))


def _tree_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for f in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


# --------------------------------------------------------------------------- downloading

_DOWNLOADER = None
"""A pooch downloader to use instead of pooch's default (tests set a fake; never the network)."""


def is_network_error(exc: BaseException) -> bool:
    """Whether ``exc`` means "no network, or the server refused" (not a bug to report)."""
    try:
        import requests
    except ImportError:  # pragma: no cover - pooch depends on requests
        requests = None  # type: ignore[assignment]
    if requests is not None and isinstance(exc, requests.exceptions.RequestException):
        return True
    import socket
    import urllib.error

    return isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror, urllib.error.URLError))


def _advice(spec: DatasetInfo) -> str:
    if spec.kind == "idx":
        where = (
            f"download the four files {', '.join(f.filename for f in spec.files)} "
            f"(from {spec.files[0].urls[0].rsplit('/', 1)[0]}/) into one directory DIR on a "
            f"machine with network and run `python -m rocm_dl_guide data import {spec.name} DIR`"
        )
    else:
        f = spec.files[0]
        where = (
            f"download {f.urls[0]} on a machine with network and run "
            f"`python -m rocm_dl_guide data import {spec.name} {f.filename}`"
        )
    return (
        f"Two ways out: for an air-gapped machine, {where}; or run on generated offline "
        "fixtures in the same format with --data-source fixtures "
        f"({profiles.DATA_SOURCE_VAR}=fixtures)."
    )


def _download(spec: DatasetInfo, rf: RemoteFile, directory: Path) -> Path:
    """Download ``rf`` into ``directory`` through pooch, checking its hash; tries each mirror."""
    import pooch

    errors = []
    log = pooch.get_logger()
    level = log.level
    # pooch logs "Downloading data from URL to file PATH" for every try; the
    # progress bar says what is downloading, and a failure is one message below.
    log.setLevel("WARNING")
    try:
        return _retrieve(spec, rf, directory, errors)
    finally:
        log.setLevel(level)


def _retrieve(spec: DatasetInfo, rf: RemoteFile, directory: Path, errors: list[str]) -> Path:
    import pooch

    for url in rf.urls:
        try:
            path = pooch.retrieve(
                url=url,
                known_hash=rf.known_hash,
                fname=rf.filename,
                path=directory,
                progressbar=progress_enabled(),
                downloader=_DOWNLOADER,
            )
        except ValueError as exc:  # pooch: hash mismatch (the temporary file is deleted)
            if "hash" not in str(exc).lower():
                raise
            raise ChecksumError(
                f"checksum mismatch for {rf.filename} downloaded from {url} (nothing was kept "
                f"in the cache): {exc}"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - classify below
            # pooch removed its temporary file; say so in one line
            files.raise_if_disk_full(exc, directory / rf.filename)
            if not is_network_error(exc):
                raise
            from urllib.parse import urlparse

            errors.append(f"{urlparse(url).netloc} ({type(exc).__name__})")
            continue
        return Path(path)
    raise DataUnavailableError(
        f"cannot download {spec.title} ({rf.filename}): no network, or the server refused "
        f"(tried {', '.join(errors)}). {_advice(spec)}"
    )


def _install_idx(spec: DatasetInfo, sources: dict[str, Path], root: Path, note: str) -> Path:
    """Build ``root/<Folder>/raw`` from the four verified ``.gz`` files, atomically."""
    with files.staged_directory(root) as tmp:
        raw = tmp / spec.top
        raw.mkdir(parents=True)
        for rf in spec.files:
            shutil.copyfile(sources[rf.filename], raw / rf.filename)
            data = gzip.decompress((raw / rf.filename).read_bytes())
            (raw / rf.filename[: -len(".gz")]).write_bytes(data)
        write_marker(tmp, name=spec.name, kind="real", note=note)
    return root


def _real_note(spec: DatasetInfo, how: str) -> str:
    return f"the real {spec.title} data set ({how})"


def fetch(name: str) -> Path:
    """Download (once), verify and extract the REAL data set ``name``; return its root.

    Always the real data, whatever the profile (:func:`prepare` asks the
    profile). Raises
    :class:`DataUnavailableError` when it cannot be downloaded (no network),
    with what to do instead (``data import`` of a file downloaded elsewhere, or
    the fixtures with ``--data-source fixtures``), and
    :class:`ChecksumError` when a download does not match the registry.
    """
    spec = info(name)
    root = real_root(spec.name)
    files.prepare_once(
        root,
        lambda r: _is_real(spec, r),
        lambda: _download_and_install(spec, root),
        what=f"the {spec.title} data set",
    )
    return root


def _is_real(spec: DatasetInfo, root: Path) -> bool:
    """Whether ``root`` holds the complete real data set (its marker is written last)."""
    marker = read_marker(root)
    return bool(marker and marker.get("kind") == "real" and (root / spec.top).exists())


def _download_and_install(spec: DatasetInfo, root: Path) -> None:
    """Download and verify ``spec``'s files, then extract or install them at ``root``
    (under ``root``'s build lock: one process at a time)."""
    downloads = cache_dir() / "downloads" / spec.name
    downloads.mkdir(parents=True, exist_ok=True)
    paths = {rf.filename: _download(spec, rf, downloads) for rf in spec.files}
    for rf in spec.files:  # pooch checked the hash; check again what is on disk now
        verify_file(paths[rf.filename], rf.known_hash)
    note = _real_note(spec, f"downloaded from {spec.files[0].urls[0].rsplit('/', 1)[0]}")
    if spec.kind == "idx":
        _install_idx(spec, paths, root, note)
    else:
        archive = paths[spec.files[0].filename]
        extract_archive(archive, root)
        _check_layout(spec, root, archive)
        write_marker(root, name=spec.name, kind="real", note=note)
    shutil.rmtree(downloads, ignore_errors=True)


def _check_layout(spec: DatasetInfo, root: Path, source: Path) -> None:
    if not (root / spec.top).is_dir():
        raise ArchiveError(
            f"{source.name}: after extraction {root / spec.top} is missing; this does not look "
            f"like the {spec.title} archive ({spec.files[0].filename})"
        )


# --------------------------------------------------------------------------- import


def import_archive(name: str, archive_path: Path) -> Path:
    """Install the real data set ``name`` from a file downloaded elsewhere (air-gapped use).

    For ``cifar10``, ``imdb`` and ``tiny-imagenet-200``, ``archive_path`` is
    the upstream archive; for ``mnist`` and ``fashion-mnist`` it is a
    directory holding the four ``.gz`` files, or a tar/zip archive containing
    them. Each file is verified against the registry's checksum (the user's
    file is never deleted), then extracted safely into the cache. Returns the
    prepared root.
    """
    spec = info(name)
    src = Path(archive_path).expanduser()
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    root = real_root(spec.name)
    with files.build_lock(root, what=f"the {spec.title} data set"):
        _import(spec, src, root)
    return root


def _import(spec: DatasetInfo, src: Path, root: Path) -> None:
    """:func:`import_archive`'s work, under ``root``'s build lock."""
    note = _real_note(spec, f"imported from {src.name}")
    if spec.kind == "idx":
        with tempfile.TemporaryDirectory(dir=_ensure(cache_dir())) as tmp:
            folder = src
            if src.is_file():
                folder = extract_archive(src, Path(tmp) / "unpacked")
            found = {}
            for rf in spec.files:
                hits = sorted(folder.rglob(rf.filename))
                if not hits:
                    raise ArchiveError(
                        f"{src}: {rf.filename} not found; {spec.title} needs "
                        f"{', '.join(f.filename for f in spec.files)}"
                    )
                _verify_import(hits[0], rf, spec)
                found[rf.filename] = hits[0]
            _install_idx(spec, found, root, note)
        return
    rf = spec.files[0]
    if src.is_dir():
        raise ArchiveError(f"{src} is a directory; {spec.title} is imported from {rf.filename}")
    _verify_import(src, rf, spec)
    extract_archive(src, root)
    _check_layout(spec, root, src)
    write_marker(root, name=spec.name, kind="real", note=note)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _verify_import(path: Path, rf: RemoteFile, spec: DatasetInfo) -> None:
    """Check a file from outside the cache (never deleted): its own checksum, or,
    for a ``.gz`` compressed again (a distribution's package), its content's."""
    try:
        verify_file(path, rf.known_hash, remove_bad=False)
    except ChecksumError as exc:
        if rf.raw_sha256 and path.suffix == ".gz" and _raw_sha256(path) == rf.raw_sha256:
            return
        raise ChecksumError(
            f"{path} is not the expected {spec.title} file {rf.filename} ({exc}); download "
            f"{rf.urls[0]} again"
        ) from None


def _raw_sha256(path: Path) -> str | None:
    """SHA-256 of a gzip file's decompressed content (``None`` if it is not gzip)."""
    import hashlib

    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except (OSError, EOFError):
        return None
    return digest.hexdigest()


# --------------------------------------------------------------------------- system copies


SYSTEM_COPIES: dict[str, tuple[tuple[str, str], ...]] = {
    "fashion-mnist": (("/usr/share/datasets/fashion-mnist", "dataset-fashion-mnist"),),
}
"""Where an operating-system package installs a data set's upstream files
(folder, package): Debian's and Ubuntu's ``dataset-fashion-mnist`` puts the
four Fashion-MNIST ``.gz`` files in ``/usr/share/datasets/fashion-mnist``."""


def system_copy(name: str) -> tuple[Path, str] | None:
    """The folder (and package) holding every file of the real data set ``name``
    on this machine, or ``None``. Its files are checked when they are used."""
    spec = info(name)
    for folder, package in SYSTEM_COPIES.get(spec.name, ()):
        if all((Path(folder) / rf.filename).is_file() for rf in spec.files):
            return Path(folder), package
    return None


def install_system_copy(name: str) -> Path:
    """Install the real data set ``name`` from its :func:`system_copy` into the
    cache (once), each file checked as ``data import`` checks it; its root."""
    spec = info(name)
    found = system_copy(spec.name)
    if found is None:
        raise FileNotFoundError(f"no system package provides {spec.title} here")
    folder, package = found
    root = real_root(spec.name)

    def install() -> None:
        sources = {rf.filename: folder / rf.filename for rf in spec.files}
        for rf in spec.files:
            _verify_import(sources[rf.filename], rf, spec)
        note = _real_note(spec, f"from the system package {package}, {folder}")
        _install_idx(spec, sources, root, note)

    files.prepare_once(
        root, lambda r: _is_real(spec, r), install, what=f"the {spec.title} data set"
    )
    return root


# --------------------------------------------------------------------------- prepare


@dataclass(frozen=True)
class PreparedData:
    """A data set ready for its loaders."""

    name: str
    root: Path
    """Pass this to the loader (see the registry's ``layout``)."""
    kind: Literal["real", "fixture"]
    note: str
    """One plain sentence on what this is (real data, or a generated fixture and why)."""


def stand_in(prepared: PreparedData) -> str:
    """A few words to print beside every accuracy, prediction or class name that
    comes from ``prepared``: ``"generated fixture, not the real <title>"``, or
    ``""`` for the real data (whose provenance the note gives)."""
    if prepared.kind == "real":
        return ""
    return f"generated fixture, not the real {info(prepared.name).title}"


def labelled(line: str, prepared: PreparedData) -> str:
    """``line`` with :func:`stand_in`'s words after it, in brackets, where the data
    are a stand-in: ``"accuracy 66.6% [generated fixture, not the real CIFAR-10]"``."""
    tag = stand_in(prepared)
    return f"{line} [{tag}]" if tag else line


def _fixture_note(spec: DatasetInfo, reason: str) -> str:
    return (
        f"a generated fixture in the upstream format, not the real {spec.title} "
        f"(synthetic class patterns, far fewer samples): {reason}"
    )


def _fixture_reason(profile: profiles.Profile) -> str:
    """Why the fixture, in a few words: asked for, or the profile's default."""
    if profile.data_source_explicit:
        return f"asked for with {profiles.DATA_SOURCE_VAR}=fixtures or --data-source"
    return (
        f"the {profile.name} profile's default ({profiles.DATA_SOURCE_VAR}=real for the real one)"
    )


def prepare_fixture(name: str, reason: str = "fixture requested") -> PreparedData:
    """Generate (once) and return the fixture of ``name`` under ``<cache>/fixtures/<name>``."""
    spec = info(name)
    root = fixture_root(spec.name)
    files.prepare_once(
        root, _is_fixture, lambda: _build_fixture(spec, root), what=f"the {spec.title} fixture"
    )
    return PreparedData(spec.name, root, "fixture", _fixture_note(spec, reason))


def _is_fixture(root: Path) -> bool:
    """Whether ``root`` holds a complete fixture of this fixture version."""
    marker = read_marker(root)
    return bool(
        marker
        and marker.get("kind") == "fixture"
        and marker.get("fixture_version") == fixtures.FIXTURE_VERSION
    )


def _build_fixture(spec: DatasetInfo, root: Path) -> None:
    """Generate the fixture in a staged directory and swap it in at ``root``."""
    with files.staged_directory(root, is_complete=_is_fixture) as tmp:
        fixtures.write(spec.name, tmp, seed=0)
        hashes = {
            p.relative_to(tmp).as_posix(): file_hash(p)
            for p in sorted(tmp.rglob("*"))
            if p.is_file() and spec.name == "cifar10"
        }
        write_marker(
            tmp,
            name=spec.name,
            kind="fixture",
            fixture_version=fixtures.FIXTURE_VERSION,
            seed=0,
            files=hashes,
            note=_fixture_note(spec, "generated by rocm_dl_guide.core.fixtures"),
        )


def prepare(name: str, profile: profiles.Profile, system_copies: bool = True) -> PreparedData:
    """The data set ``name`` ready for its loaders: real data, or the fixture.

    The profile's data source decides (see :mod:`rocm_dl_guide.core.profiles`):
    ``fixtures`` generates the fixture into the cache once and reuses it;
    ``real`` fetches the real data (see :func:`fetch`) and raises
    :class:`DataUnavailableError` if it cannot be downloaded here. There is no
    silent fallback from one to the other; ``note`` says which was used.
    Where the profile's default would be the fixture but an operating-system
    package has put the real files on this machine (:func:`system_copy`), the
    real data is used, checked, and the note says so; asking for the fixture
    explicitly still gets the fixture, and so does ``system_copies=False`` (a
    caller whose lesson is not the data: the TensorFlow distributed page's
    workers, for which 60,000 real images take minutes on a CPU).

    However many processes ask at once, one of them builds the data and the
    others wait for it (:func:`rocm_dl_guide.core.files.prepare_once`); under
    torchrun each node's local rank 0 prepares it before the node's other
    ranks load it (:func:`rocm_dl_guide.core.distributed.local_main_first`).
    """

    spec = info(name)
    local = (
        system_copies
        and profile.use_fixtures
        and not profile.data_source_explicit
        and system_copy(spec.name)
    )
    what = f"the {spec.title} {'fixture' if profile.use_fixtures and not local else 'data set'}"
    with _local_main_first(what):
        if local:
            root = install_system_copy(spec.name)
            marker = read_marker(root) or {}
            note = marker.get("note") or _real_note(spec, "cached")
            return PreparedData(
                spec.name,
                root,
                "real",
                f"{note}; real data instead of the {profile.name} profile's generated "
                f"fixture, because this machine has it ({DATA_SOURCE_HINT})",
            )
        if profile.use_fixtures:
            return prepare_fixture(spec.name, _fixture_reason(profile))
        root = fetch(spec.name)
    marker = read_marker(root) or {}
    note = marker.get("note") or _real_note(spec, "cached")
    return PreparedData(spec.name, root, "real", f"{note}; {profile.source_note()}")


def _local_main_first(what: str) -> contextlib.AbstractContextManager[Any]:
    """Under torchrun, :func:`rocm_dl_guide.core.distributed.local_main_first`; else nothing
    (and no PyTorch import, for the Keras examples)."""
    if "LOCAL_RANK" not in os.environ:
        return contextlib.nullcontext()
    from rocm_dl_guide.core import distributed

    return distributed.local_main_first(what)


# --------------------------------------------------------------------------- listing


def cached() -> list[dict[str, Any]]:
    """The prepared data sets in the cache: ``name``, ``kind``, ``path``, ``size`` (bytes)."""
    base = cache_dir()
    out = []
    for kind, sub in (("real", "real"), ("fixture", "fixtures")):
        folder = base / sub
        if not folder.is_dir():
            continue
        for root in sorted(p for p in folder.iterdir() if p.is_dir() and p.name in REGISTRY):
            marker = read_marker(root)
            if not marker or marker.get("kind") != kind:
                continue
            out.append({"name": root.name, "kind": kind, "path": root, "size": _tree_size(root)})
    return out
