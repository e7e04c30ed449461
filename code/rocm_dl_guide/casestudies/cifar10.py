"""The training chapter's custom CNN on CIFAR-10 (PyTorch).

The guide's network is the classic small LeNet-style CNN: two 5x5 convolutions
with max pooling, then three fully connected layers. The guide's listing never
defines ``fc1`` (it defines an unused ``conv3`` instead), so its ``forward``
fails; :class:`Net` is the network the listing meant. Training uses the shared
loop :func:`rocm_dl_guide.training.train.fit`, with the guide's hyperparameters: batch
size 4, SGD with learning rate 0.001 and momentum 0.9, two epochs.

The data comes from the data layer: real CIFAR-10 when it can be had, the
generated fixture (same pickled batches, far fewer images) otherwise. The
fixture is small enough that every profile trains on whole epochs of it; the
profile's per-epoch batch cap is meant for the large models.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn import functional as F

from rocm_dl_guide.core import datasets, files, loaders, profiles
from rocm_dl_guide.core.messages import count

if TYPE_CHECKING:  # pragma: no cover
    import pandas

# The guide's hyperparameters.
BATCH_SIZE = 4
LEARNING_RATE = 0.001
MOMENTUM = 0.9
FULL_EPOCHS = 2
TEST_BATCH_SIZE = 100
RECIPE = {
    "case study": "CIFAR-10 CNN (PyTorch)",
    "optimizer": "SGD",
    "batch size": BATCH_SIZE,
    "learning rate": LEARNING_RATE,
    "momentum": MOMENTUM,
    "weight decay": None,
    "schedule": "constant",
    "epochs": FULL_EPOCHS,
    "input": "32x32 colour",
}
"""The ``full`` profile's settings, which are the guide's."""
# Each channel is mapped from [0, 1] to [-1, 1].
MEAN = (0.5, 0.5, 0.5)
STD = (0.5, 0.5, 0.5)


class Net(nn.Module):
    """The guide's CIFAR-10 network, corrected: 3x32x32 in, 10 logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)  # 6 x 28 x 28
        self.pool = nn.MaxPool2d(2, 2)  # halves height and width
        self.conv2 = nn.Conv2d(6, 16, 5)  # 16 x 10 x 10
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # all dimensions except the batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def transform():
    """The guide's preprocessing: to a float tensor in [0, 1], then normalise to [-1, 1]."""
    from torchvision.transforms import v2

    return v2.Compose(
        [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    )


def unnormalize(images: torch.Tensor) -> torch.Tensor:
    """Undo :func:`transform`'s normalisation (for showing images): back to [0, 1]."""
    return (images * 0.5 + 0.5).clamp(0, 1)


@dataclass
class CifarData:
    """The CIFAR-10 data ready for training: sets, loaders and class names."""

    train_set: Any
    test_set: Any
    train_loader: Any
    test_loader: Any
    classes: list[str]
    prepared: datasets.PreparedData


def load(
    profile: profiles.Profile,
    batch_size: int = BATCH_SIZE,
    seed: int = 0,
    device: torch.device | None = None,
    on_device: bool | None = None,
) -> CifarData:
    """The train and test sets through torchvision's ``CIFAR10`` loader, and their loaders.

    The training loader reshuffles every epoch from a generator seeded with
    ``seed`` (its state is saved in checkpoints, so a resumed run sees the same
    order). With ``on_device`` it is a
    :class:`~rocm_dl_guide.core.device_data.DeviceLoader`: the whole training
    set on ``device``, batches gathered and normalised there as :func:`transform`
    does, since a DataLoader cannot feed this small network fast enough on a
    GPU. The default (``None``) is on for a GPU in a one-process run and off on
    the CPU, where the DataLoader is as fast, and under torchrun, whose loop
    shards a DataLoader. The test loader is always a DataLoader; on a GPU
    DataLoaders use two workers and pinned memory.
    """
    from torch.utils.data import DataLoader

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core import distributed
    from rocm_dl_guide.core.device_data import DeviceLoader

    prepared = datasets.prepare("cifar10", profile=profile)
    tf = transform()
    train_set = loaders.cifar10_dataset(prepared.root, train=True, transform=tf)
    test_set = loaders.cifar10_dataset(prepared.root, train=False, transform=tf)
    dev = device if device is not None else devices.pick()
    if on_device is None:
        on_device = dev.type == "cuda" and distributed.env_world_size() == 1
    extra = {"num_workers": 2, "pin_memory": True} if dev.type == "cuda" else {}
    if on_device:
        # transform() has no augmentation, so the device loader applies none either.
        train_loader = DeviceLoader.from_dataset(
            train_set, batch_size, dev, MEAN, STD, shuffle=True, seed=seed
        )
    else:
        generator = torch.Generator().manual_seed(seed)
        train_loader = DataLoader(
            train_set, batch_size=batch_size, shuffle=True, generator=generator, **extra
        )
    test_loader = DataLoader(test_set, batch_size=TEST_BATCH_SIZE, shuffle=False, **extra)
    return CifarData(
        train_set, test_set, train_loader, test_loader, list(train_set.classes), prepared
    )


def sample_batch(data: CifarData, n: int = 8, seed: int = 0):
    """``n`` training images (unnormalised, N x 3 x 32 x 32 in [0, 1]) and their labels."""

    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(data.train_set), generator=g)[:n].tolist()
    images = torch.stack([data.train_set[i][0] for i in idx])
    labels = torch.tensor([int(data.train_set[i][1]) for i in idx])
    return unnormalize(images), labels


