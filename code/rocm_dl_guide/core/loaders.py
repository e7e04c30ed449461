"""Reading prepared data sets: the helpers between ``datasets.prepare`` and the frameworks.

:func:`rocm_dl_guide.core.datasets.prepare` leaves a data set (real or
fixture) on disk in its upstream layout; these helpers hand it to the
frameworks where their own loaders cannot take it as it is:

- :func:`mnist_arrays`: MNIST or Fashion-MNIST as uint8 arrays, like
  ``keras.datasets`` returns them, read from the same IDX files torchvision uses;
- :func:`keras_home_for_fashion_mnist` and :func:`use_keras_home`: a
  ``KERAS_HOME`` from which ``keras.datasets.fashion_mnist.load_data()`` reads
  the prepared files (real or fixture) instead of downloading its own;
- :func:`verify_cifar10` and :func:`cifar10_dataset`: torchvision's ``CIFAR10``
  over the prepared folder, checked against the registry instead of
  torchvision's hard-coded MD5s (which refuse the fixture).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rocm_dl_guide.core import datasets, files, profiles
from rocm_dl_guide.core.archives import IdxFormatError, file_hash, load_idx, verify_file
from rocm_dl_guide.core.dataset_registry import REGISTRY, UnknownDatasetError, info


def mnist_arrays(
    name: str, profile: profiles.Profile
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], datasets.PreparedData]:
    """``((x_train, y_train), (x_test, y_test), prepared)`` as uint8 arrays, like Keras'.

    For TensorFlow/Keras: ``keras.datasets.mnist`` hash-checks its own
    ``mnist.npz`` and so cannot read the fixture; this reads the same IDX files
    torchvision uses. ``name`` is ``"mnist"`` or ``"fashion-mnist"``.
    """
    spec = info(name)
    if spec.kind != "idx":
        raise UnknownDatasetError(f"mnist_arrays reads mnist or fashion-mnist, not {name!r}")
    prepared = datasets.prepare(spec.name, profile)
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


def keras_home_for_fashion_mnist(profile: profiles.Profile, system_copies: bool = True) -> Path:
    """A ``KERAS_HOME`` whose ``datasets/fashion-mnist/`` holds the four IDX ``.gz`` files.

    ``keras.datasets.fashion_mnist.load_data()`` takes no path argument (Keras
    3.x); it calls ``get_file`` without a hash for each ``.gz`` under
    ``$KERAS_HOME/datasets/fashion-mnist`` and uses the file if present. Point
    Keras there with :func:`use_keras_home` (or ``KERAS_HOME`` set before Keras
    is imported). Holds the real files or the fixture, as
    :func:`~rocm_dl_guide.core.datasets.prepare` decides.
    """
    spec = info("fashion-mnist")
    prepared = datasets.prepare(spec.name, profile, system_copies)
    home = datasets.cache_dir() / "keras-home" / prepared.kind
    sources = {rf.filename: prepared.root / spec.top / rf.filename for rf in spec.files}

    def stale(target: Path) -> list[str]:
        return [name for name, src in sources.items() if not _same_file(target / name, src)]

    def copy(target: Path) -> None:
        target.mkdir(parents=True, exist_ok=True)
        for name in stale(target):
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
    :class:`FileNotFoundError` or
    :class:`~rocm_dl_guide.core.archives.ChecksumError` naming the file.
    """
    root = Path(root)
    marker = datasets.read_marker(root) or {}
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
