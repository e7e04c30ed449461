"""The training chapter's TensorFlow image case study: clothing images of Fashion-MNIST.

A fully connected Keras network (flatten, one hidden layer of 128 units, ten
logits) learns the ten Fashion-MNIST classes. The images are loaded through
``keras.datasets.fashion_mnist``, pointed by the data layer at the real files
or at the offline fixture (:func:`load_data`). The figures of the page are
functions here: the first image with its colour bar (:func:`show_image`), the
labelled sample grid (:func:`sample_grid`) and the prediction plots, one test
image with its class probabilities (:func:`plot_prediction`), a batch of test
images (:func:`plot_predictions`) and a single image's probabilities by class
name (:func:`plot_probabilities`).

``python -m rocm_dl_guide train fashion-mnist`` runs :func:`train`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rocm_dl_guide.core import dataset_registry, datasets, loaders, profiles
from rocm_dl_guide.core.runs import ClassifierRun

CLASS_NAMES: tuple[str, ...] = dataset_registry.FASHION_MNIST_CLASSES
"""Label ``i`` is ``CLASS_NAMES[i]``; the data set itself stores only the numbers."""
FULL_EPOCHS = 10
"""The guide's number of epochs (the ``full`` profile)."""
BATCH_SIZE = 32
"""Keras' default batch size, which the guide relies on."""
RECIPE = {
    "case study": "Fashion-MNIST (Keras)",
    "optimizer": "Adam (Keras default rate)",
    "batch size": BATCH_SIZE,
    "learning rate": 0.001,
    "momentum": None,
    "weight decay": None,
    "schedule": "constant",
    "epochs": FULL_EPOCHS,
    "input": "28x28 grey",
}
"""The ``full`` profile's settings: the guide's ``fit(..., epochs=10)`` with Keras's
defaults (batch 32; Adam's learning rate 0.001)."""

_CORRECT, _WRONG, _OTHER = "tab:blue", "tab:red", "#777777"


def _keras():
    from rocm_dl_guide.core.device import import_tensorflow

    import_tensorflow()
    import keras

    return keras


# --------------------------------------------------------------------------- data


def load_data(
    profile: profiles.Profile,
    system_copies: bool = True,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], datasets.PreparedData]:
    """``((train_images, train_labels), (test_images, test_labels), prepared)``.

    The arrays come from ``keras.datasets.fashion_mnist.load_data()`` (uint8
    images of 28x28 pixels, labels 0-9); the data layer decides what it reads,
    the real files or the fixture, and ``prepared.note`` says which
    (``system_copies``: see :func:`rocm_dl_guide.core.datasets.prepare`).
    """
    prepared = datasets.prepare("fashion-mnist", profile, system_copies)
    home = loaders.keras_home_for_fashion_mnist(profile, system_copies)
    keras = _keras()
    with loaders.use_keras_home(home):
        train, test = keras.datasets.fashion_mnist.load_data()
    return train, test, prepared


def class_counts(train_labels, test_labels):
    """A table with one row per class: its label, name and number of training and test images."""
    import pandas as pd

    n = len(CLASS_NAMES)
    return pd.DataFrame(
        {
            "label": range(n),
            "class": CLASS_NAMES,
            "train images": np.bincount(np.asarray(train_labels), minlength=n),
            "test images": np.bincount(np.asarray(test_labels), minlength=n),
        }
    ).set_index("label")


# --------------------------------------------------------------------------- model


