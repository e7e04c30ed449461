"""Image fixtures: MNIST, Fashion-MNIST, CIFAR-10 and Tiny ImageNet, in their upstream formats.

Each class has its own fixed random pattern (a handwriting-like stroke, a
textured silhouette, a colour field), and each image is that pattern shifted
and with noise, so a small model trained for a few batches beats chance by a
wide margin. The files are those of the real download:

- :func:`write_mnist`, :func:`write_fashion_mnist`: ``MNIST/raw`` /
  ``FashionMNIST/raw`` with the four IDX files, gzip-compressed and plain;
- :func:`write_cifar10`: ``cifar-10-batches-py`` with the Python-2-style pickle
  batches of ``cifar-10-python.tar.gz``;
- :func:`write_tiny_imagenet`: the ``tiny-imagenet-200`` tree of
  ``tiny-imagenet-200.zip`` (JPEG images, box and annotation files).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rocm_dl_guide.core import fixture_formats  # its rng(): a local name here
from rocm_dl_guide.core.dataset_registry import CIFAR10_CLASSES
from rocm_dl_guide.core.fixture_formats import gzip_bytes, idx_bytes, py2_pickle_bytes, write_bytes

# Tiny ImageNet classes used by the fixture: real WordNet ids of Tiny ImageNet's 200
# classes (from the sorted list of its train/ folders as published in public code),
# with the synset names that words.txt gives them (here taken from the ImageNet-1k
# class index, which uses the same WordNet lemma lists). Only the first
# ``num_classes`` are written.
TINY_IMAGENET_CLASSES: tuple[tuple[str, str], ...] = (
    ("n02124075", "Egyptian cat"),
    ("n04507155", "umbrella"),
    ("n07747607", "orange"),
    ("n03447447", "gondola"),
    ("n02099601", "golden retriever"),
    ("n09256479", "coral reef"),
    ("n04285008", "sports car, sport car"),
    ("n12267677", "acorn"),
    ("n02504458", "African elephant, Loxodonta africana"),
    ("n03179701", "desk"),
    ("n02123394", "Persian cat"),
    ("n02129165", "lion, king of beasts, Panthera leo"),
    ("n02423022", "gazelle"),
    ("n02509815", "lesser panda, red panda, panda, bear cat, cat bear, Ailurus fulgens"),
    ("n02094433", "Yorkshire terrier"),
    ("n02481823", "chimpanzee, chimp, Pan troglodytes"),
    ("n02364673", "guinea pig, Cavia cobaya"),
    ("n02403003", "ox"),
    ("n02437312", "Arabian camel, dromedary, Camelus dromedarius"),
    ("n02486410", "baboon"),
    ("n02410509", "bison"),
    ("n02123045", "tabby, tabby cat"),
    ("n02074367", "dugong, Dugong dugon"),
    ("n01882714", "koala, koala bear, kangaroo bear, native bear, Phascolarctos cinereus"),
    ("n03662601", "lifeboat"),
    ("n03393912", "freight car"),
    ("n03100240", "convertible"),
    ("n03670208", "limousine, limo"),
    ("n03444034", "go-kart"),
    ("n03796401", "moving van"),
    ("n04465501", "tractor"),
    ("n03902125", "pay-phone, pay-station"),
    ("n04099969", "rocking chair, rocker"),
    ("n03201208", "dining table, board"),
    ("n07749582", "lemon"),
    ("n07753592", "banana"),
    ("n07768694", "pomegranate"),
    ("n03854065", "organ, pipe organ"),
    ("n03637318", "lampshade, lamp shade"),
    ("n09246464", "cliff, drop, drop-off"),
    ("n09193705", "alp"),
    ("n09332890", "lakeside, lakeshore"),
    ("n09428293", "seashore, coast, seacoast, sea-coast"),
    ("n03649909", "lawn mower, mower"),
    ("n03970156", "plunger, plumber's helper"),
)


# --------------------------------------------------------------------------- helpers


def _blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur over the first two axes (numpy only)."""
    radius = max(1, int(3 * sigma))
    x = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * (x / sigma) ** 2)
    kernel /= kernel.sum()
    out = img.astype(np.float64)
    for axis in (0, 1):
        out = np.apply_along_axis(lambda m: np.convolve(m, kernel, mode="same"), axis, out)
    return out


def _normalise(a: np.ndarray) -> np.ndarray:
    lo, hi = float(a.min()), float(a.max())
    return (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)


def _balanced_labels(rng: np.random.Generator, n: int, num_classes: int) -> np.ndarray:
    labels = np.arange(n) % num_classes
    rng.shuffle(labels)
    return labels.astype(np.int64)


