"""The guide's data sets: what each one is, where it is published, and its checksums.

:data:`REGISTRY` holds one :class:`DatasetInfo` per data set: a description,
the upstream files (:class:`RemoteFile`, with their mirrors, sizes and the
checksums taken from published sources, never from a download of our own), the
layout that preparing it leaves on disk, and its class names. :func:`info`
looks a name up, forgivingly; :func:`registry_table` is the book's table of it.

Getting the data onto disk is :mod:`rocm_dl_guide.core.datasets`' job, reading
it is :mod:`rocm_dl_guide.core.loaders`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# The upstream class names, in label order (the fixtures use them too).
MNIST_CLASSES = tuple(str(d) for d in range(10))
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


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
    raw_sha256: str | None = None
    """SHA-256 of the file's decompressed content (a ``.gz`` file): a copy that
    was compressed again (a Linux distribution's package) has another ``sha256``
    but the same content."""

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
# SHA-256 of the decompressed IDX files, which zalandoresearch does not publish:
# as independent loaders list them for the upstream files (the Rust crate
# dataset_ml's FashionMnist partitions, which download from
# zalandoresearch/fashion-mnist's data/fashion/). Debian's dataset-fashion-mnist
# package ships the same content compressed again (other .gz bytes).
_FASHION_RAW_SHA256 = {
    "train-images-idx3-ubyte.gz": (
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
    ),
    "train-labels-idx1-ubyte.gz": (
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"
    ),
    "t10k-images-idx3-ubyte.gz": (
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
    ),
    "t10k-labels-idx1-ubyte.gz": (
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"
    ),
}


def _idx_files(
    mirrors: tuple[str, ...], table: tuple, source: str, raw: dict[str, str] | None = None
) -> tuple[RemoteFile, ...]:
    return tuple(
        RemoteFile(
            filename=name,
            urls=tuple(m + name for m in mirrors),
            size=size,
            sha256=sha,
            md5=md5,
            checksum_source=source,
            raw_sha256=(raw or {}).get(name),
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
        classes=MNIST_CLASSES,
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
            "md5: torchvision FashionMNIST; decompressed sha256: dataset_ml's FashionMnist",
            raw=_FASHION_RAW_SHA256,
        ),
        layout=_IDX_LAYOUT.format(folder="FashionMNIST"),
        kind="idx",
        top="FashionMNIST/raw",
        classes=FASHION_MNIST_CLASSES,
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
        classes=CIFAR10_CLASSES,
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
