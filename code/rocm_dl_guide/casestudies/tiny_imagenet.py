"""tiny-imagenet-200 for Inception v3: the validation folder rearranged, the guide's loaders.

:func:`reorganize_val` gives the validation images the class-per-folder layout
``ImageFolder`` expects (safe to run twice, nothing half-moved if interrupted),
:func:`transforms_for` holds the guide's train and validation transforms and
:func:`tiny_imagenet_loaders` builds the data sets and loaders the fine-tuning
case study (:mod:`.inception`) trains on and the optimisation chapter
calibrates and times on.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.casestudies.inception_pretrained import MEAN, MIN_SIZE, STD
from rocm_dl_guide.core import datasets, profiles

# The guide's input sizes and batch (torchvision's reference classification script).
TRAIN_CROP_SIZE = 299
VAL_RESIZE_SIZE = 342
VAL_CROP_SIZE = 299
BATCH_SIZE = 32


_DONE = ".reorganized"
_STAGING = ".val-reorganizing"
_OLD = ".val-original"


def _read_annotations(path: Path) -> dict[str, str]:
    """``val_annotations.txt``: file name -> wnid (tab-separated, boxes ignored)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: is this a tiny-imagenet-200 directory?")
    mapping: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise ValueError(f"{path}:{n}: expected 'FILE<TAB>WNID<TAB>...', got {line!r}")
        mapping[parts[0]] = parts[1]
    return mapping


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def reorganize_val(root: str | os.PathLike) -> int:
    """Give ``root/val`` the class-per-folder layout: ``val/<wnid>/images/<file>``.

    ``root`` is the ``tiny-imagenet-200`` directory. The archive ships the
    validation images in one folder, ``val/images``, with their classes listed
    in ``val/val_annotations.txt``; ``ImageFolder`` wants one folder per class.

    Safe to run twice (the second run finds the marker ``val/.reorganized`` and
    does nothing), and never leaves the folder half-moved: the new tree is
    built beside the old one (hard links, or copies), then swapped in with two
    renames, and an interrupted run is repaired by the next one. Every image
    must be listed in the annotations (and every listed image present), else
    ``ValueError`` and nothing changes. Returns the number of images
    reorganised (0 when already done).
    """
    root = Path(root)
    val = root / "val"
    staging = root / _STAGING
    old = root / _OLD
    # Repair an interrupted swap: the old tree was moved aside but the new one not in.
    if not val.exists() and old.is_dir():
        if (staging / _DONE).is_file():
            os.replace(staging, val)
        else:
            os.replace(old, val)
    if (val / _DONE).is_file():
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
        return 0
    shutil.rmtree(staging, ignore_errors=True)  # leftovers of an interrupted build
    shutil.rmtree(old, ignore_errors=True)
    annotations = _read_annotations(val / "val_annotations.txt")
    images_dir = val / "images"
    if not images_dir.is_dir():
        raise FileNotFoundError(f"{images_dir} is missing: is this a tiny-imagenet-200 directory?")
    files = sorted(p for p in images_dir.iterdir() if p.is_file())
    unlisted = [p.name for p in files if p.name not in annotations]
    if unlisted:
        raise ValueError(
            f"{images_dir}: {len(unlisted)} image(s) not in val_annotations.txt, "
            f"e.g. {unlisted[0]}; nothing was moved"
        )
    missing = sorted(set(annotations) - {p.name for p in files})
    if missing:
        raise ValueError(
            f"{images_dir}: {len(missing)} annotated image(s) missing, e.g. {missing[0]}; "
            "nothing was moved"
        )
    try:
        staging.mkdir()
        for p in files:
            target = staging / annotations[p.name] / "images"
            target.mkdir(parents=True, exist_ok=True)
            _link_or_copy(p, target / p.name)
        shutil.copy2(val / "val_annotations.txt", staging / "val_annotations.txt")
        (staging / _DONE).write_text(f"{len(files)} images in class folders\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(val, old)
    os.replace(staging, val)
    shutil.rmtree(old, ignore_errors=True)
    return len(files)


def class_names(root: str | os.PathLike, wnids: Iterable[str]) -> list[str]:
    """Readable names for ``wnids`` from ``words.txt`` (the first synonym of each)."""
    words: dict[str, str] = {}
    path = Path(root) / "words.txt"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            wnid, _, names = line.partition("\t")
            words[wnid] = names.split(",")[0].strip()
    return [words.get(w, w) for w in wnids]


def transforms_for(image_size: int = TRAIN_CROP_SIZE):
    """The guide's train and validation transforms for crops of ``image_size``.

    Training: a random resized crop (bilinear), to float, normalise. Validation:
    resize to ``image_size * 342 / 299`` (342 for 299), centre crop, to float,
    normalise.
    """
    import torch
    from torchvision.transforms import InterpolationMode, v2

    if image_size < MIN_SIZE:
        raise ValueError(
            f"Inception v3 needs inputs of at least {MIN_SIZE} pixels, got {image_size}"
        )
    bilinear = InterpolationMode.BILINEAR
    resize = round(image_size * VAL_RESIZE_SIZE / VAL_CROP_SIZE)
    tail = [v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    train_tf = v2.Compose(
        [v2.RandomResizedCrop(image_size, interpolation=bilinear, antialias=True), *tail]
    )
    val_tf = v2.Compose(
        [
            v2.Resize(resize, interpolation=bilinear, antialias=True),
            v2.CenterCrop(image_size),
            *tail,
        ]
    )
    return train_tf, val_tf


@dataclass
class TinyImageNet:
    """The tiny-imagenet-200 data ready for training."""

    train_set: Any
    val_set: Any
    train_loader: Any
    val_loader: Any
    classes: list[str]
    """WordNet ids, in label order."""
    names: list[str]
    """Readable class names, in label order."""
    image_size: int
    prepared: datasets.PreparedData


def tiny_imagenet_loaders(
    profile: profiles.Profile,
    image_size: int | None = None,
    batch_size: int = BATCH_SIZE,
    num_workers: int | None = None,
    seed: int = 0,
    device=None,
) -> TinyImageNet:
    """Prepare tiny-imagenet-200, reorganise its validation folder, and build
    ``ImageFolder`` sets and loaders with the guide's transforms.

    ``image_size`` defaults to the profile's (``smoke``: 75) or the guide's 299.
    The training loader samples randomly from a generator seeded with ``seed``;
    the validation loader is sequential. ``num_workers`` defaults to the CPU
    count (at most 16, the guide's number) on a GPU machine and 0 on the CPU.
    """
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    from rocm_dl_guide.core import device as devices

    size = image_size or profile.image_size or TRAIN_CROP_SIZE
    prepared = datasets.prepare("tiny-imagenet-200", profile=profile)
    root = prepared.root / "tiny-imagenet-200"
    reorganize_val(root)
    train_tf, val_tf = transforms_for(size)
    train_set = ImageFolder(str(root / "train"), transform=train_tf)
    val_set = ImageFolder(str(root / "val"), transform=val_tf)
    if val_set.classes != train_set.classes:
        only_train = sorted(set(train_set.classes) - set(val_set.classes))
        raise ValueError(
            f"{root}: the validation classes differ from the training classes "
            f"(e.g. {only_train[:3]} have no validation images)"
        )
    dev = torch.device(device) if device is not None else devices.pick()
    if num_workers is None:
        num_workers = min(16, os.cpu_count() or 1) if dev.type == "cuda" else 0
    extra: dict[str, Any] = {"num_workers": num_workers, "pin_memory": dev.type == "cuda"}
    if num_workers:
        extra["persistent_workers"] = True
    generator = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(
        train_set, batch_size=batch_size, shuffle=True, generator=generator, **extra
    )
    val_loader = DataLoader(val_set, batch_size=batch_size, shuffle=False, **extra)
    return TinyImageNet(
        train_set,
        val_set,
        train_loader,
        val_loader,
        list(train_set.classes),
        class_names(root, train_set.classes),
        size,
        prepared,
    )
