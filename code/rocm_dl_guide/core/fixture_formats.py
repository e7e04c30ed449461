"""Reproducible bytes for the fixtures: seeded random streams and the upstream file formats.

Every fixture (:mod:`rocm_dl_guide.core.fixtures`) is deterministic for a
seed, down to the byte: its random numbers come from :func:`rng`, one
independent stream per purpose, and its files are written in the upstream
formats without timestamps or owners that would change from run to run:

- :func:`idx_bytes`: the IDX format of LeCun's MNIST files (:data:`IDX_FILES`);
- :func:`gzip_bytes`: gzip with no file name and a fixed time;
- :func:`py2_pickle_bytes`: pickles as Python 2 wrote CIFAR-10's batches;
- :func:`tar_files`, :func:`tar_gz_tree`, :func:`zip_tree`: archives as the
  upstream downloads are packed, with fixed dates and owners.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np

IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
"""The four IDX files of MNIST and Fashion-MNIST (without the ``.gz`` suffix)."""

_GZIP_MTIME = 0  # fixed gzip/tar timestamps keep the bytes deterministic
_TAR_MTIME = 1_262_304_000  # 2010-01-01, an arbitrary fixed date


# --------------------------------------------------------------------------- random streams


def rng(seed: int, stream: str) -> np.random.Generator:
    """An independent generator per (seed, purpose), stable across runs."""
    key = [ord(c) for c in stream]
    return np.random.default_rng([int(seed), *key])


LABEL_AGREEMENT = {"fashion-mnist": 0.88, "imdb": 0.86, "cifar10": 0.85}
"""The fraction of a fixture's samples whose label is the class their content
was drawn from; the others carry another class, at random. A model that
recognised every sample's content perfectly would score this on the fixture's
test split: the accuracy this page's model reaches on the real data set, so
that a fixture's result cannot read as a better one. Fashion-MNIST: about 88%
for TensorFlow's classification tutorial (``tf-tutorial-classification``);
IMDB: about 86% for its text classification tutorial
(``tf-tutorial-text-classification``). CIFAR-10 is the exception: the
training chapter's network trains for only two epochs on 1,000 images, so a
share of 85% leaves it about half right (0.47 for seed 0, 2026-11-28), as
PyTorch's tutorial reports for two epochs on the real set
(``pytorch-cifar10-tutorial``); 0.65 left it at 0.22. The reduced-precision
pages' network, trained for longer, reaches about 85%. A moved label changes
no image, so a network still answers by content, and those pages' agreement
with fp32 (answers, not labels) keeps its meaning."""


def moved(stream: np.random.Generator, n: int, agreement: float) -> np.ndarray:
    """Which of ``n`` samples carry another class's label (a fraction ``1 - agreement``)."""
    return stream.random(n) >= agreement


def relabel(labels: np.ndarray, num_classes: int, agreement: float, stream: np.random.Generator):
    """``labels`` with a fraction ``1 - agreement`` of them moved to another class,
    chosen uniformly (``stream`` decides which, so the content stays as it was)."""
    labels = np.asarray(labels).copy()
    move = moved(stream, len(labels), agreement)
    shift = stream.integers(1, num_classes, size=len(labels))
    labels[move] = (labels[move] + shift[move]) % num_classes
    return labels


# --------------------------------------------------------------------------- bytes


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def gzip_bytes(data: bytes) -> bytes:
    """``data`` gzip-compressed, byte-identical for identical input."""
    buf = io.BytesIO()
    # filename="" and a fixed mtime: byte-identical output for identical input.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=_GZIP_MTIME) as gz:
        gz.write(data)
    return buf.getvalue()


# --------------------------------------------------------------------------- IDX


_IDX_TYPES = {
    np.dtype(np.uint8): 0x08,
    np.dtype(np.int8): 0x09,
    np.dtype(">i2"): 0x0B,
    np.dtype(">i4"): 0x0C,
    np.dtype(">f4"): 0x0D,
    np.dtype(">f8"): 0x0E,
}