def plot_samples(data: CifarData, n: int = 8, seed: int = 0):
    """A grid of ``n`` training images with their class names; returns the Figure."""
    from rocm_dl_guide.core.plots import image_grid

    images, labels = sample_batch(data, n, seed)
    return image_grid(
        images.numpy(),
        labels.numpy(),
        data.classes,
        ncols=min(n, 8),
        title=f"CIFAR-10 training images ({data.prepared.kind} data)",
    )


def predict(model: nn.Module, loader, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(predicted, labels)`` over the whole ``loader``, in order."""

    from rocm_dl_guide.core import device as devices

    dev = torch.device(device) if device is not None else devices.pick()
    model = model.to(dev)
    was_training = model.training
    model.eval()
    preds, labels = [], []
    try:
        with torch.inference_mode():
            for x, y in loader:
                preds.append(model(x.to(dev)).argmax(dim=1).cpu())
                labels.append(y)
    finally:
        model.train(was_training)
    return torch.cat(preds), torch.cat(labels)


@dataclass
class ClassAccuracy:
    """Test accuracy per class, as :func:`per_class_accuracy` measures it."""

    frame: pandas.DataFrame
    """One row per class: ``class``, ``correct``, ``total``, ``accuracy``."""
    overall: float
    """Accuracy over all images."""

    def best(self) -> str:
        """The class with the highest accuracy (the first of a tie)."""
        return str(self.frame.loc[self.frame["accuracy"].idxmax(), "class"])

    def worst(self) -> str:
        """The class with the lowest accuracy (the first of a tie)."""
        return str(self.frame.loc[self.frame["accuracy"].idxmin(), "class"])

    def plot(self, title: str | None = None):
        """A horizontal bar per class, a line at chance and one at the overall accuracy."""
        import matplotlib.pyplot as plt

        frame = self.frame
        fig, ax = plt.subplots(figsize=(6.5, 0.32 * len(frame) + 1.6), layout="constrained")
        ax.barh(frame["class"], 100 * frame["accuracy"], color="#4c72b0")
        chance = 100 / len(frame)
        ax.axvline(
            chance, color="grey", linestyle="--", linewidth=1, label=f"chance ({chance:.0f}%)"
        )
        ax.axvline(
            100 * self.overall,
            color="#c44e52",
            linewidth=1,
            label=f"all classes ({100 * self.overall:.1f}%)",
        )
        ax.set_xlim(0, 100)
        ax.invert_yaxis()
        ax.set_xlabel("test accuracy (%)")
        ax.set_title(title or "Accuracy per class")
        # The lines' legend goes below the axes, where no bar can hide it.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        return fig


def per_class_accuracy(model: nn.Module, loader, classes: list[str], device=None) -> ClassAccuracy:
    """Accuracy for each class, and over all images, of ``model`` on ``loader``."""
    import pandas as pd

    pred, labels = predict(model, loader, device)
    n = len(classes)
    total = torch.bincount(labels, minlength=n)
    correct = torch.bincount(labels[pred == labels], minlength=n)
    frame = pd.DataFrame({"class": classes, "correct": correct.tolist(), "total": total.tolist()})
    frame["accuracy"] = frame["correct"] / frame["total"].where(frame["total"] > 0)
    overall = float((pred == labels).float().mean()) if len(labels) else 0.0
    return ClassAccuracy(frame, overall)


@dataclass
class CifarRun:
    """What :func:`train` returns."""

    model: Any
    data: CifarData
    result: Any
    """The :class:`rocm_dl_guide.training.train.TrainResult`."""
    per_class: ClassAccuracy
    test_accuracy: float
    epochs: int
    device: str
    profile: str
    weights: Path | None
    """Where the trained weights were saved (``checkpoint_dir/cifar_net.pt``), if anywhere."""

    def summary(self) -> str:
        saved = f"; weights saved to {files.shown(self.weights)}" if self.weights else ""
        return (
            f"CIFAR-10 CNN: test accuracy {100 * self.test_accuracy:.1f}% (chance 10%) after "
            f"{count(self.epochs, 'epoch')} on {self.device}; profile {self.profile}; "
            f"data: {self.data.prepared.note}{saved}"
        )

    def plot(self, ax=None):
        return self.result.plot(ax=ax, title=f"CIFAR-10 CNN ({self.data.prepared.kind} data)")


def training_workload(profile: profiles.Profile, device=None):
    """What ``selfcheck`` times: the network and its training loader
    (a :class:`rocm_dl_guide.training.training_speed.Workload`)."""
    from rocm_dl_guide.training.training_speed import Workload

    def loaders(on_device: bool):
        return lambda batch: load(profile, batch, device=device, on_device=on_device).train_loader

    return Workload(
        Net,
        load(profile, device=device).train_loader,
        loaders={
            "DeviceLoader, the data set on the device": loaders(True),
            "DataLoader, 2 workers, pinned memory": loaders(False),
        },
    )


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    amp: bool = False,
    channels_last: bool = False,
    fsdp: bool = False,
    seed: int = 0,
    log=print,
) -> CifarRun:
    """Train the guide's CIFAR-10 network with the shared loop; evaluate it per class.

    With ``checkpoint_dir`` the loop checkpoints every epoch there (``resume``
    continues from the last checkpoint; ``checkpoint_every`` adds checkpoints
    every N steps inside the epochs) and the trained weights are saved as
    ``cifar_net.pt`` next to the checkpoints. ``log`` gets the loop's line per
    epoch (``None``: no lines).
    """

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train as loop

    n_epochs = profile.epochs(FULL_EPOCHS, epochs, example="cifar10")
    dev = devices.pick()
    data = load(profile, seed=seed, device=dev)
    torch.manual_seed(seed)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    result = loop.fit(
        model,
        data.train_loader,
        epochs=n_epochs,
        optimizer=optimizer,
        val_loader=data.test_loader,
        device=dev,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        checkpoint_every=checkpoint_every,
        amp=amp,
        channels_last=channels_last,
        data_tag=datasets.stand_in(data.prepared),
        fsdp=fsdp,
        progress=progress,
        log=log,
        final_weights="cifar_net.pt",
    )
    per_class = per_class_accuracy(model, data.test_loader, data.classes, dev)
    return CifarRun(
        model=model,
        data=data,
        result=result,
        per_class=per_class,
        test_accuracy=per_class.overall,
        epochs=n_epochs,
        device=str(devices.describe()),
        profile=profile.name,
        weights=result.weights,
    )