def _shift(img: np.ndarray, rng: np.random.Generator, max_shift: int) -> np.ndarray:
    dy, dx = rng.integers(-max_shift, max_shift + 1, size=2)
    return np.roll(img, (int(dy), int(dx)), axis=(0, 1))


# --------------------------------------------------------------------------- IDX


def _write_idx_set(raw: Path, splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """``raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte`` plus the ``.gz`` originals."""
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, (images, labels) in splits.items():
        for stem, arr in (
            (f"{prefix}-images-idx3-ubyte", images.astype(np.uint8)),
            (f"{prefix}-labels-idx1-ubyte", labels.astype(np.uint8)),
        ):
            data = idx_bytes(arr)
            write_bytes(raw / stem, data)
            write_bytes(raw / f"{stem}.gz", gzip_bytes(data))


def _stroke_template(rng: np.random.Generator, size: int = 28) -> np.ndarray:
    """A handwriting-like polyline in the central 20x20 box, thickened by a blur."""
    canvas = np.zeros((size, size))
    points = rng.uniform(5, size - 6, size=(int(rng.integers(3, 6)), 2))
    for a, b in zip(points[:-1], points[1:], strict=False):
        for t in np.linspace(0.0, 1.0, 60):
            y, x = a + (b - a) * t
            canvas[int(round(y)), int(round(x))] = 1.0
    return _normalise(_blur(canvas, 1.1))


def _garment_template(rng: np.random.Generator, size: int = 28) -> np.ndarray:
    """A left-right symmetric blob with a class-specific stripe texture."""
    low = rng.random((7, 4)) > 0.45
    low = np.concatenate([low, low[:, ::-1]], axis=1)  # 7x8, symmetric
    mask = np.kron(low, np.ones((3, 3)))[:, 1:-1]  # 21x22
    canvas = np.zeros((size, size))
    canvas[3:24, 3:25] = mask
    yy, xx = np.mgrid[0:size, 0:size]
    freq, angle = rng.uniform(0.3, 1.2), rng.uniform(0, np.pi)
    texture = 0.65 + 0.35 * np.sin(freq * (np.cos(angle) * xx + np.sin(angle) * yy))
    return _normalise(_blur(canvas, 0.8)) * texture


def _idx_images(
    templates: np.ndarray, labels: np.ndarray, rng: np.random.Generator, max_shift: int
) -> np.ndarray:
    """Per-sample: the class template, shifted, scaled and with noise on the ink."""
    out = np.empty((len(labels), 28, 28), dtype=np.uint8)
    for i, label in enumerate(labels):
        img = _shift(templates[label], rng, max_shift)
        img = img * rng.uniform(150, 255) + rng.normal(0, 70, img.shape) * (img > 0.1)
        img = img + np.abs(rng.normal(0, 45, img.shape))  # background speckle
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def _write_idx_dataset(
    dest: Path,
    folder: str,
    make_template: Callable[[np.random.Generator], np.ndarray],
    seed: int,
    n_train: int,
    n_test: int,
    stream: str,
) -> Path:
    dest = Path(dest)
    trng = fixture_formats.rng(seed, f"{stream}-templates")
    templates = np.stack([make_template(trng) for _ in range(10)])
    splits = {}
    agreement = fixture_formats.LABEL_AGREEMENT.get(stream)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        rng = fixture_formats.rng(seed, f"{stream}-{prefix}")
        labels = _balanced_labels(rng, n, 10)
        images = _idx_images(templates, labels, rng, max_shift=3)
        if agreement is not None:
            moved = fixture_formats.rng(seed, f"{stream}-{prefix}-labels")
            labels = fixture_formats.relabel(labels, 10, agreement, moved)
        splits[prefix] = (images, labels)
    _write_idx_set(dest / folder / "raw", splits)
    return dest


def write_mnist(dest: Path, seed: int = 0, n_train: int = 2000, n_test: int = 500) -> Path:
    """MNIST fixture: ``dest/MNIST/raw/`` as ``torchvision.datasets.MNIST(dest)`` expects.

    28x28 uint8 images, labels 0-9 (balanced); each digit class is a fixed random
    stroke pattern, shifted by up to one pixel, with noise. Returns ``dest``.
    """
    return _write_idx_dataset(dest, "MNIST", _stroke_template, seed, n_train, n_test, "mnist")


def write_fashion_mnist(dest: Path, seed: int = 0, n_train: int = 2000, n_test: int = 500) -> Path:
    """Fashion-MNIST fixture: ``dest/FashionMNIST/raw/`` (torchvision's layout).

    Same formats as MNIST; each class is a fixed symmetric textured silhouette.
    Returns ``dest``.
    """
    return _write_idx_dataset(
        dest, "FashionMNIST", _garment_template, seed, n_train, n_test, "fashion-mnist"
    )


# --------------------------------------------------------------------------- CIFAR-10


def _cifar_templates(rng: np.random.Generator) -> np.ndarray:
    templates = []
    for _ in range(10):
        low = rng.uniform(0, 1, size=(4, 4, 3))
        big = _blur(np.kron(low, np.ones((8, 8, 1))), 2.5)
        templates.append(40 + 175 * _normalise(big))
    return np.stack(templates)


def _cifar_images(
    templates: np.ndarray, labels: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """N x 3072 uint8 rows: 1024 red, then 1024 green, then 1024 blue values (row-major)."""
    rows = np.empty((len(labels), 3072), dtype=np.uint8)
    for i, label in enumerate(labels):
        img = _shift(templates[label], rng, 2)
        img = img + rng.normal(0, 12, size=(1, 1, 3)) + rng.normal(0, 18, size=img.shape)
        rows[i] = np.clip(img, 0, 255).astype(np.uint8).transpose(2, 0, 1).reshape(3072)
    return rows


def write_cifar10(dest: Path, seed: int = 0, n_train: int = 1000, n_test: int = 2000) -> Path:
    """CIFAR-10 fixture: ``dest/cifar-10-batches-py/`` as in ``cifar-10-python.tar.gz``.

    ``data_batch_1`` .. ``data_batch_5`` share ``n_train`` images (the first
    batches take the remainder), ``test_batch`` holds ``n_test``; each is a dict
    with ``batch_label``, ``labels`` (list of int), ``data`` (uint8 N x 3072,
    row-major red, green, blue planes) and ``filenames``; ``batches.meta`` has
    ``label_names``, ``num_cases_per_batch`` and ``num_vis``. Also writes the
    upstream ``readme.html``. Returns ``dest``. The test set is the larger one
    so that the reduced-precision page's agreement moves in 0.05% steps.
    """
    if n_train < 5:
        raise ValueError("n_train must be at least 5 (one image per data batch)")
    dest = Path(dest)
    out = dest / "cifar-10-batches-py"
    out.mkdir(parents=True, exist_ok=True)
    templates = _cifar_templates(fixture_formats.rng(seed, "cifar10-templates"))

    agreement = fixture_formats.LABEL_AGREEMENT.get("cifar10")

    def batch(label: str, labels: np.ndarray, rng: np.random.Generator, first: int) -> dict:
        data = _cifar_images(templates, labels, rng)
        if agreement is not None:  # the content stays; some labels move
            moved = fixture_formats.rng(seed, f"cifar10-{label}-labels")
            labels = fixture_formats.relabel(labels, 10, agreement, moved)
        names = [
            f"fixture_{CIFAR10_CLASSES[c]}_s_{first + i:06d}.png".encode("ascii")
            for i, c in enumerate(labels)
        ]
        return {
            b"batch_label": label.encode("ascii"),
            b"labels": [int(c) for c in labels],
            b"data": data,
            b"filenames": names,
        }

    rng = fixture_formats.rng(seed, "cifar10-train")
    labels = _balanced_labels(rng, n_train, 10)
    sizes = [n_train // 5 + (1 if i < n_train % 5 else 0) for i in range(5)]
    start = 0
    for i, size in enumerate(sizes, start=1):
        part = labels[start : start + size]
        content = batch(f"training batch {i} of 5", part, rng, start)
        write_bytes(out / f"data_batch_{i}", py2_pickle_bytes(content))
        start += size
    rng = fixture_formats.rng(seed, "cifar10-test")
    content = batch("testing batch 1 of 1", _balanced_labels(rng, n_test, 10), rng, 0)
    write_bytes(out / "test_batch", py2_pickle_bytes(content))
    meta = {
        b"num_cases_per_batch": sizes[0],
        b"label_names": [name.encode("ascii") for name in CIFAR10_CLASSES],
        b"num_vis": 3072,
    }
    write_bytes(out / "batches.meta", py2_pickle_bytes(meta))
    write_bytes(
        out / "readme.html",
        b"<meta HTTP-EQUIV='REFRESH' content='0; url=http://www.cs.toronto.edu/~kriz/cifar.html'>"
        b"\n<!-- rocm_dl_guide generated fixture, not the real CIFAR-10 -->\n",
    )
    return dest


# --------------------------------------------------------------------------- Tiny ImageNet


def _tiny_templates(rng: np.random.Generator, num_classes: int) -> np.ndarray:
    templates = []
    for _ in range(num_classes):
        low = rng.uniform(0, 1, size=(8, 8, 3))
        big = _blur(np.kron(low, np.ones((8, 8, 1))), 3.0)
        templates.append(30 + 195 * _normalise(big))
    return np.stack(templates)


def _tiny_image(
    template: np.ndarray, rng: np.random.Generator
) -> tuple[bytes, tuple[int, int, int, int]]:
    """A 64x64 RGB JPEG: the class pattern inside a random box on a grey noisy field."""
    from PIL import Image

    w, h = (int(v) for v in rng.integers(34, 61, size=2))
    x0, y0 = int(rng.integers(0, 64 - w + 1)), int(rng.integers(0, 64 - h + 1))
    img = np.full((64, 64, 3), rng.uniform(90, 160)) + rng.normal(0, 30, (64, 64, 3))
    obj = _shift(template, rng, 3) + rng.normal(0, 15, template.shape)
    img[y0 : y0 + h, x0 : x0 + w] = obj[y0 : y0 + h, x0 : x0 + w]
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(
        buf, format="JPEG", quality=90
    )
    return buf.getvalue(), (x0, y0, x0 + w - 1, y0 + h - 1)


def write_tiny_imagenet(
    dest: Path,
    seed: int = 0,
    num_classes: int = 10,
    n_train_per_class: int = 50,
    n_val_per_class: int = 10,
    n_test: int = 50,
) -> Path:
    """Tiny ImageNet fixture: ``dest/tiny-imagenet-200/`` as in ``tiny-imagenet-200.zip``.

    ``wnids.txt`` lists ``num_classes`` real Tiny ImageNet WordNet ids (at most
    ``len(TINY_IMAGENET_CLASSES)``); ``words.txt`` has ``wnid<TAB>names`` lines;
    ``train/<wnid>/images/<wnid>_<i>.JPEG`` with ``train/<wnid>/<wnid>_boxes.txt``;
    ``val/images/val_<i>.JPEG`` with ``val/val_annotations.txt``
    (``val_0.JPEG<TAB>wnid<TAB>x0<TAB>y0<TAB>x1<TAB>y1``); ``test/images/test_<i>.JPEG``.
    Images are 64x64 RGB JPEGs. Returns ``dest``.
    """
    if not 1 <= num_classes <= len(TINY_IMAGENET_CLASSES):
        raise ValueError(
            f"num_classes must be between 1 and {len(TINY_IMAGENET_CLASSES)}, got {num_classes}"
        )
    dest = Path(dest)
    root = dest / "tiny-imagenet-200"
    root.mkdir(parents=True, exist_ok=True)
    classes = TINY_IMAGENET_CLASSES[:num_classes]
    wnids = [wnid for wnid, _ in classes]
    templates = _tiny_templates(fixture_formats.rng(seed, "tiny-templates"), num_classes)

    (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (root / "words.txt").write_text("".join(f"{w}\t{n}\n" for w, n in TINY_IMAGENET_CLASSES))

    rng = fixture_formats.rng(seed, "tiny-train")
    for c, wnid in enumerate(wnids):
        images = root / "train" / wnid / "images"
        images.mkdir(parents=True, exist_ok=True)
        boxes = []
        for i in range(n_train_per_class):
            data, box = _tiny_image(templates[c], rng)
            name = f"{wnid}_{i}.JPEG"
            (images / name).write_bytes(data)
            boxes.append(f"{name}\t" + "\t".join(str(v) for v in box))
        (root / "train" / wnid / f"{wnid}_boxes.txt").write_text("\n".join(boxes) + "\n")

    rng = fixture_formats.rng(seed, "tiny-val")
    val_images = root / "val" / "images"
    val_images.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, c in enumerate(_balanced_labels(rng, num_classes * n_val_per_class, num_classes)):
        data, box = _tiny_image(templates[c], rng)
        (val_images / f"val_{i}.JPEG").write_bytes(data)
        lines.append(f"val_{i}.JPEG\t{wnids[c]}\t" + "\t".join(str(v) for v in box))
    (root / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")

    rng = fixture_formats.rng(seed, "tiny-test")
    test_images = root / "test" / "images"
    test_images.mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(_balanced_labels(rng, n_test, num_classes)):
        data, _ = _tiny_image(templates[c], rng)
        (test_images / f"test_{i}.JPEG").write_bytes(data)
    return dest
