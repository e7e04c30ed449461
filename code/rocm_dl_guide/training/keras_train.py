"""The Keras (TensorFlow) runner of the guide's TensorFlow case studies.

:func:`fit_keras` wraps ``model.fit`` with what every page needs: a compact
tqdm progress bar instead of Keras' per-step console output (noisy in an
executed notebook), the history as a pandas DataFrame, the wall time, and which
device TensorFlow trained on. :func:`tensorflow_devices` says what TensorFlow
sees and whether it is a ROCm build.

TensorFlow is imported lazily, inside the functions, through
:func:`rocm_dl_guide.core.device.import_tensorflow` (quietly, with
``TF_CPP_MIN_LOG_LEVEL=2`` set first unless already set), so importing this
module costs nothing and does not load TensorFlow.

:func:`rocm_dl_guide.core.plots.plot_history` is framework-free and also draws
:meth:`rocm_dl_guide.training.train.TrainResult.plot`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.core.device import import_tensorflow

if TYPE_CHECKING:  # pragma: no cover
    import pandas

HISTORY_COLUMNS = ("epoch", "loss", "accuracy", "val_loss", "val_accuracy")
"""Columns every :attr:`KerasResult.history` has (NaN where not computed)."""


# --------------------------------------------------------------------------- plotting


def tensorflow_devices() -> dict[str, Any]:
    """What TensorFlow sees: ``{"gpus": [...], "built_with_rocm": bool,
    "built_with_cuda": bool, "version": str}`` (``gpus`` holds physical device names)."""
    tf = import_tensorflow()
    try:
        gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    except Exception:  # a broken driver stack must not crash a page
        gpus = []
    return {
        "gpus": gpus,
        "built_with_rocm": bool(tf.test.is_built_with_rocm()),
        "built_with_cuda": bool(tf.test.is_built_with_cuda()),
        "version": str(tf.__version__),
    }


def _pick_device(tf) -> str:
    try:
        gpus = tf.config.list_logical_devices("GPU")
    except Exception:
        gpus = []
    return "/GPU:0" if gpus else "CPU"


# --------------------------------------------------------------------------- fit


@dataclass
class KerasResult:
    """What :func:`fit_keras` returns."""

    history: pandas.DataFrame
    """One row per epoch: ``epoch`` (1-based), ``loss``, ``accuracy``, ``val_loss``,
    ``val_accuracy`` (NaN where not computed), then any other metrics Keras logged."""
    seconds: float
    """Wall time of ``model.fit``."""
    device: str
    """Where TensorFlow trained: ``"/GPU:0"`` or ``"CPU"``."""

    @property
    def final(self) -> dict[str, float]:
        """The last epoch's row as a dict (empty for an empty history)."""
        if self.history.empty:
            return {}
        row = self.history.iloc[-1]
        return {k: int(v) if k == "epoch" else float(v) for k, v in row.items()}

    def plot(self, ax=None, title: str | None = None):
        """Plot loss and accuracy per epoch; returns the matplotlib Figure."""
        from rocm_dl_guide.core.plots import plot_history

        return plot_history(self.history, ax=ax, title=title)


