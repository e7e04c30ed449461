"""The guide's data sets: where they come from, how they are checked, where they live.

Every case study gets its data through :func:`prepare`, which returns a
:class:`PreparedData` whose ``root`` has exactly the layout the real loaders
expect (``torchvision.datasets.MNIST(root)``, ``CIFAR10``, ``ImageFolder``,
``tf.keras.utils.text_dataset_from_directory`` ...). With the ``fixtures`` data
source (the ``smoke`` profile's default, or asked for), ``root`` holds a
generated fixture in the upstream format (:mod:`rocm_dl_guide.core.fixtures`) and
``PreparedData.note`` says so plainly; with ``real``, data that cannot be
downloaded is an error (:class:`DataUnavailableError`), never a fixture.

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
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rocm_dl_guide.core import files, fixtures, profiles
from rocm_dl_guide.core.archives import (
    ArchiveError,
    ChecksumError,
    IdxFormatError,
    extract_archive,
    file_hash,
    load_idx,
    verify_file,
)
from rocm_dl_guide.core.progress import enabled as progress_enabled

ENV_VAR = "ROCM_DL_GUIDE_DATA"
MARKER = ".rocm-dl-guide.json"
"""Written into a prepared ``root`` last: its presence means the directory is complete."""


# --------------------------------------------------------------------------- errors


class DataUnavailableError(RuntimeError):
    """The real data set cannot be had here (no network, server error)."""


class UnknownDatasetError(ValueError):
    """A name that is not in :data:`REGISTRY`."""


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set as published upstream."""

    filename: str
    urls: tuple[str, ...]
    """Mirrors, tried in order."""
    size: int | None
    """Bytes, as published alongside the checksum."""
    sha256: str | None = None
    md5: str | None = None
    checksum_source: str = ""

    @property
    def known_hash(self) -> str | None:
        """The hash to verify, in pooch's format: SHA-256 where known, else ``md5:<hex>``."""
        if self.sha256:
            return f"sha256:{self.sha256}"
        if self.md5:
            return f"md5:{self.md5}"
        return None


@dataclass(frozen=True)
class DatasetInfo:
    """A data set of the guide: description, files, checksums and extracted layout."""

    name: str
    title: str
    description: str
    homepage: str
    files: tuple[RemoteFile, ...]
    layout: str
    """What ``root`` holds once prepared."""
    kind: Literal["idx", "archive"]
    """``idx``: loose gzip-compressed IDX files; ``archive``: one archive to extract."""
    top: str
    """The directory under ``root`` that must exist once prepared."""
    classes: tuple[str, ...] = ()
    member_hashes: dict[str, str] = field(default_factory=dict)
    """Known hashes of extracted files (relative to ``root``), pooch format."""

    @property
    def download_size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]


# Checksum sources
# ----------------
# MNIST: SHA-256 and sizes from tensorflow/datasets, tensorflow_datasets/url_checksums/mnist.txt
#   (for the storage.googleapis.com/cvdf-datasets mirror); MD5 from torchvision's
#   torchvision/datasets/mnist.py `MNIST.resources` (for the ossci-datasets mirror). Both
#   describe the same four files (LeCun's originals).
# Fashion-MNIST: SHA-256 and sizes from tensorflow/datasets,
#   tensorflow_datasets/url_checksums/fashion_mnist.txt (the fashion-mnist.s3-website URLs);
#   MD5 from torchvision/datasets/mnist.py `FashionMNIST.resources` (same URLs).
# CIFAR-10: SHA-256 from Keras, keras/src/datasets/cifar10.py (`file_hash` of
#   cifar-10-python.tar.gz); MD5 of the archive and of each extracted batch from
#   torchvision/datasets/cifar.py (`tgz_md5`, `train_list`, `test_list`, `meta`). Size:
#   the Content-Length cs.toronto.edu serves (170498071, as in published download logs,
#   e.g. the keras.io examples); TFDS lists only the binary version of this archive.
# IMDB: SHA-256 and size from tensorflow/datasets, tensorflow_datasets/url_checksums/
#   imdb_reviews.txt. No MD5 sourced (none needed).
# Tiny ImageNet: SHA-256 and size from tensorflow/datasets, tensorflow_datasets/
#   url_checksums/tiny_imagenet.txt; MD5 from ContinualAI/avalanche,
#   avalanche/benchmarks/datasets/tiny_imagenet/tiny_imagenet.py.

_MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",  # torchvision's first mirror
    "https://storage.googleapis.com/cvdf-datasets/mnist/",  # the URLs TFDS checksums
)
_MNIST_FILES = (
    # filename, size, sha256 (TFDS), md5 (torchvision)
    (
        "train-images-idx3-ubyte.gz",
        9912422,
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    ),
    (
        "train-labels-idx1-ubyte.gz",
        28881,
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "d53e105ee54ea40749a09fcbcd1e9432",
    ),
    (
        "t10k-images-idx3-ubyte.gz",
        1648877,
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "9fb629c4189551a2d022fa330f9573f3",
    ),
    (
        "t10k-labels-idx1-ubyte.gz",
        4542,
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        "ec29112dd5afa0611ce80d1b7f02629c",
    ),
)
_FASHION_MIRRORS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",  # torchvision and TFDS
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",  # Keras
)
_FASHION_FILES = (
    (
        "train-images-idx3-ubyte.gz",
        26421880,
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
        "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    ),
    (
        "train-labels-idx1-ubyte.gz",
        29515,
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
        "25c81989df183df01b3e8a0aad5dffbe",
    ),
    (
        "t10k-images-idx3-ubyte.gz",
        4422102,
        "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
        "bef4ecab320f06d8554ea6380940ec79",
    ),
    (
        "t10k-labels-idx1-ubyte.gz",
        5148,
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        "bb300cfdad3c16e7a12a480ee83cd310",
    ),
)


def _idx_files(mirrors: tuple[str, ...], table: tuple, source: str) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(
            filename=name,
            urls=tuple(m + name for m in mirrors),
            size=size,
            sha256=sha,
            md5=md5,
            checksum_source=source,
        )
        for name, size, sha, md5 in table
    )


_IDX_LAYOUT = (
    "{folder}/raw/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte (uncompressed, as "
    "torchvision's own download leaves them) plus the .gz originals"
)

