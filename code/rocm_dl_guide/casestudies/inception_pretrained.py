"""Inception v3 with its pretrained ImageNet weights: the training chapter's first case study.

:func:`load_pretrained` builds torchvision's Inception v3 through the weights
API (``Inception_V3_Weights.IMAGENET1K_V1``, which also carries the 1,000
ImageNet category names), :func:`preprocess` applies the guide's preprocessing
and :func:`classify` returns the top-5 classes of a photo (:func:`open_image`,
:func:`sample_photo`). With the ``fixtures`` data source the model keeps random
weights (:func:`random_inception`) and :attr:`LoadedModel.note` says so; with
``real`` weights that cannot be downloaded are an error, never a silent switch
to random ones. The fine-tuning case study (:mod:`.inception`) and the
optimisation chapter start from this model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_dl_guide.core import datasets, profiles

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import torch
    from PIL import Image
    from torch import nn

# ImageNet statistics used by every torchvision classifier's preprocessing.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
EVAL_SIZE = 299
"""The guide resizes the photo's short side to 299 and crops the centre 299x299."""
MIN_SIZE = 75
"""The smallest input Inception v3 accepts."""

SAMPLE_PHOTO = "grace_hopper.jpg"
"""A real photograph that ships with matplotlib (US Navy portrait of Grace Hopper,
public domain); ImageNet's category for it is "military uniform"."""
SAMPLE_PHOTO_CLASS = "military uniform"


class ImageError(ValueError):
    """A file that is not a readable image."""


def weights_enum():
    """torchvision's ``Inception_V3_Weights.IMAGENET1K_V1``."""
    from torchvision.models import Inception_V3_Weights

    return Inception_V3_Weights.IMAGENET1K_V1


def categories() -> list[str]:
    """The 1,000 ImageNet category names, carried by the weights' metadata (no download)."""
    return list(weights_enum().meta["categories"])


RANDOM_CAVEAT = "random weights: the name means nothing"
"""What follows a class named from random weights, on the same line."""


def class_name(index: int, pretrained: bool) -> str:
    """How a page names ImageNet class ``index``: ``"478 carton"`` from pretrained
    weights, with :data:`RANDOM_CAVEAT` after it from random weights (one rule
    for the Python, C++ and MIGraphX pages)."""
    name = f"{index} {categories()[index]}"
    return name if pretrained else f"{name} ({RANDOM_CAVEAT})"


def top5_table(frame, pretrained: bool):
    """A top-5 frame (``category``, ``probability``) as a page shows it; from
    random weights every name carries :data:`RANDOM_CAVEAT`, as
    :func:`class_name` writes it."""
    from rocm_dl_guide.core import tables

    caption = "Top-5 classes" if pretrained else "Top-5 classes, from random weights"
    shown = frame[[c for c in ("rank", "category", "probability") if c in frame.columns]]
    if not pretrained and "category" in shown.columns:
        shown = shown.assign(category=[f"{name} ({RANDOM_CAVEAT})" for name in shown["category"]])
    return tables.show(shown, caption=caption, formats={"probability": "{:.2%}"})


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


def load_pretrained(profile: profiles.Profile, pretrained: bool | None = None) -> LoadedModel:
    """Inception v3 with ImageNet weights from torchvision's weights API, in eval mode.

    ``pretrained`` defaults to the profile's data source (``real``: pretrained,
    ``fixtures``: random weights). The weights are downloaded once into torch's
    hub cache (``$TORCH_HOME``) and their hash is checked. If they cannot be
    downloaded, :class:`~rocm_dl_guide.core.datasets.DataUnavailableError` says so
    and what to do instead: there is no silent fallback to random weights.
    """
    want = profile.pretrained if pretrained is None else pretrained
    weights = weights_enum()
    cats = categories()
    if want:
        from torchvision.models import inception_v3

        try:
            model = inception_v3(weights=weights)
        except Exception as exc:
            if not datasets.is_network_error(exc):
                raise
            raise datasets.DataUnavailableError(weights_advice(weights, exc)) from None
        acc = weights.meta["_metrics"]["ImageNet-1K"]["acc@1"]
        note = f"pretrained weights {weights} (ImageNet-1k top-1 accuracy {acc}%)"
        return LoadedModel(model.eval(), True, note, cats)
    note = (
        f"random weights from the {profile.data_source} data source: they time like trained "
        f"ones, but the classes they predict mean nothing; {profiles.DATA_SOURCE_VAR}=real "
        "loads the trained weights"
    )
    return LoadedModel(random_inception().eval(), False, note, cats)


def weights_advice(weights, exc: BaseException) -> str:
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
