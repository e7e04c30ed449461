"""The frameworks chapter's first training runs: MNIST with PyTorch and with Keras.

Both read the same IDX files through the data layer (real MNIST when it can be
had, the offline fixture otherwise) and report which one they used.
"""

from __future__ import annotations

from pathlib import Path

from rocm_dl_guide.core import datasets, loaders, profiles
from rocm_dl_guide.core.runs import ClassifierRun

# The guide's hyperparameters (PyTorch's MNIST example): batch 64, Adadelta with
# lr 1.0 decayed by gamma 0.7 each epoch, 14 epochs in the full profile.
FULL_EPOCHS_TORCH = 14
FULL_EPOCHS_KERAS = 5
BATCH_SIZE = 64
TEST_BATCH_SIZE = 1000
LEARNING_RATE = 1.0
LR_GAMMA = 0.7

RECIPE = {
    "case study": "MNIST (PyTorch)",
    "optimizer": "Adadelta",
    "batch size": BATCH_SIZE,
    "learning rate": LEARNING_RATE,
    "momentum": None,
    "weight decay": None,
    "schedule": f"StepLR: x{LR_GAMMA} every epoch",
    "epochs": FULL_EPOCHS_TORCH,
    "input": "28x28 grey",
}
"""The ``full`` profile's settings (PyTorch's MNIST example, which the guide runs)."""


def mnist_cnn():
    """The classic MNIST network: two convolutions, max pooling, dropout, two dense layers."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(128, 10),
    )


class MnistRun(ClassifierRun):
    """What :func:`train_pytorch` and :func:`train_keras` return."""


def torch_loaders(profile: profiles.Profile, device=None, on_device: bool | None = None):
    """``(train_loader, test_loader, prepared)``: torchvision's ``MNIST`` over the
    data the profile's source gives, normalised as in the upstream example; on a
    GPU with two loader workers and pinned memory. With ``on_device`` the training
    loader is a :class:`~rocm_dl_guide.core.device_data.DeviceLoader` (the whole
    set on the device, normalised there the same way); by default it is on for a
    GPU in a one-process run, where a DataLoader cannot feed this small network
    fast enough, and off on the CPU and under torchrun."""
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets as tv_datasets
    from torchvision import transforms

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core import distributed
    from rocm_dl_guide.core.device_data import DeviceLoader

    data = datasets.prepare("mnist", profile=profile)
    # The mean and standard deviation of the MNIST training images, as in the
    # upstream example.
    mean, std = (0.1307,), (0.3081,)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize(mean, std)])
    train_set = tv_datasets.MNIST(data.root, train=True, download=False, transform=tf)
    test_set = tv_datasets.MNIST(data.root, train=False, download=False, transform=tf)
    dev = torch.device(device) if device is not None else devices.pick()
    if on_device is None:
        on_device = dev.type == "cuda" and distributed.env_world_size() == 1
    loader_kw = {"num_workers": 2, "pin_memory": True} if dev.type == "cuda" else {}
    if on_device:
        train_loader = DeviceLoader.from_dataset(train_set, BATCH_SIZE, dev, mean, std)
    else:
        train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, **loader_kw)
    test_loader = DataLoader(test_set, batch_size=TEST_BATCH_SIZE, **loader_kw)
    return train_loader, test_loader, data


def training_workload(profile: profiles.Profile, device=None):
    """What ``selfcheck`` times: the CNN and its training loader
    (a :class:`rocm_dl_guide.training.training_speed.Workload`)."""
    from rocm_dl_guide.training.training_speed import Workload

    return Workload(mnist_cnn, torch_loaders(profile, device)[0])


def train_pytorch(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    seed: int = 1,
    fsdp: bool = False,
) -> MnistRun:
    """Train the MNIST CNN with the shared training loop and evaluate it on the test set.

    ``fsdp``: shard the model with FSDP2 (only when started by torchrun);
    ``checkpoint_every``: also checkpoint every N steps inside the epochs."""
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train

    n_epochs = profile.epochs(FULL_EPOCHS_TORCH, epochs, example="mnist-pytorch")
    torch.manual_seed(seed)
    dev = devices.pick()
    train_loader, test_loader, data = torch_loaders(profile, dev)

    model = mnist_cnn()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=LEARNING_RATE)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=LR_GAMMA)
    result = train.fit(
        model,
        train_loader,
        epochs=n_epochs,
        optimizer=optimizer,
        scheduler=scheduler,
        val_loader=test_loader,
        device=dev,
        max_train_batches=profile.max_train_batches,
        checkpoint_dir=checkpoint_dir,
        data_tag=datasets.stand_in(data),
        resume=resume,
        checkpoint_every=checkpoint_every,
        progress=progress,
        fsdp=fsdp,
    )
    test_loss, test_acc = train.evaluate(model, test_loader, dev)
    return MnistRun(
        framework="PyTorch",
        test_accuracy=test_acc,
        test_loss=test_loss,
        epochs=n_epochs,
        device=str(devices.describe()),
        profile=profile.name,
        data=data,
        result=result,
    )


def keras_mlp():
    """A small fully connected Keras model for 28x28 digits."""
    from rocm_dl_guide.core.device import import_tensorflow

    import_tensorflow()
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=(28, 28)),
            keras.layers.Rescaling(1.0 / 255),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10),
        ]
    )


def train_keras(
    profile: profiles.Profile,
    epochs: int | None = None,
    progress: bool = True,
    seed: int = 1,
) -> MnistRun:
    """Train the Keras MNIST model on the same IDX files and evaluate it on the test set."""
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import keras_train

    n_epochs = profile.epochs(FULL_EPOCHS_KERAS, epochs, example="mnist-tensorflow")
    (x_train, y_train), (x_test, y_test), data = loaders.mnist_arrays("mnist", profile=profile)
    devices.import_tensorflow()
    import keras

    keras.utils.set_random_seed(seed)
    model = keras_mlp()
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    result = keras_train.fit_keras(
        model,
        x_train,
        y_train,
        epochs=n_epochs,
        batch_size=BATCH_SIZE,
        validation_data=(x_test, y_test),
        progress=progress,
        data_tag=datasets.stand_in(data),
    )
    test_loss, test_acc = model.evaluate(x_test, y_test, verbose=0)
    return MnistRun(
        framework="Keras",
        test_accuracy=float(test_acc),
        test_loss=float(test_loss),
        epochs=n_epochs,
        device=result.device,
        profile=profile.name,
        data=data,
        result=result,
    )