REGISTRY: dict[str, DatasetInfo] = {
    "mnist": DatasetInfo(
        name="mnist",
        title="MNIST",
        description="70,000 28x28 greyscale handwritten digits (60,000 train, 10,000 test), "
        "10 classes.",
        homepage="http://yann.lecun.com/exdb/mnist/",
        files=_idx_files(
            _MNIST_MIRRORS,
            _MNIST_FILES,
            "sha256: tensorflow_datasets url_checksums/mnist.txt; md5: torchvision MNIST",
        ),
        layout=_IDX_LAYOUT.format(folder="MNIST"),
        kind="idx",
        top="MNIST/raw",
        classes=fixtures.MNIST_CLASSES,
    ),
    "fashion-mnist": DatasetInfo(
        name="fashion-mnist",
        title="Fashion-MNIST",
        description="70,000 28x28 greyscale images of clothing (60,000 train, 10,000 test), "
        "10 classes; a drop-in replacement for MNIST.",
        homepage="https://github.com/zalandoresearch/fashion-mnist",
        files=_idx_files(
            _FASHION_MIRRORS,
            _FASHION_FILES,
            "sha256: tensorflow_datasets url_checksums/fashion_mnist.txt; "
            "md5: torchvision FashionMNIST",
        ),
        layout=_IDX_LAYOUT.format(folder="FashionMNIST"),
        kind="idx",
        top="FashionMNIST/raw",
        classes=fixtures.FASHION_MNIST_CLASSES,
    ),
    "cifar10": DatasetInfo(
        name="cifar10",
        title="CIFAR-10",
        description="60,000 32x32 colour images (50,000 train in five batches, 10,000 test), "
        "10 classes; the Python pickle version.",
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        files=(
            RemoteFile(
                filename="cifar-10-python.tar.gz",
                urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                size=170498071,
                sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                md5="c58f30108f718f92721af3b95e74349a",
                checksum_source="sha256: keras/src/datasets/cifar10.py; "
                "md5: torchvision/datasets/cifar.py",
            ),
        ),
        layout="cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta,readme.html}",
        kind="archive",
        top="cifar-10-batches-py",
        classes=fixtures.CIFAR10_CLASSES,
        # MD5s of the extracted files, from torchvision/datasets/cifar.py.
        member_hashes={
            "cifar-10-batches-py/data_batch_1": "md5:c99cafc152244af753f735de768cd75f",
            "cifar-10-batches-py/data_batch_2": "md5:d4bba439e000b95fd0a9bffe97cbabec",
            "cifar-10-batches-py/data_batch_3": "md5:54ebc095f3ab1f0389bbae665268c751",
            "cifar-10-batches-py/data_batch_4": "md5:634d18415352ddfa80567beed471001a",
            "cifar-10-batches-py/data_batch_5": "md5:482c414d41f54cd18b22e5b47cb7c3cb",
            "cifar-10-batches-py/test_batch": "md5:40351d587109b95175f43aff81a1287e",
            "cifar-10-batches-py/batches.meta": "md5:5ff9c542aee3614f3951f8cda6e48888",
        },
    ),
    "imdb": DatasetInfo(
        name="imdb",
        title="IMDB Large Movie Review Dataset",
        description="50,000 movie reviews labelled positive or negative (25,000 train, "
        "25,000 test) plus 50,000 unlabelled ones.",
        homepage="https://ai.stanford.edu/~amaas/data/sentiment/",
        files=(
            RemoteFile(
                filename="aclImdb_v1.tar.gz",
                urls=(
                    "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
                    "http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
                ),
                size=84125825,
                sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
                checksum_source="sha256: tensorflow_datasets url_checksums/imdb_reviews.txt",
            ),
        ),
        layout="aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt, aclImdb/train/unsup/, "
        "aclImdb/{imdb.vocab,imdbEr.txt,README}",
        kind="archive",
        top="aclImdb",
        classes=("neg", "pos"),
    ),
    "tiny-imagenet-200": DatasetInfo(
        name="tiny-imagenet-200",
        title="Tiny ImageNet",
        description="110,000 64x64 colour images of 200 ImageNet classes (500 train and 50 "
        "validation per class) plus 10,000 unlabelled test images.",
        homepage="http://cs231n.stanford.edu/",
        files=(
            RemoteFile(
                filename="tiny-imagenet-200.zip",
                urls=("http://cs231n.stanford.edu/tiny-imagenet-200.zip",),
                size=248100043,
                sha256="6198c8ae015e2b3e007c7841da39ec069199b9aa3bfa943a462022fe5e43c821",
                md5="90528d7ca1a48142e341f4ef8d21d0de",
                checksum_source="sha256: tensorflow_datasets url_checksums/tiny_imagenet.txt; "
                "md5: avalanche TinyImagenet",
            ),
        ),
        layout="tiny-imagenet-200/{wnids.txt,words.txt,train/<wnid>/images/*.JPEG,"
        "train/<wnid>/<wnid>_boxes.txt,val/images/*.JPEG,val/val_annotations.txt,"
        "test/images/*.JPEG}",
        kind="archive",
        top="tiny-imagenet-200",
    ),
}

_ALIASES = {
    "fashion_mnist": "fashion-mnist",
    "fashionmnist": "fashion-mnist",
    "cifar-10": "cifar10",
    "cifar_10": "cifar10",
    "imdb-reviews": "imdb",
    "imdb_reviews": "imdb",
    "aclimdb": "imdb",
    "tiny-imagenet": "tiny-imagenet-200",
    "tiny_imagenet": "tiny-imagenet-200",
    "tiny_imagenet_200": "tiny-imagenet-200",
    "tinyimagenet": "tiny-imagenet-200",
}


