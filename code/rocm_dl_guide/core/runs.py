"""Training runs: what a case study returns, its JSON record, and its folder.

:class:`ClassifierRun` is shared by the MNIST runs (:mod:`rocm_dl_guide.casestudies.mnist`)
and the Fashion-MNIST case study, so that neither case study imports the other.
:func:`run_record` is what ``train --json`` prints, for every case study;
:func:`runs_dir` is the folder a named run (or a page) writes into.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocm_dl_guide.core import files
from rocm_dl_guide.core.datasets import PreparedData, cache_dir
from rocm_dl_guide.core.messages import count


@dataclass
class ClassifierRun:
    """A trained classifier's test result, how it was trained and on what data."""

    framework: str
    test_accuracy: float
    test_loss: float
    epochs: int
    device: str
    profile: str
    data: PreparedData
    result: object
    """The framework's training result (``train.TrainResult`` or ``keras_train.KerasResult``)."""
    dataset: str = "MNIST"
    """The data set's name in the summary and plot title (also ``Fashion-MNIST``)."""

    def summary(self) -> str:
        return (
            f"{self.framework} {self.dataset}: test accuracy {100 * self.test_accuracy:.1f}% "
            f"(loss {self.test_loss:.3f}) after {count(self.epochs, 'epoch')} on {self.device}; "
            f"profile {self.profile}; data: {self.data.note}"
        )

    def plot(self, ax=None):
        title = f"{self.framework} {self.dataset} ({self.data.kind} data)"
        return self.result.plot(ax=ax, title=title)


def run_record(example: str, run: object, data_source: str | None = None) -> dict:
    """The facts of a finished training run as one JSON-ready dict.

    Keys: ``example``, ``world_size``, ``backend`` (the process group's, ``None``
    for one process), ``epochs_completed``, ``test_accuracy`` (the run's own,
    else its last validation accuracy), ``resumed_from_epoch`` (``None`` when it
    started from scratch), ``resumed_from_step`` (the global step it continued
    from, inside an epoch after a mid-epoch checkpoint; ``None`` from scratch),
    ``img_per_s`` (training throughput of the last epoch, summed over ranks;
    ``None`` where the framework does not report it),
    ``device``, ``profile``, ``data_source`` (``real`` or ``fixtures``, as the
    caller resolved it) and ``history``: one dict per epoch (:func:`epoch_history`).
    Works for every case study's run object.
    """
    result = getattr(run, "result", None)
    history = getattr(result, "history", None)
    torch_run = isinstance(history, list)  # train.TrainResult; Keras keeps a DataFrame
    final = history[-1] if torch_run and history else None
    accuracy = getattr(run, "test_accuracy", None)
    if accuracy is None and final is not None:
        accuracy = final.val_accuracy
    resumed = getattr(result, "resumed_from_epoch", 0) if torch_run else 0
    return {
        "example": example,
        "world_size": getattr(result, "world_size", 1),
        "backend": getattr(result, "backend", None),
        "epochs_completed": len(history) if history is not None else 0,
        "test_accuracy": None if accuracy is None else float(accuracy),
        "resumed_from_epoch": resumed or None,
        "resumed_from_step": (getattr(result, "resumed_from_step", 0) if torch_run else 0) or None,
        "img_per_s": final.images_per_second if final is not None else None,
        "device": getattr(run, "device", None),
        "profile": getattr(run, "profile", None),
        "data_source": data_source,
        "history": epoch_history(result),
        # a case study's own facts (the language models' perplexities, tokens/s)
        **(run.record_fields() if hasattr(run, "record_fields") else {}),
    }


HISTORY_KEYS = ("epoch", "train_loss", "train_accuracy", "val_loss", "val_accuracy")
"""The keys every epoch of :func:`epoch_history` has (PyTorch runs add
``images_per_second``, ``seconds`` and ``lr``)."""
_KERAS_NAMES = {"loss": "train_loss", "accuracy": "train_accuracy"}


def _plain(value: object) -> object:
    """A JSON-ready scalar: NaN becomes ``None``, NumPy numbers plain Python ones."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)) or hasattr(value, "item"):
        number = value.item() if hasattr(value, "item") else value
        return None if number != number else number
    return value


def epoch_history(result: object) -> list[dict[str, object]]:
    """A training result's history, one dict per epoch with :data:`HISTORY_KEYS`
    (``None`` where not measured), for PyTorch's ``train.TrainResult`` and Keras's
    ``keras_train.KerasResult`` alike; ``[]`` for anything else."""
    history = getattr(result, "history", None)
    if isinstance(history, list):
        rows = [dict(vars(m)) for m in history]
    elif hasattr(history, "to_dict"):
        rows = [
            {_KERAS_NAMES.get(k, k): v for k, v in row.items()}
            for row in history.to_dict(orient="records")
        ]
    else:
        return []
    out = []
    for row in rows:
        known = {k: _plain(row.get(k)) for k in HISTORY_KEYS}
        extra = {k: _plain(v) for k, v in row.items() if k not in known}
        known["epoch"] = int(known["epoch"]) if known["epoch"] is not None else None
        out.append(known | extra)
    return out


def runs_dir(name: str) -> Path:
    """A checkpoint directory for the example ``name``: ``$ROCM_DL_GUIDE_RUNS/name``,
    default ``<data cache>/runs/name``. One per example, reused by every run, so
    repeated builds overwrite rather than pile up checkpoints. A file system
    without room even for the folder raises :class:`files.DiskFullError`."""
    base = os.environ.get("ROCM_DL_GUIDE_RUNS")
    path = (Path(base).expanduser() if base else cache_dir() / "runs") / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        files.raise_if_disk_full(exc, path)
        raise
    return path


def _fmt(value: object, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def losses_text(epoch: dict[str, object]) -> str:
    """One epoch of :func:`epoch_history` as the training log prints it:
    ``train loss 0.6931 acc 0.5000 | val loss 0.6930 acc 0.5100``."""
    return (
        f"train loss {_fmt(epoch['train_loss'])} acc {_fmt(epoch['train_accuracy'])}"
        f" | val loss {_fmt(epoch['val_loss'])} acc {_fmt(epoch['val_accuracy'])}"
    )