def idx_bytes(array: np.ndarray) -> bytes:
    """Encode ``array`` in the IDX format of LeCun's MNIST files.

    Magic number: two zero bytes, a type code (0x08 = unsigned byte) and the
    number of dimensions (so 2051 for images, 2049 for labels), then each
    dimension as a big-endian 32-bit integer, then the data in C order.
    """
    arr = np.asarray(array)
    dtype = arr.dtype.newbyteorder(">") if arr.dtype.itemsize > 1 else arr.dtype
    if dtype not in _IDX_TYPES:
        raise ValueError(f"IDX cannot store dtype {arr.dtype}")
    header = bytes([0, 0, _IDX_TYPES[dtype], arr.ndim])
    header += struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.astype(dtype, copy=False).tobytes(order="C")


# --------------------------------------------------------------------------- Python 2 pickles


class _Py2Pickler(pickle._Pickler):  # type: ignore[misc]  # the pure-Python pickler
    """Pickle like Python 2 did for the CIFAR-10 batches.

    Upstream's batches were written by Python 2's cPickle, so their keys, file
    names and the array's raw bytes are Python 2 ``str`` objects (opcodes
    ``SHORT_BINSTRING``/``BINSTRING``). Python 3 loads those as ``str`` with
    ``encoding="latin1"`` (torchvision) and as ``bytes`` with
    ``encoding="bytes"`` (Keras). Python 3's own pickler would write ``bytes``,
    which load as ``bytes`` under both encodings and break torchvision.
    """

    dispatch = pickle._Pickler.dispatch.copy()

    def _save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str

    def save_global(self, obj, name=None):  # noqa: ANN001 - pickle's signature
        # Python 2-era numpy pickled arrays via numpy.core.multiarray._reconstruct,
        # which numpy 2 still resolves (silently) when unpickling.
        if getattr(obj, "__name__", None) == "_reconstruct" and "multiarray" in getattr(
            obj, "__module__", ""
        ):
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
            return
        super().save_global(obj, name)


def py2_pickle_bytes(obj: object) -> bytes:
    """``obj`` pickled (protocol 2) with ``bytes`` written as Python 2 ``str``."""
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


# --------------------------------------------------------------------------- archives


def _fixed_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """``info`` with a fixed date and no owner, so that the archive is reproducible."""
    info.mtime, info.uid, info.gid, info.uname, info.gname = _TAR_MTIME, 0, 0, "", ""
    return info


def tar_files(archive: Path, paths: list[Path]) -> Path:
    """An uncompressed tar of loose files, each stored under its bare name."""
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        for path in paths:
            info = _fixed_owner(tar.gettarinfo(str(path), arcname=path.name))
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    return archive


def tar_gz_tree(archive: Path, base: Path, top: Path) -> Path:
    """A ``.tar.gz`` of the folder ``top``, its members named relative to ``base``."""
    raw_tar = io.BytesIO()
    with tarfile.open(fileobj=raw_tar, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted([top, *top.rglob("*")]):
            arcname = path.relative_to(base).as_posix()
            info = _fixed_owner(tar.gettarinfo(str(path), arcname=arcname))
            if info.isfile():
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    archive.write_bytes(gzip_bytes(raw_tar.getvalue()))
    return archive


def zip_tree(archive: Path, base: Path, top: Path) -> Path:
    """A deflated ``.zip`` of the folder ``top``, its members named relative to ``base``."""
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted([top, *top.rglob("*")]):
            arcname = path.relative_to(base).as_posix() + ("/" if path.is_dir() else "")
            info = zipfile.ZipInfo(arcname, date_time=(2010, 1, 1, 0, 0, 0))
            info.external_attr = (0o40755 if path.is_dir() else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, b"" if path.is_dir() else path.read_bytes())
    return archive