def info(name: str) -> DatasetInfo:
    """The registry entry of ``name`` (case-insensitive; ``_`` and ``-`` both work)."""
    key = (name or "").strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return REGISTRY[key]
    except KeyError:
        raise UnknownDatasetError(
            f"unknown data set {name!r}: choose one of {', '.join(REGISTRY)}"
        ) from None


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """``$ROCM_DL_GUIDE_DATA`` if set, else pooch's per-user cache for ``rocm-dl-guide``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    import pooch

    return Path(pooch.os_cache("rocm-dl-guide"))


def _real_root(name: str) -> Path:
    return cache_dir() / "real" / name


def _fixture_root(name: str) -> Path:
    return cache_dir() / "fixtures" / name


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_marker(root: Path, **content: Any) -> None:
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
        _write_marker(tmp, name=spec.name, kind="real", note=note)
    return root


def _real_note(spec: DatasetInfo, how: str) -> str:
    return f"the real {spec.title} data set ({how})"


def fetch(name: str, profile: profiles.ProfileLike = None) -> Path:
    """Download (once), verify and extract the REAL data set ``name``; return its root.

    Always the real data, whatever the profile (``profile`` is accepted for
    symmetry with :func:`prepare` and does not change that). Raises
    :class:`DataUnavailableError` when it cannot be downloaded (no network),
    with what to do instead (``data import`` of a file downloaded elsewhere, or
    the fixtures with ``--data-source fixtures``), and
    :class:`ChecksumError` when a download does not match the registry.
    """
    spec = info(name)
    root = _real_root(spec.name)
    files.prepare_once(
        root,
        lambda r: _is_real(spec, r),
        lambda: _download_and_install(spec, root),
        what=f"the {spec.title} data set",
    )
    return root


def _is_real(spec: DatasetInfo, root: Path) -> bool:
    """Whether ``root`` holds the complete real data set (its marker is written last)."""
    marker = _read_marker(root)
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
        _write_marker(root, name=spec.name, kind="real", note=note)
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
    root = _real_root(spec.name)
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
    _write_marker(root, name=spec.name, kind="real", note=note)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _verify_import(path: Path, rf: RemoteFile, spec: DatasetInfo) -> None:
    try:
        verify_file(path, rf.known_hash, remove_bad=False)
    except ChecksumError as exc:
        raise ChecksumError(
            f"{path} is not the expected {spec.title} file {rf.filename} ({exc}); download "
            f"{rf.urls[0]} again"
        ) from None


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


def _fixture_note(spec: DatasetInfo, reason: str) -> str:
    return (
        f"generated offline fixture in the upstream format (not the real {spec.title}; "
        f"synthetic class patterns, far smaller): {reason}"
    )


def prepare_fixture(name: str, reason: str = "fixture requested") -> PreparedData:
    """Generate (once) and return the fixture of ``name`` under ``<cache>/fixtures/<name>``."""
    spec = info(name)
    root = _fixture_root(spec.name)
    files.prepare_once(
        root, _is_fixture, lambda: _build_fixture(spec, root), what=f"the {spec.title} fixture"
    )
    return PreparedData(spec.name, root, "fixture", _fixture_note(spec, reason))


def _is_fixture(root: Path) -> bool:
    """Whether ``root`` holds a complete fixture of this fixture version."""
    marker = _read_marker(root)
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
        _write_marker(
            tmp,
            name=spec.name,
            kind="fixture",
            fixture_version=fixtures.FIXTURE_VERSION,
            seed=0,
            files=hashes,
            note=_fixture_note(spec, "generated by rocm_dl_guide.core.fixtures"),
        )


def prepare(name: str, profile: profiles.ProfileLike = None) -> PreparedData:
    """The data set ``name`` ready for its loaders: real data, or the fixture.

    The profile's data source decides (see :mod:`rocm_dl_guide.core.profiles`):
    ``fixtures`` generates the fixture into the cache once and reuses it;
    ``real`` fetches the real data (see :func:`fetch`) and raises
    :class:`DataUnavailableError` if it cannot be downloaded here. There is no
    silent fallback from one to the other; ``note`` says which was used.

    However many processes ask at once, one of them builds the data and the
    others wait for it (:func:`rocm_dl_guide.core.files.prepare_once`); under
    torchrun each node's local rank 0 prepares it before the node's other
    ranks load it (:func:`rocm_dl_guide.core.distributed.local_main_first`).
    """

    spec = info(name)
    prof = profiles.current(profile)
    what = f"the {spec.title} {'fixture' if prof.use_fixtures else 'data set'}"
    with _local_main_first(what):
        if prof.use_fixtures:
            return prepare_fixture(spec.name, prof.source_note())
        root = fetch(spec.name, prof)
    marker = _read_marker(root) or {}
    note = marker.get("note") or _real_note(spec, "cached")
    return PreparedData(spec.name, root, "real", f"{note}; {prof.source_note()}")


def _local_main_first(what: str) -> contextlib.AbstractContextManager[Any]:
    """Under torchrun, :func:`rocm_dl_guide.core.distributed.local_main_first`; else nothing
    (and no PyTorch import, for the Keras examples)."""
    if "LOCAL_RANK" not in os.environ:
        return contextlib.nullcontext()
    from rocm_dl_guide.core import distributed

    return distributed.local_main_first(what)


# --------------------------------------------------------------------------- loader helpers


def mnist_arrays(
    name: str = "mnist", profile: profiles.ProfileLike = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], PreparedData]:
    """``((x_train, y_train), (x_test, y_test), prepared)`` as uint8 arrays, like Keras'.

    For TensorFlow/Keras: ``keras.datasets.mnist`` hash-checks its own
    ``mnist.npz`` and so cannot read the fixture; this reads the same IDX files
    torchvision uses. ``name`` is ``"mnist"`` or ``"fashion-mnist"``.
    """
    spec = info(name)
    if spec.kind != "idx":
        raise UnknownDatasetError(f"mnist_arrays reads mnist or fashion-mnist, not {name!r}")
    prepared = prepare(spec.name, profile)
    raw = prepared.root / spec.top
    arrays = [
        load_idx(raw / f"{prefix}-{part}-ubyte")
        for prefix in ("train", "t10k")
        for part in ("images-idx3", "labels-idx1")
    ]
    for arr in arrays:
        if arr.dtype != np.uint8:
            raise IdxFormatError(f"{raw}: expected unsigned-byte IDX files, got {arr.dtype}")
    x_train, y_train, x_test, y_test = arrays
    return (x_train, y_train), (x_test, y_test), prepared


def keras_home_for_fashion_mnist(profile: profiles.ProfileLike = None) -> Path:
    """A ``KERAS_HOME`` whose ``datasets/fashion-mnist/`` holds the four IDX ``.gz`` files.

    ``keras.datasets.fashion_mnist.load_data()`` takes no path argument (Keras
    3.x); it calls ``get_file`` without a hash for each ``.gz`` under
    ``$KERAS_HOME/datasets/fashion-mnist`` and uses the file if present. Point
    Keras there with :func:`use_keras_home` (or ``KERAS_HOME`` set before Keras
    is imported). Holds the real files or the fixture, as :func:`prepare` decides.
    """
    spec = info("fashion-mnist")
    prepared = prepare(spec.name, profile)
    home = cache_dir() / "keras-home" / prepared.kind
    sources = {rf.filename: prepared.root / spec.top / rf.filename for rf in spec.files}

    def stale(target: Path) -> list[str]:
        return [name for name, src in sources.items() if not _same_file(target / name, src)]

    def copy(target: Path) -> None:
        for name in stale(_ensure(target)):
            with open(sources[name], "rb") as fh_in, files.atomic_write(target / name) as fh_out:
                shutil.copyfileobj(fh_in, fh_out)

    target = home / "datasets" / "fashion-mnist"
    files.prepare_once(
        target,
        lambda t: not stale(t),
        lambda: copy(target),
        what=f"Keras' copy of the {spec.title} {prepared.kind} files",
    )
    return home


def _same_file(path: Path, source: Path) -> bool:
    """Whether ``path`` exists and has ``source``'s size and content."""
    try:
        if path.stat().st_size != source.stat().st_size:
            return False
    except FileNotFoundError:
        return False
    return file_hash(path) == file_hash(source)


