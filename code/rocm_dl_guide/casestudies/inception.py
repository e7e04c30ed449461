"""Inception v3 with PyTorch: the training chapter's two case studies.

1. **Evaluating a pretrained model**: :func:`load_pretrained` builds torchvision's
   Inception v3 through the weights API (``Inception_V3_Weights.IMAGENET1K_V1``,
   which also carries the 1,000 ImageNet category names), :func:`preprocess`
   applies the guide's preprocessing and :func:`classify` returns the top-5
   classes of a photo. With the ``fixtures`` data source the model keeps random
   weights and :attr:`LoadedModel.note` says so; with ``real`` weights that
   cannot be downloaded are an error, never a silent switch to random ones.
2. **Fine-tuning on tiny-imagenet-200**: :func:`reorganize_val` gives the
   validation images the class-per-folder layout ``ImageFolder`` expects (safe
   to run twice, nothing half-moved if interrupted), :func:`tiny_imagenet_loaders`
   builds the guide's loaders and transforms, :func:`finetune_model` replaces the
   classifier and switches the auxiliary head off, and :func:`train` runs the
   guide's SGD/StepLR recipe through the shared loop
   :func:`rocm_dl_guide.training.train.fit`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.core import datasets, profiles

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import torch
    from PIL import Image
    from torch import nn

    from rocm_dl_guide.training.training_speed import SpeedComparison, Workload

# ImageNet statistics used by every torchvision classifier's preprocessing.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
EVAL_SIZE = 299
"""The guide resizes the photo's short side to 299 and crops the centre 299x299."""

# The guide's fine-tuning recipe (torchvision's reference classification script).
TRAIN_CROP_SIZE = 299
VAL_RESIZE_SIZE = 342
VAL_CROP_SIZE = 299
BATCH_SIZE = 32
LEARNING_RATE = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
LR_STEP_SIZE = 30
LR_GAMMA = 0.1
RANDOM_INIT_LR = 0.001
"""Learning rate used instead of 0.1 when the model starts from random weights
(the smoke profile, or offline): the guide's 0.1 is a fine-tuning rate and makes
training from scratch diverge within a few dozen steps."""
FULL_EPOCHS = 90
RECIPE = {
    "case study": "Inception v3 fine-tuning (PyTorch)",
    "optimizer": "SGD",
    "batch size": BATCH_SIZE,
    "learning rate": LEARNING_RATE,
    "momentum": MOMENTUM,
    "weight decay": WEIGHT_DECAY,
    "schedule": f"StepLR: x{LR_GAMMA} every {LR_STEP_SIZE} epochs",
    "epochs": FULL_EPOCHS,
    "input": f"train crop {TRAIN_CROP_SIZE}; val resize {VAL_RESIZE_SIZE}, crop {VAL_CROP_SIZE}",
}
"""The ``full`` profile's settings, which are the guide's."""
MIN_SIZE = 75
"""The smallest input Inception v3 accepts."""

SAMPLE_PHOTO = "grace_hopper.jpg"
"""A real photograph that ships with matplotlib (US Navy portrait of Grace Hopper,
public domain); ImageNet's category for it is "military uniform"."""
SAMPLE_PHOTO_CLASS = "military uniform"


class ImageError(ValueError):
    """A file that is not a readable image."""


# --------------------------------------------------------------------------- the model


def weights_enum():
    """torchvision's ``Inception_V3_Weights.IMAGENET1K_V1``."""
    from torchvision.models import Inception_V3_Weights

    return Inception_V3_Weights.IMAGENET1K_V1


def categories() -> list[str]:
    """The 1,000 ImageNet category names, carried by the weights' metadata (no download)."""
    return list(weights_enum().meta["categories"])


@dataclass
class LoadedModel:
    """What :func:`load_pretrained` returns."""

    model: nn.Module
    pretrained: bool
    """True when the ImageNet weights were loaded; False for random weights."""
    note: str
    """One plain sentence on which weights these are, and why."""
    categories: list[str]