def _progress_callback(keras, epochs: int):
    """A Keras callback showing one tqdm bar over the epochs, metrics in its postfix."""
    from tqdm import tqdm

    class TqdmEpochs(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.bar = None

        def on_train_begin(self, logs=None):
            self.bar = tqdm(total=epochs, desc="fit", unit="epoch", dynamic_ncols=True)

        def on_epoch_end(self, epoch, logs=None):
            logs = logs or {}
            shown = ("loss", "accuracy", "val_loss", "val_accuracy")
            self.bar.set_postfix(
                {k: f"{float(logs[k]):.4f}" for k in shown if k in logs}, refresh=False
            )
            self.bar.update(1)

        def on_train_end(self, logs=None):
            if self.bar is not None:
                self.bar.close()

    return TqdmEpochs()


def _history_frame(history) -> pandas.DataFrame:
    import pandas as pd

    logs = dict(history.history)
    n = len(history.epoch)
    data: dict[str, Any] = {"epoch": [e + 1 for e in history.epoch]}
    for col in HISTORY_COLUMNS[1:]:
        data[col] = [float(v) for v in logs.pop(col, [float("nan")] * n)]
    for col, values in logs.items():
        data[col] = [float(v) for v in values]
    return pd.DataFrame(data)


def fit_keras(
    model,
    x_train,
    y_train=None,
    *,
    epochs: int,
    batch_size: int | None = None,
    validation_data=None,
    validation_split: float | None = None,
    progress: bool = True,
    callbacks: Sequence[Any] = (),
    optimizer: Any = None,
    loss: Any = None,
    metrics: Sequence[Any] | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    device: str | None = None,
    log=print,
    data_tag: str = "",
) -> KerasResult:
    """Train a Keras model with ``model.fit`` and return a :class:`KerasResult`.

    - ``x_train``/``y_train``: arrays (with ``batch_size`` and ``shuffle``), or a
      batched ``tf.data.Dataset`` as ``x_train`` with ``y_train=None``.
    - The model is compiled here if it is not yet, or if ``optimizer`` or
      ``loss`` is given: defaults ``"adam"``, ``"sparse_categorical_crossentropy"``
      and ``metrics=["accuracy"]``.
    - ``progress``: one tqdm bar over the epochs with loss/accuracy in its
      postfix; Keras itself always runs with ``verbose=0``.
    - ``seed``: ``keras.utils.set_random_seed(seed)`` first, for repeatable runs.
    - ``device``: a TensorFlow device string; default ``"/GPU:0"`` when TensorFlow
      sees a GPU, else the CPU.
    - ``log``: one summary line at the end (``None`` silences it), ending with
      ``data_tag`` in brackets where the data are a stand-in
      (:func:`rocm_dl_guide.core.datasets.stand_in`).
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    tf = import_tensorflow()
    keras = tf.keras
    if seed is not None:
        keras.utils.set_random_seed(seed)
    compiled = bool(getattr(model, "compiled", False))
    compiled = compiled and getattr(model, "optimizer", None) is not None
    if not compiled or optimizer is not None or loss is not None:
        model.compile(
            optimizer=optimizer if optimizer is not None else "adam",
            loss=loss if loss is not None else "sparse_categorical_crossentropy",
            metrics=list(metrics) if metrics is not None else ["accuracy"],
        )
    device = device or _pick_device(tf)
    cbs = list(callbacks)
    from rocm_dl_guide.core.progress import enabled as _bars

    if _bars(progress):
        cbs.append(_progress_callback(keras, epochs))
    kwargs: dict[str, Any] = {
        "epochs": epochs,
        "validation_data": validation_data,
        "callbacks": cbs,
        "verbose": 0,
    }
    if y_train is not None:  # arrays; a tf.data.Dataset brings its own batching and order
        kwargs["batch_size"] = batch_size
        kwargs["shuffle"] = shuffle
    else:
        kwargs["shuffle"] = False  # Keras warns that it ignores shuffle=True for datasets
    if validation_split:
        kwargs["validation_split"] = validation_split
    start = time.perf_counter()
    with tf.device(device):
        hist = model.fit(x_train, y_train, **kwargs)
    seconds = time.perf_counter() - start
    result = KerasResult(history=_history_frame(hist), seconds=seconds, device=device)
    if log is not None and not result.history.empty:
        last = result.history.iloc[-1]
        parts = [f"{k} {last[k]:.4f}" for k in HISTORY_COLUMNS[1:] if last[k] == last[k]]
        tag = f" [{data_tag}]" if data_tag else ""
        log(f"{len(result.history)} epochs in {seconds:.1f} s on {device}: {', '.join(parts)}{tag}")
    return result