def build_model():
    """The guide's network: flatten the 28x28 image, 128 ReLU units, 10 logits."""
    keras = _keras()
    return keras.Sequential(
        [
            keras.Input(shape=(28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ],
        name="fashion_mnist",
    )


def compile_model(model):
    """Adam, cross-entropy on the logits, accuracy as the metric (as in the guide)."""
    keras = _keras()
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def probability_model(model):
    """``model`` followed by a softmax: its outputs are class probabilities that sum to 1."""
    keras = _keras()
    return keras.Sequential([model, keras.layers.Softmax()], name="fashion_mnist_probabilities")


def epochs_for(profile: profiles.Profile, override: int | None = None) -> int:
    """The number of epochs: ``override``, else the guide's 10 capped by the profile."""
    return profile.epochs(FULL_EPOCHS, override, example="fashion-mnist")


# --------------------------------------------------------------------------- figures


def show_image(image, title: str | None = None):
    """One image with a colour bar of its pixel values; returns the Figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    shown = ax.imshow(np.asarray(image))
    fig.colorbar(shown, ax=ax)
    ax.grid(False)
    if title:
        ax.set_title(title)
    return fig


def sample_grid(images, labels, n: int = 25, ncols: int = 5):
    """The first ``n`` images in a grid, each with its class name; returns the Figure."""
    from rocm_dl_guide.core.plots import image_grid

    return image_grid(
        np.asarray(images)[:n], np.asarray(labels)[:n], CLASS_NAMES, ncols=ncols, cmap="binary"
    )


def _draw_image(ax, probabilities, true_label: int, image) -> None:
    """The image, captioned "predicted class, its probability (true class)"."""
    predicted = int(np.argmax(probabilities))
    ax.imshow(np.asarray(image), cmap="binary")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    ax.set_xlabel(
        f"{CLASS_NAMES[predicted]} {100 * float(np.max(probabilities)):.0f}% "
        f"({CLASS_NAMES[true_label]})",
        color=_CORRECT if predicted == true_label else _WRONG,
        fontsize=9,
    )


def _draw_probabilities(ax, probabilities, true_label: int | None, names: bool = False) -> None:
    """A bar per class: the true class blue, a wrong prediction red, the others grey."""
    probabilities = np.asarray(probabilities)
    bars = ax.bar(range(len(probabilities)), probabilities, color=_OTHER)
    predicted = int(np.argmax(probabilities))
    bars[predicted].set_color(_WRONG)
    if true_label is not None:
        bars[true_label].set_color(_CORRECT)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.grid(False)
    ax.set_xticks(range(len(probabilities)))
    if names:
        ax.set_xticklabels(CLASS_NAMES, rotation=45, ha="right")


def plot_prediction(i: int, predictions, labels, images):
    """Test image ``i`` next to its ten class probabilities; returns the Figure.

    The caption is blue when the prediction is right and red when it is wrong;
    in the bar chart the true class is blue and a wrong prediction red.
    """
    import matplotlib.pyplot as plt

    fig, (ax_img, ax_bar) = plt.subplots(1, 2, figsize=(6, 3), constrained_layout=True)
    label = int(np.asarray(labels)[i])
    _draw_image(ax_img, predictions[i], label, np.asarray(images)[i])
    _draw_probabilities(ax_bar, predictions[i], label)
    return fig


def plot_predictions(predictions, labels, images, rows: int = 5, cols: int = 3):
    """The first ``rows * cols`` test images, each beside its probabilities; returns the Figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, 2 * cols, figsize=(4 * cols, 2 * rows), constrained_layout=True)
    axes = np.atleast_2d(axes)
    labels, images = np.asarray(labels), np.asarray(images)
    for k in range(rows * cols):
        ax_img, ax_bar = axes[k // cols, 2 * (k % cols)], axes[k // cols, 2 * (k % cols) + 1]
        if k >= len(predictions):
            ax_img.axis("off")
            ax_bar.axis("off")
            continue
        _draw_image(ax_img, predictions[k], int(labels[k]), images[k])
        _draw_probabilities(ax_bar, predictions[k], int(labels[k]))
    return fig


def plot_probabilities(probabilities, true_label: int | None = None):
    """One image's class probabilities as bars labelled with the class names; returns the Figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), constrained_layout=True)
    _draw_probabilities(ax, probabilities, true_label, names=True)
    ax.set_yticks([0, 0.5, 1])
    ax.set_ylabel("probability")
    return fig


# --------------------------------------------------------------------------- the case study


@dataclass
class FashionMnistRun(ClassifierRun):
    """What :func:`train` returns: the MNIST run's fields, plus the trained models."""

    model: object = None
    """The trained network (outputs logits)."""
    probabilities: object = None
    """:func:`probability_model` of ``model``."""


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    progress: bool = True,
    seed: int = 1,
) -> FashionMnistRun:
    """The whole case study: load, scale, build, train, evaluate on the test set."""
    from rocm_dl_guide.training import keras_train

    n_epochs = profile.epochs(FULL_EPOCHS, epochs, example="fashion-mnist")
    (train_images, train_labels), (test_images, test_labels), data = load_data(profile)
    train_images, test_images = train_images / 255.0, test_images / 255.0
    keras = _keras()
    keras.utils.set_random_seed(seed)
    model = compile_model(build_model())
    result = keras_train.fit_keras(
        model,
        train_images,
        train_labels,
        epochs=n_epochs,
        batch_size=BATCH_SIZE,
        progress=progress,
        log=None,
    )
    test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=0)
    return FashionMnistRun(
        framework="Keras",
        dataset="Fashion-MNIST",
        test_accuracy=float(test_acc),
        test_loss=float(test_loss),
        epochs=n_epochs,
        device=result.device,
        profile=profile.name,
        data=data,
        result=result,
        model=model,
        probabilities=probability_model(model),
    )