@contextlib.contextmanager
def use_keras_home(home: Path) -> Iterator[Path]:
    """Within the block, Keras' ``get_file`` caches under ``home`` (``KERAS_HOME``).

    Keras reads ``KERAS_HOME`` once, when it is imported; if it already is, its
    cached value is switched for the duration of the block too.
    """
    home = Path(home)
    old_env = os.environ.get("KERAS_HOME")
    os.environ["KERAS_HOME"] = str(home)
    config = sys.modules.get("keras.src.backend.config")
    old_dir = getattr(config, "_KERAS_DIR", None) if config is not None else None
    if config is not None and old_dir is not None:
        config._KERAS_DIR = str(home)
    try:
        yield home
    finally:
        if old_env is None:
            os.environ.pop("KERAS_HOME", None)
        else:
            os.environ["KERAS_HOME"] = old_env
        if config is not None and old_dir is not None:
            config._KERAS_DIR = old_dir
        else:
            # Keras was first imported inside the block and took ``home`` from the
            # environment: give it back the directory it would have chosen itself.
            late = sys.modules.get("keras.src.backend.config")
            if late is not None and getattr(late, "_KERAS_DIR", None) == str(home):
                late._KERAS_DIR = old_env or _default_keras_dir()


def _default_keras_dir() -> str:
    """Keras' own choice without ``KERAS_HOME``: ``~/.keras``, or ``/tmp/.keras``."""
    base = os.path.expanduser("~")
    if not os.access(base, os.W_OK):
        base = "/tmp"
    return os.path.join(base, ".keras")


