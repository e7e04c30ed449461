"""Small, learnable stand-ins for the guide's data sets, in the exact upstream formats.

With the ``fixtures`` data source (the ``smoke`` profile's default, or
``--data-source fixtures`` on a machine without network) the case studies run
on these generated fixtures instead of the real data. Each writer produces the
same files, names, directory layout and binary formats as the real download,
so the real loaders (torchvision, Keras, ``tf.keras.utils``) read them
unchanged. The contents are synthetic: each class has its own fixed random
pattern (images) or its own sentiment vocabulary (reviews), plus per-sample
noise, so a small model trained for a few batches beats chance by a wide
margin -- but the numbers it reaches say nothing about the real data sets.
Where a page reports accuracy to compare with the real data's (Fashion-MNIST,
IMDB), some labels
name another class than the sample's pattern
(:data:`rocm_dl_guide.core.fixture_formats.LABEL_AGREEMENT`), so that no model
scores above what the page's model reaches on the real data.

This module is the fixtures' one entry point: :func:`write` dispatches by
data-set name to a writer (:data:`WRITERS`) and :func:`write_archive` packs a
fixture as the upstream download (``.tar.gz`` / ``.zip``). The writers live
by kind of data:

- :mod:`rocm_dl_guide.core.fixture_images`: MNIST, Fashion-MNIST (IDX files),
  CIFAR-10 (pickled batches) and Tiny ImageNet (JPEG tree);
- :mod:`rocm_dl_guide.core.fixture_text`: the IMDB ``aclImdb`` tree;
- :mod:`rocm_dl_guide.core.fixture_formats`: the seeded random streams and the
  byte formats (IDX, gzip, Python 2 pickles, tar and zip) they all use.

Every writer is deterministic for a given ``seed`` and sizes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from rocm_dl_guide.core import fixture_formats, fixture_images, fixture_text

FIXTURE_VERSION = 7
"""Bumped whenever a writer's output changes; cached fixtures of another version are rebuilt."""

WRITERS: dict[str, Callable[..., Path]] = {
    "mnist": fixture_images.write_mnist,
    "fashion-mnist": fixture_images.write_fashion_mnist,
    "cifar10": fixture_images.write_cifar10,
    "imdb": fixture_text.write_imdb,
    "tiny-imagenet-200": fixture_images.write_tiny_imagenet,
}
"""Data-set name -> writer; the names match
:data:`rocm_dl_guide.core.dataset_registry.REGISTRY`."""

ARCHIVE_NAMES = {
    "mnist": "mnist-idx.tar",
    "fashion-mnist": "fashion-mnist-idx.tar",
    "cifar10": "cifar-10-python.tar.gz",
    "imdb": "aclImdb_v1.tar.gz",
    "tiny-imagenet-200": "tiny-imagenet-200.zip",
}
"""The file name :func:`write_archive` gives each data set (the upstream one where there is one)."""


def write(name: str, dest: Path, seed: int = 0, **sizes: int) -> Path:
    """Write the fixture of data set ``name`` under ``dest``; returns ``dest``."""
    try:
        writer = WRITERS[name]
    except KeyError:
        raise ValueError(f"no fixture for {name!r}: choose one of {', '.join(WRITERS)}") from None
    return writer(Path(dest), seed=seed, **sizes)


def write_archive(name: str, archive: Path, seed: int = 0, **sizes: int) -> Path:
    """Pack the fixture of ``name`` as its upstream download would be packed.

    ``cifar10`` -> a ``.tar.gz`` holding ``cifar-10-batches-py/``; ``imdb`` -> a
    ``.tar.gz`` holding ``aclImdb/``; ``tiny-imagenet-200`` -> a ``.zip`` holding
    ``tiny-imagenet-200/``; ``mnist`` / ``fashion-mnist`` (downloaded upstream as
    four loose ``.gz`` files) -> an uncompressed ``.tar`` of those four files.
    Deterministic for a seed. Returns ``archive``.
    """
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = write(name, Path(tmp), seed=seed, **sizes)
        if name in ("mnist", "fashion-mnist"):
            raw = base / ("MNIST" if name == "mnist" else "FashionMNIST") / "raw"
            gzipped = [raw / f"{stem}.gz" for stem in fixture_formats.IDX_FILES]
            fixture_formats.tar_files(archive, gzipped)
        elif name == "tiny-imagenet-200":
            fixture_formats.zip_tree(archive, base, base / "tiny-imagenet-200")
        else:
            top = base / ("cifar-10-batches-py" if name == "cifar10" else "aclImdb")
            fixture_formats.tar_gz_tree(archive, base, top)
    return archive