def random_inception(num_classes: int = 1000, aux_logits: bool = True) -> nn.Module:
    from torchvision.models import inception_v3

    # The same architecture the pretrained builder makes (transform_input=True
    # maps ImageNet-normalised input to the scale Google's weights expect), with
    # torchvision's own initialisation asked for explicitly.
    return inception_v3(
        weights=None,
        num_classes=num_classes,
        aux_logits=aux_logits,
        transform_input=True,
        init_weights=True,
    )


def load_pretrained(
    profile: profiles.ProfileLike = None, pretrained: bool | None = None
) -> LoadedModel:
    """Inception v3 with ImageNet weights from torchvision's weights API, in eval mode.

    ``pretrained`` defaults to the profile's data source (``real``: pretrained,
    ``fixtures``: random weights). The weights are downloaded once into torch's
    hub cache (``$TORCH_HOME``) and their hash is checked. If they cannot be
    downloaded, :class:`~rocm_dl_guide.core.datasets.DataUnavailableError` says so
    and what to do instead: there is no silent fallback to random weights.
    """
    prof = profiles.current(profile)
    want = prof.pretrained if pretrained is None else pretrained
    weights = weights_enum()
    cats = categories()
    if want:
        from torchvision.models import inception_v3

        try:
            model = inception_v3(weights=weights)
        except Exception as exc:
            if not datasets.is_network_error(exc):
                raise
            raise datasets.DataUnavailableError(_weights_advice(weights, exc)) from None
        acc = weights.meta["_metrics"]["ImageNet-1K"]["acc@1"]
        note = f"pretrained weights {weights} (ImageNet-1k top-1 accuracy {acc}%)"
        return LoadedModel(model.eval(), True, note, cats)
    note = (
        f"RANDOM weights ({prof.source_note()}), so the predictions below are "
        "meaningless (the real ones need the real data source: "
        f"{profiles.DATA_SOURCE_VAR}=real, with network)"
    )
    return LoadedModel(random_inception().eval(), False, note, cats)


def _weights_advice(weights, exc: BaseException) -> str:
    import torch

    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    hub = Path(torch.hub.get_dir()) / "checkpoints"
    return (
        f"cannot download the pretrained Inception v3 weights {weights.url} ({reason}). "
        f"Two ways out: for an air-gapped machine, download that file elsewhere and copy "
        f"it into {hub}/; or use random weights and generated fixtures with "
        f"--data-source fixtures ({profiles.DATA_SOURCE_VAR}=fixtures)."
    )


def sample_photo() -> Path:
    """Path of the sample photo (shipped inside matplotlib's sample data)."""
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "sample_data" / SAMPLE_PHOTO
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall matplotlib")
    return path