def verify_cifar10(root: Path) -> None:
    """Check the extracted CIFAR-10 files under ``root`` against what we know of them.

    A fixture is checked against the SHA-256s recorded when it was generated;
    real data against the registry's MD5s of the extracted batches. Raises
    :class:`FileNotFoundError` or :class:`ChecksumError` naming the file.
    """
    root = Path(root)
    marker = _read_marker(root) or {}
    spec = REGISTRY["cifar10"]
    if marker.get("kind") == "fixture" and marker.get("files"):
        expected = {k: f"sha256:{v}" for k, v in marker["files"].items() if k in spec.member_hashes}
    else:
        expected = dict(spec.member_hashes)
    for rel, known in sorted(expected.items()):
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing: get the data with "
                "rocm_dl_guide.core.datasets.prepare('cifar10')"
            )
        verify_file(path, known, remove_bad=False)


_CIFAR_CLASS: type | None = None


def _cifar10_class() -> type:
    global _CIFAR_CLASS
    if _CIFAR_CLASS is None:
        from torchvision.datasets import CIFAR10

        class RegistryCIFAR10(CIFAR10):
            """torchvision's CIFAR10, verified against rocm_dl_guide's registry.

            torchvision's own check compares hard-coded MD5s and so refuses the
            fixture; this one accepts the files :func:`verify_cifar10` accepts
            and otherwise reuses torchvision's loading unchanged.
            """

            train_list = [[n, None] for n, _ in CIFAR10.train_list]
            test_list = [[n, None] for n, _ in CIFAR10.test_list]
            meta = {**CIFAR10.meta, "md5": None}

            def _check_integrity(self) -> bool:
                verify_cifar10(Path(self.root))
                return True

            def download(self) -> None:
                raise RuntimeError(
                    "use rocm_dl_guide.core.datasets.prepare('cifar10') to get the data"
                )

        _CIFAR_CLASS = RegistryCIFAR10
    return _CIFAR_CLASS


def cifar10_dataset(
    root: Path, train: bool = True, transform: Any = None, target_transform: Any = None
) -> Any:
    """A torchvision ``CIFAR10`` over ``root`` (real data or fixture), checked by our registry."""
    cls = _cifar10_class()
    return cls(str(root), train=train, transform=transform, target_transform=target_transform)


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
            marker = _read_marker(root)
            if not marker or marker.get("kind") != kind:
                continue
            out.append({"name": root.name, "kind": kind, "path": root, "size": _tree_size(root)})
    return out


# --------------------------------------------------------------------------- tables


def human_size(n: int | None) -> str:
    """Bytes in words: ``"170.5 MB"`` (``"?"`` for an unknown size)."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


def registry_table() -> list[dict[str, Any]]:
    """One row per data set: what it is, its download size, how it is checked."""
    rows = []
    for spec in REGISTRY.values():
        hashes = {"sha256" if rf.sha256 else "md5" if rf.md5 else "none" for rf in spec.files}
        rows.append(
            {
                "name": spec.name,
                "data set": spec.title,
                "files": len(spec.files),
                "download": human_size(spec.download_size),
                "checksum": ", ".join(sorted(hashes))
                .replace("sha256", "SHA-256")
                .replace("md5", "MD5"),
                "checksum source": "; ".join(sorted({rf.checksum_source for rf in spec.files})),
            }
        )
    return rows