def open_image(path: str | os.PathLike) -> Image.Image:
    """Open an image file as RGB, or raise :class:`ImageError` with one clear message."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as img:
            img.load()
            return img.convert("RGB")
    except FileNotFoundError:
        raise ImageError(f"{path}: no such file") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{path}: not a readable image ({exc})") from None


def preprocess(image: Image.Image, size: int = EVAL_SIZE) -> torch.Tensor:
    """The guide's preprocessing: resize the short side to ``size``, crop the
    centre ``size`` x ``size``, scale to [0, 1] and normalise with the ImageNet
    mean and standard deviation. Returns a 3 x size x size float tensor."""
    import torch
    from torchvision.transforms import v2

    pipeline = v2.Compose(
        [
            v2.Resize(size, antialias=True),
            v2.CenterCrop(size),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )
    return pipeline(image)


@dataclass
class Prediction:
    """What :func:`classify` returns: the top classes of one image."""

    frame: pandas.DataFrame
    """One row per class, best first: ``rank``, ``category``, ``index``, ``probability``."""
    device: str
    """The device the model ran on."""

    @property
    def top1(self) -> str:
        """The most probable category."""
        return str(self.frame["category"].iloc[0])

    @property
    def top1_probability(self) -> float:
        return float(self.frame["probability"].iloc[0])


def classify(
    model: nn.Module,
    image: Image.Image | torch.Tensor,
    categories: list[str],
    top: int = 5,
    device=None,
) -> Prediction:
    """Top-``top`` classes of one image (softmax over the model's logits).

    ``image`` is a PIL image (preprocessed here) or an already preprocessed
    3 x H x W tensor. The model runs in eval mode on ``device`` (default: the GPU
    when there is one).
    """
    import pandas as pd
    import torch

    from rocm_dl_guide.core import device as devices

    dev = torch.device(device) if device is not None else devices.pick()
    x = image if isinstance(image, torch.Tensor) else preprocess(image)
    if x.ndim != 3 or x.shape[0] != 3:
        raise ValueError(f"expected a 3 x H x W image tensor, got shape {tuple(x.shape)}")
    model = model.to(dev).eval()
    with torch.inference_mode():
        logits = model(x.unsqueeze(0).to(dev))
    probs = torch.softmax(logits[0].float(), dim=0).cpu()
    top_p, top_i = torch.topk(probs, top)
    frame = pd.DataFrame(
        {
            "rank": range(1, top + 1),
            "category": [categories[i] for i in top_i.tolist()],
            "index": top_i.tolist(),
            "probability": top_p.tolist(),
        }
    )
    return Prediction(frame, str(dev))


# --------------------------------------------------------------------------- tiny-imagenet-200

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
    profile: profiles.ProfileLike = None,
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

    prof = profiles.current(profile)
    size = image_size or prof.image_size or TRAIN_CROP_SIZE
    prepared = datasets.prepare("tiny-imagenet-200", profile=prof)
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


def finetune_model(
    num_classes: int, profile: profiles.ProfileLike = None
) -> tuple[nn.Module, LoadedModel]:
    """Inception v3 (pretrained where the profile says so and the weights can be
    had) with its classifier replaced for ``num_classes`` and the auxiliary
    classifier removed, as in the guide. Returns ``(model, what was loaded)``;
    the second item's ``model`` is the same object."""
    from torch import nn

    loaded = load_pretrained(profile)
    model = loaded.model
    model.fc = nn.Linear(model.fc.in_features, num_classes)
    model.aux_logits = False
    model.AuxLogits = None
    return model.train(), loaded


@dataclass
class InceptionRun:
    """What :func:`train` returns."""

    model: Any
    data: TinyImageNet
    result: Any
    """The :class:`rocm_dl_guide.training.train.TrainResult`."""
    weights_note: str
    lr: float
    """The initial learning rate used."""
    epochs: int
    device: str
    profile: str
    weights: Path | None
    """Where the trained weights were saved (``trained_inception_v3.pt``), if anywhere."""

    def summary(self) -> str:
        last = self.result.final
        val = (
            f"validation loss {last.val_loss:.3f}, accuracy {100 * last.val_accuracy:.1f}% "
            f"(chance {100 / len(self.data.classes):.1f}%)"
            if last and last.val_loss is not None
            else "no epochs run"
        )
        saved = f"; weights saved to {self.weights}" if self.weights else ""
        return (
            f"Inception v3 on tiny-imagenet-200 ({len(self.data.classes)} classes, "
            f"{self.data.image_size}px): {val} after {self.epochs} epoch(s) on {self.device}; "
            f"profile {self.profile}; start: {self.weights_note.split(':')[0]}, lr {self.lr:g}; "
            f"data: {self.data.prepared.note}{saved}"
        )

    def plot(self, ax=None):
        return self.result.plot(
            ax=ax, title=f"Inception v3 on tiny-imagenet-200 ({self.data.prepared.kind} data)"
        )


def train(
    profile: profiles.ProfileLike = None,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    amp: bool = False,
    channels_last: bool = False,
    fsdp: bool = False,
    image_size: int | None = None,
    batch_size: int = BATCH_SIZE,
    lr: float | None = None,
    seed: int = 0,
) -> InceptionRun:
    """Fine-tune Inception v3 on tiny-imagenet-200 with the guide's recipe.

    SGD (lr 0.1, momentum 0.9, weight decay 1e-4) with StepLR (x0.1 every 30
    epochs), cross-entropy loss, batch 32, 90 epochs in the ``full`` profile;
    the profile caps epochs (``smoke``: 2, the registry's cap for ``inception-v3``),
    batches per epoch and the input size. With
    ``checkpoint_dir`` every epoch is checkpointed (``resume`` continues;
    ``checkpoint_every`` adds checkpoints every N steps inside the epochs) and the
    final weights are saved as ``trained_inception_v3.pt``. ``lr`` defaults to
    the guide's 0.1 from pretrained weights and :data:`RANDOM_INIT_LR` from
    random ones.
    """
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train as loop

    prof = profiles.current(profile)
    n_epochs = prof.epochs(FULL_EPOCHS, epochs, example="inception-v3")
    dev = devices.pick()
    data = tiny_imagenet_loaders(
        prof, image_size=image_size, batch_size=batch_size, seed=seed, device=dev
    )
    torch.manual_seed(seed)
    model, loaded = finetune_model(len(data.classes), prof)
    if lr is None:
        lr = LEARNING_RATE if loaded.pretrained else RANDOM_INIT_LR
    optimizer = torch.optim.SGD(
        model.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
    result = loop.fit(
        model,
        data.train_loader,
        epochs=n_epochs,
        optimizer=optimizer,
        scheduler=scheduler,
        val_loader=data.val_loader,
        device=dev,
        max_train_batches=prof.max_train_batches,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        checkpoint_every=checkpoint_every,
        amp=amp,
        channels_last=channels_last,
        fsdp=fsdp,
        progress=progress,
        final_weights="trained_inception_v3.pt",
    )
    return InceptionRun(
        model=model,
        data=data,
        result=result,
        weights_note=loaded.note,
        lr=lr,
        epochs=n_epochs,
        device=str(devices.describe()),
        profile=prof.name,
        weights=result.weights,
    )


def training_workload(profile: profiles.ProfileLike = None, device=None) -> Workload:
    """What ``selfcheck`` times: the fine-tuning model and the training loader."""
    from rocm_dl_guide.training.training_speed import Workload

    prof = profiles.current(profile)
    data = tiny_imagenet_loaders(prof, device=device)
    classes = len(data.classes)

    def model_fn():
        return finetune_model(classes, prof)[0]

    return Workload(model_fn, data.train_loader, data.image_size)


def compare_training_speed(
    profile: profiles.ProfileLike = None,
    batch_size: int | None = None,
    image_size: int | None = None,
) -> SpeedComparison:
    """Training-step throughput of Inception v3 in float32, channels-last, autocast
    and both, measured in one run (see :func:`rocm_dl_guide.training.training_speed.compare`).

    Uses tiny-imagenet-200 batches at the profile's input size and a randomly
    initialised model (weights do not change the speed). On the CPU the run is
    short (batch 16, 1 warm-up step, 3 timed repeats of 3 steps); on a GPU,
    batch 32 with 5 warm-up steps and 5 repeats of 20 steps.
    """
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import training_speed

    prof = profiles.current(profile)
    dev = devices.pick()
    on_gpu = dev.type == "cuda"
    data = tiny_imagenet_loaders(
        prof,
        image_size=image_size,
        batch_size=batch_size or (BATCH_SIZE if on_gpu else 16),
        device=dev,
    )
    n = len(data.classes)
    torch.manual_seed(0)
    result = training_speed.compare(
        lambda: random_inception(n, aux_logits=False),
        data.train_loader,
        dev,
        steps=20 if on_gpu else 3,
        warmup=5 if on_gpu else 1,
        repeats=5 if on_gpu else 3,
    )
    result.batch_size = data.train_loader.batch_size
    result.image_size = data.image_size
    return result
