"""The one training loop of the guide's PyTorch case studies.

Every PyTorch page trains through :func:`fit`, so that all of them share the
same behaviour: the device from :func:`rocm_dl_guide.device.pick`, per-epoch
caps from the run profile, optional mixed precision (``amp``) and
``channels_last``, models with auxiliary heads (Inception v3), a compact tqdm
progress bar, and crash-safe checkpoints that a later run resumes from.

Checkpoints
    With ``checkpoint_dir``, :func:`fit` writes ``checkpoint_dir/last.pt`` at the
    end of every epoch: model, optimizer, scheduler and grad-scaler state, the
    epoch number, the full history and the RNG states (Python, NumPy, PyTorch,
    and the GPU's when training on one). The file is written atomically (a
    temporary file in the same directory, flushed and fsync'ed, then
    ``os.replace``), so a reader never sees half a checkpoint and a crash while
    saving leaves the previous one intact. ``best.pt`` holds the weights of the
    epoch with the best validation accuracy so far. ``resume=True`` continues
    from the last complete epoch; because the RNG states are restored, the
    resumed run draws the same shuffles and dropout masks as an uninterrupted
    one.

Mixed precision
    ``amp=True`` runs forward passes under :func:`torch.autocast`: bfloat16 on
    GPUs that support it (AMD Instinct MI200/MI300, NVIDIA Ampere and later),
    else float16 with a gradient scaler. On the CPU it uses bfloat16 autocast
    too, which is numerically sound but only faster on CPUs with native bf16
    (AVX512-BF16 / AMX); :func:`fit` says so in its log.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:  # pragma: no cover
    import pandas

CHECKPOINT_NAME = "last.pt"
"""File name of the checkpoint written at every epoch end."""
BEST_NAME = "best.pt"
"""File name of the weights of the best epoch by validation accuracy."""
_FORMAT = "rocm_dl_guide.checkpoint/1"
_REQUIRED_KEYS = ("format", "epoch", "model", "optimizer", "history", "rng")


class CheckpointError(RuntimeError):
    """A checkpoint or weights file that cannot be used (corrupt, truncated, foreign)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


@dataclass
class EpochMetrics:
    """One row of a training history."""

    epoch: int
    """1-based epoch number."""
    train_loss: float
    """Mean loss of the main output over this epoch's training batches."""
    train_accuracy: float | None
    """Accuracy over this epoch's training batches (``None`` if labels are not classes)."""
    val_loss: float | None
    val_accuracy: float | None
    images_per_second: float
    """Training throughput of this epoch: samples / wall time of the training pass."""
    seconds: float
    """Wall time of the whole epoch: training and validation."""
    lr: float
    """Learning rate of the first parameter group during the epoch's last step."""


@dataclass
class TrainResult:
    """What :func:`fit` returns."""

    history: list[EpochMetrics]
    device: str
    """``str(torch.device)`` trained on, e.g. ``"cuda"`` (a ROCm or CUDA GPU) or ``"cpu"``."""
    checkpoint: Path | None
    """``checkpoint_dir/last.pt`` when checkpointing, else ``None``."""
    resumed_from_epoch: int = 0
    """The epoch the run resumed after (``0`` when it started from scratch)."""
    weights: Path | None = None
    """The trained model's weights file (``checkpoint_dir/final_weights``), if saved."""

    @property
    def final(self) -> EpochMetrics | None:
        """The last epoch's metrics (``None`` for an empty history)."""
        return self.history[-1] if self.history else None

    def to_frame(self) -> pandas.DataFrame:
        """The history as a pandas DataFrame, one row per epoch."""
        import pandas as pd

        columns = [f.name for f in fields(EpochMetrics)]
        return pd.DataFrame([asdict(m) for m in self.history], columns=columns)

    def plot(self, ax=None, title: str | None = None):
        """Plot loss (and accuracy) per epoch; returns the matplotlib Figure.

        Without ``ax``: two subplots, loss and accuracy. With ``ax``: loss on
        ``ax`` and accuracy on a twin axis.
        """
        from rocm_dl_guide.plots import plot_history

        return plot_history(
            self.to_frame(),
            loss=("train_loss", "val_loss"),
            accuracy=("train_accuracy", "val_accuracy"),
            ax=ax,
            title=title,
        )


# --------------------------------------------------------------------------- atomic files


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` so that readers see the old file or the new, never half.

    Writes a hidden temporary file in the same directory (``.NAME.*.tmp``, never
    mistaken for a checkpoint), flushes and fsyncs it, renames it over ``path``
    and fsyncs the directory. On any error the temporary file is removed and
    ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _stale_temp_files(path: Path) -> list[Path]:
    """Temporary files left by a process killed while saving ``path``."""
    return sorted(path.parent.glob(_temp_prefix(path) + "*.tmp"))


def runs_dir(name: str) -> Path:
    """A checkpoint directory for the example ``name``: ``$ROCM_DL_GUIDE_RUNS/name``,
    default ``<data cache>/runs/name``. One per example, reused by every run, so
    repeated builds overwrite rather than pile up checkpoints."""
    from rocm_dl_guide.datasets import cache_dir

    base = os.environ.get("ROCM_DL_GUIDE_RUNS")
    path = (Path(base).expanduser() if base else cache_dir() / "runs") / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_weights(model: nn.Module, path: str | os.PathLike) -> Path:
    """Save ``model.state_dict()`` to ``path`` atomically; returns the path."""
    path = Path(path)
    _atomic_torch_save(model.state_dict(), path)
    return path


def load_weights(
    model: nn.Module,
    path: str | os.PathLike,
    map_location: str | torch.device | None = None,
    strict: bool = True,
) -> nn.Module:
    """Load weights saved by :func:`save_weights` (or a :func:`fit` checkpoint) into ``model``.

    Uses ``torch.load(weights_only=True)``. ``map_location=None`` loads onto the
    CPU first, and ``load_state_dict`` then copies into the model's own device,
    so weights saved on a GPU load on a CPU-only machine. A missing file raises
    ``FileNotFoundError``; a malformed, truncated or mismatching one raises
    :class:`CheckpointError` naming the file. Returns ``model``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    try:
        state = torch.load(path, map_location=map_location or "cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            path, f"not a readable PyTorch weights file ({type(exc).__name__}: {exc})"
        ) from exc
    if isinstance(state, Mapping) and state.get("format") == _FORMAT and "model" in state:
        state = state["model"]
    if not isinstance(state, Mapping) or not all(
        isinstance(v, torch.Tensor) for v in state.values()
    ):
        raise CheckpointError(path, "does not hold a state dict (a mapping of names to tensors)")
    try:
        model.load_state_dict(state, strict=strict)
    except RuntimeError as exc:
        raise CheckpointError(path, f"does not match this model: {exc}") from exc
    return model


# --------------------------------------------------------------------------- RNG state


def _loader_generator(loader: Any) -> torch.Generator | None:
    """The ``torch.Generator`` a DataLoader shuffles with, if it was given one."""
    for owner in (loader, getattr(loader, "sampler", None)):
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator):
            return gen
    return None


def _rng_state(device: torch.device, loader: Any = None) -> dict[str, Any]:
    """RNG states as plain types and tensors, so ``torch.load(weights_only=True)`` reads them.

    Includes the training loader's own generator, when it has one, so a resumed
    run shuffles exactly as an uninterrupted one would.
    """
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    gen = _loader_generator(loader)
    if gen is not None:
        state["loader"] = gen.get_state()
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with every torch wheel in practice
        np = None
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    if device.type == "cuda" and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any], loader: Any = None) -> None:
    gen = _loader_generator(loader)
    if gen is not None and state.get("loader") is not None:
        gen.set_state(state["loader"].cpu())
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    torch.set_rng_state(state["torch"].cpu())
    if "numpy" in state:
        import numpy as np

        s = state["numpy"]
        np.random.set_state(
            (
                s["kind"],
                s["keys"].numpy().astype(np.uint32),
                s["pos"],
                s["has_gauss"],
                s["cached_gaussian"],
            )
        )
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([t.cpu() for t in cuda])


# --------------------------------------------------------------------------- checkpoints


def _read_checkpoint(path: Path) -> dict[str, Any]:
    """Load and sanity-check a training checkpoint; raises :class:`CheckpointError`."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            path,
            f"cannot be read as a checkpoint ({type(exc).__name__}: {exc}). "
            "It is corrupt or truncated; delete it to train from scratch, or restore a copy.",
        ) from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != _FORMAT:
        raise CheckpointError(path, "is not a rocm_dl_guide training checkpoint")
    missing = [k for k in _REQUIRED_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(path, f"is incomplete: missing {', '.join(missing)}")
    epoch, history = ckpt["epoch"], ckpt["history"]
    if (
        not isinstance(epoch, int)
        or not isinstance(history, list)
        or not all(isinstance(row, dict) for row in history)
        or [row.get("epoch") for row in history] != list(range(1, epoch + 1))
    ):
        raise CheckpointError(path, f"is inconsistent: epoch {epoch!r} does not match its history")
    return ckpt


def _write_checkpoint(
    path: Path,
    *,
    epoch: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    history: list[EpochMetrics],
    best_val_accuracy: float | None,
    device: torch.device,
    loader: Any = None,
) -> None:
    _atomic_torch_save(
        {
            "format": _FORMAT,
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler.is_enabled() else None,
            "history": [asdict(m) for m in history],
            "best_val_accuracy": best_val_accuracy,
            "rng": _rng_state(device, loader),
            "torch_version": str(torch.__version__),
        },
        path,
    )


# --------------------------------------------------------------------------- step helpers


def _amp_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``device``, or ``None`` where autocast is unavailable."""
    if not torch.amp.is_autocast_available(device.type):
        return None
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "cpu":
        return torch.bfloat16
    return torch.float16


def _autocast(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _split_batch(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, Mapping):
        for xk, yk in (("image", "label"), ("input", "target"), ("x", "y")):
            if xk in batch and yk in batch:
                return batch[xk], batch[yk]
    elif isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return batch[0], batch[1]
    raise TypeError(
        "a batch must be (inputs, labels) or a dict with image/label keys; "
        f"got {type(batch).__name__}"
    )


def _split_output(out: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(main logits, auxiliary logits or None) from a model's output.

    Handles a plain tensor, Inception v3's ``InceptionOutputs(logits, aux_logits)``,
    GoogLeNet's outputs, any ``(logits, aux, ...)`` tuple, and torchvision
    segmentation dicts ``{"out", "aux"}``.
    """
    if isinstance(out, torch.Tensor):
        return out, None
    if hasattr(out, "logits"):
        aux = getattr(out, "aux_logits", None)
        if aux is None:
            aux = getattr(out, "aux_logits1", None)
        return out.logits, aux
    if isinstance(out, Mapping) and "out" in out:
        return out["out"], out.get("aux")
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        aux = out[1] if len(out) > 1 and isinstance(out[1], torch.Tensor) else None
        return out[0], aux
    raise TypeError(f"cannot find logits in a model output of type {type(out).__name__}")


def _prepare(x: torch.Tensor, device: torch.device, channels_last: bool) -> torch.Tensor:
    x = x.to(device, non_blocking=True)
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def _correct(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """(number correct as a 0-d tensor, number of labels), or None if labels are not classes."""
    if y.is_floating_point() or y.is_complex() or logits.dim() != y.dim() + 1:
        return None
    return (logits.argmax(dim=1) == y).sum(), y.numel()


class _Tally:
    """Running per-sample loss and accuracy over batches, kept on the device."""

    def __init__(self, device: torch.device) -> None:
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)
        self.samples = 0
        self.labels = 0
        self.classify = True  # False once labels turn out not to be class indices

    def add(self, logits: torch.Tensor, y: torch.Tensor, loss: torch.Tensor) -> None:
        n = y.shape[0]
        self.loss_sum += loss.double() * n
        self.samples += n
        hit = _correct(logits, y) if self.classify else None
        if hit is None:
            self.classify = False
        else:
            self.correct += hit[0]
            self.labels += hit[1]

    def loss(self) -> float:
        return self.loss_sum.item() / self.samples

    def accuracy(self) -> float | None:
        return self.correct.item() / self.labels if self.classify and self.labels else None


def _train_step(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable,
    scaler: torch.amp.GradScaler,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    aux_logits_weight: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step; returns (detached main logits, detached main loss)."""
    optimizer.zero_grad(set_to_none=True)
    with _autocast(device, amp_dtype):
        logits, aux = _split_output(model(x))
        loss = loss_fn(logits, y)
        total = loss
        if aux is not None and aux_logits_weight:
            total = loss + aux_logits_weight * loss_fn(aux, y)
    scaler.scale(total).backward()
    scaler.step(optimizer)
    scaler.update()
    return logits.detach(), loss.detach()


def _num_batches(loader: Iterable, cap: int | None) -> int | None:
    try:
        n = len(loader)  # type: ignore[arg-type]
    except TypeError:
        return cap
    return n if cap is None else min(n, cap)


# --------------------------------------------------------------------------- public loop


def evaluate(
    model: nn.Module,
    loader: Iterable,
    device: str | torch.device | None = None,
    loss_fn: Callable | None = None,
    max_batches: int | None = None,
    amp: bool = False,
    channels_last: bool = False,
) -> tuple[float, float]:
    """Mean loss and accuracy of ``model`` over ``loader`` (at most ``max_batches`` batches).

    Runs under ``torch.no_grad()`` in eval mode and restores the model's previous
    mode afterwards. The loss is averaged per sample; accuracy is ``nan`` when the
    labels are not class indices. Raises ``ValueError`` if the loader is empty.
    """
    device = torch.device(device) if device is not None else _default_device()
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
    amp_dtype = _amp_dtype(device) if amp else None
    was_training = model.training
    model.eval()
    tally = _Tally(device)
    try:
        with torch.no_grad():
            for i, batch in enumerate(loader):
                if max_batches is not None and i >= max_batches:
                    break
                x, y = _split_batch(batch)
                x, y = _prepare(x, device, channels_last), y.to(device, non_blocking=True)
                with _autocast(device, amp_dtype):
                    logits, _ = _split_output(model(x))
                    loss = loss_fn(logits, y)
                tally.add(logits, y, loss)
    finally:
        model.train(was_training)
    if tally.samples == 0:
        raise ValueError("evaluate: the loader produced no batches")
    accuracy = tally.accuracy()
    return tally.loss(), float("nan") if accuracy is None else accuracy


def _done(result: TrainResult, model: nn.Module, final_weights: str | None) -> TrainResult:
    """Save the final weights next to the checkpoint, if asked to; returns ``result``."""
    if final_weights and result.checkpoint is not None:
        result.weights = save_weights(model, result.checkpoint.parent / final_weights)
    return result


def _default_device() -> torch.device:
    from rocm_dl_guide.device import pick

    return pick()


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def fit(
    model: nn.Module,
    train_loader: Iterable,
    *,
    epochs: int,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable | None = None,
    scheduler: Any = None,
    val_loader: Iterable | None = None,
    device: str | torch.device | None = None,
    max_train_batches: int | None = None,
    max_val_batches: int | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    amp: bool = False,
    channels_last: bool = False,
    aux_logits_weight: float | None = None,
    progress: bool = True,
    log: Callable[[str], Any] | None = print,
    keep_best: bool = True,
    scheduler_interval: str = "epoch",
    on_epoch_end: Callable[[EpochMetrics], Any] | None = None,
    final_weights: str | None = None,
) -> TrainResult:
    """Train ``model`` for ``epochs`` epochs: the shared loop of every PyTorch case study.

    Works for any classifier and any DataLoader of ``(inputs, labels)``.

    - ``device``: default :func:`rocm_dl_guide.device.pick` (the GPU if any).
      The model (and ``loss_fn`` if it is a module) is moved there.
    - ``max_train_batches`` / ``max_val_batches``: per-epoch caps (the run
      profile's ``max_train_batches``).
    - ``scheduler``: stepped once per epoch (``scheduler_interval="epoch"``,
      ``ReduceLROnPlateau`` gets the validation loss, else the training loss) or
      after every batch (``"batch"``, e.g. ``OneCycleLR``).
    - ``checkpoint_dir``: write ``last.pt`` atomically at every epoch end (and,
      with ``keep_best`` and a ``val_loader``, ``best.pt`` weights by validation
      accuracy). ``resume=True`` continues after the last complete epoch stored
      there; with no checkpoint it starts from scratch and logs so; a checkpoint
      already at ``epochs`` returns its history without training (the model gets
      its weights). An unreadable checkpoint raises :class:`CheckpointError`.
    - ``amp``: autocast (bfloat16 where supported, else float16 with a grad
      scaler; bfloat16 on the CPU). ``channels_last``: NHWC memory format for
      the model and 4-D inputs.
    - ``aux_logits_weight``: for models whose training output is
      ``(logits, aux_logits)`` (Inception v3), add ``weight * loss(aux)``.
      Accuracy and the reported ``train_loss`` use the main logits only, so they
      compare with the validation numbers.
    - ``progress``: a tqdm bar per epoch with loss and img/s. ``log``: one line
      per epoch and notes (``None`` silences it).
    - ``on_epoch_end(metrics)``: called after the epoch's checkpoint is on disk;
      returning ``True`` stops training after that epoch.
    - ``final_weights``: with ``checkpoint_dir``, also save the trained model's
      weights (atomically) under this file name there when training ends; the
      path is :attr:`TrainResult.weights`.

    A non-finite training loss raises ``FloatingPointError`` before the epoch's
    checkpoint is written, so ``last.pt`` stays the last good epoch.
    """
    say = log if log is not None else (lambda _msg: None)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if scheduler_interval not in ("epoch", "batch"):
        raise ValueError("scheduler_interval must be 'epoch' or 'batch'")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs a checkpoint_dir")
    device = torch.device(device) if device is not None else _default_device()
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
    model.to(device)
    if channels_last:
        model.to(memory_format=torch.channels_last)

    amp_dtype = None
    if amp:
        amp_dtype = _amp_dtype(device)
        if amp_dtype is None:
            say(f"note: autocast is not available on {device}; training in float32")
        elif device.type == "cpu":
            say(
                "note: amp on the CPU uses bfloat16 autocast; it is only faster on CPUs "
                "with native bf16 (AVX512-BF16/AMX)"
            )
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    ckpt_path: Path | None = None
    history: list[EpochMetrics] = []
    best_val: float | None = None
    start = 0
    if checkpoint_dir is not None:
        ckpt_path = Path(checkpoint_dir) / CHECKPOINT_NAME
        ckpt_path.parent.mkdir(parents=True, exist_ok=True)
        stale_files = _stale_temp_files(ckpt_path) + _stale_temp_files(ckpt_path.parent / BEST_NAME)
        for stale in stale_files:
            say(f"removing {stale.name}, left by a run killed while saving")
            stale.unlink(missing_ok=True)
        if resume and ckpt_path.exists():
            ckpt = _read_checkpoint(ckpt_path)
            try:
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                if scheduler is not None and ckpt.get("scheduler") is not None:
                    scheduler.load_state_dict(ckpt["scheduler"])
                if scaler.is_enabled() and ckpt.get("scaler"):
                    scaler.load_state_dict(ckpt["scaler"])
            except (RuntimeError, ValueError, KeyError) as exc:
                raise CheckpointError(
                    ckpt_path, f"does not match this model/optimizer: {exc}"
                ) from exc
            start = ckpt["epoch"]
            try:
                history = [EpochMetrics(**row) for row in ckpt["history"]]
            except TypeError as exc:
                raise CheckpointError(ckpt_path, f"has an unknown history format: {exc}") from exc
            best_val = ckpt.get("best_val_accuracy")
            if start >= epochs:
                say(f"{ckpt_path} is already at epoch {start} (asked for {epochs}): not training")
                return _done(
                    TrainResult(history, str(device), ckpt_path, start), model, final_weights
                )
            _set_rng_state(ckpt["rng"], train_loader)
            say(f"resuming from {ckpt_path}: epoch {start} of {epochs} done")
        elif resume:
            say(f"no checkpoint at {ckpt_path}: starting from scratch")
        elif ckpt_path.exists():
            say(f"starting from scratch; {ckpt_path} will be overwritten (resume=False)")

    from tqdm import tqdm

    from rocm_dl_guide.progress import enabled as _bars

    progress = _bars(progress)

    for epoch in range(start + 1, epochs + 1):
        t_epoch = time.perf_counter()
        model.train()
        total = _num_batches(train_loader, max_train_batches)
        bar = tqdm(
            total=total,
            desc=f"epoch {epoch}/{epochs}",
            unit="batch",
            leave=False,
            disable=not progress,
            dynamic_ncols=True,
        )
        tally = _Tally(device)
        lr = float(optimizer.param_groups[0]["lr"])
        t_train = time.perf_counter()
        try:
            for i, batch in enumerate(train_loader):
                if max_train_batches is not None and i >= max_train_batches:
                    break
                x, y = _split_batch(batch)
                x, y = _prepare(x, device, channels_last), y.to(device, non_blocking=True)
                lr = float(optimizer.param_groups[0]["lr"])
                logits, loss = _train_step(
                    model, x, y, optimizer, loss_fn, scaler, device, amp_dtype, aux_logits_weight
                )
                if scheduler is not None and scheduler_interval == "batch":
                    scheduler.step()
                tally.add(logits, y, loss)
                bar.update(1)
                if progress and (i % 10 == 0 or i + 1 == total):
                    elapsed = time.perf_counter() - t_train
                    postfix = {
                        "loss": f"{tally.loss():.4f}",
                        "img/s": f"{tally.samples / max(elapsed, 1e-9):.0f}",
                    }
                    bar.set_postfix(postfix, refresh=False)
            _sync(device)
            train_seconds = time.perf_counter() - t_train
        finally:
            bar.close()
        if tally.samples == 0:
            raise ValueError("fit: the training loader produced no batches")
        train_loss = tally.loss()
        if not math.isfinite(train_loss):
            raise FloatingPointError(
                f"training loss is {train_loss} in epoch {epoch}; lower the learning rate"
                + (f" (last good checkpoint: {ckpt_path})" if ckpt_path and epoch > 1 else "")
            )
        train_acc = tally.accuracy()

        val_loss = val_acc = None
        if val_loader is not None:
            val_loss, val_acc = evaluate(
                model, val_loader, device, loss_fn, max_val_batches, amp, channels_last
            )
            if math.isnan(val_acc):
                val_acc = None

        if scheduler is not None and scheduler_interval == "epoch":
            if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                scheduler.step(val_loss if val_loss is not None else train_loss)
            else:
                scheduler.step()

        metrics = EpochMetrics(
            epoch=epoch,
            train_loss=train_loss,
            train_accuracy=train_acc,
            val_loss=val_loss,
            val_accuracy=val_acc,
            images_per_second=tally.samples / max(train_seconds, 1e-9),
            seconds=time.perf_counter() - t_epoch,
            lr=lr,
        )
        history.append(metrics)

        if ckpt_path is not None:
            if keep_best and val_acc is not None and (best_val is None or val_acc > best_val):
                best_val = val_acc
                save_weights(model, ckpt_path.parent / BEST_NAME)
            _write_checkpoint(
                ckpt_path,
                epoch=epoch,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                scaler=scaler,
                history=history,
                best_val_accuracy=best_val,
                device=device,
                loader=train_loader,
            )
        say(
            f"epoch {epoch}/{epochs}: train loss {train_loss:.4f} acc {_fmt(train_acc)}"
            f" | val loss {_fmt(val_loss)} acc {_fmt(val_acc)}"
            f" | {metrics.images_per_second:.0f} img/s, {metrics.seconds:.1f} s"
        )
        if on_epoch_end is not None and on_epoch_end(metrics) is True:
            say(f"stopped after epoch {epoch} by on_epoch_end")
            break

    return _done(TrainResult(history, str(device), ckpt_path, start), model, final_weights)


# --------------------------------------------------------------------------- precision


_VARIANTS = (
    ("float32", False, False),
    ("channels_last", False, True),
    ("amp", True, False),
    ("amp+channels_last", True, True),
)


def _run_steps(data: list, n: int, step: tuple) -> int:
    """``n`` training steps cycling over ``data``; returns the number of images seen."""
    model, opt, loss_fn, scaler, device, dtype, aux_logits_weight = step
    images = 0
    for k in range(n):
        x, y = data[k % len(data)]
        _train_step(model, x, y, opt, loss_fn, scaler, device, dtype, aux_logits_weight)
        images += x.shape[0]
    return images


def compare_precision(
    model_fn: Callable[[], nn.Module],
    loader: Iterable,
    device: str | torch.device | None = None,
    *,
    steps: int = 20,
    warmup: int = 5,
    repeats: int = 3,
    loss_fn: Callable | None = None,
    lr: float = 0.01,
    aux_logits_weight: float | None = None,
    variants: Iterable[str] | None = None,
) -> pandas.DataFrame:
    """Training-step throughput of float32 vs autocast vs channels_last (vs both), one run.

    For each variant a fresh model from ``model_fn()`` (seeded alike) is trained
    with SGD on a few batches taken once from ``loader`` and kept on the device,
    so data loading is not measured: ``warmup`` steps first, then ``repeats``
    timed runs of ``steps`` steps each, with the device synchronised around each.
    Returns a DataFrame with one row per variant: ``variant``, ``dtype`` (autocast's),
    ``channels_last``, ``images_per_second`` (the median of the repeats),
    ``speedup`` (relative to float32) and ``note`` (why a variant was skipped or
    failed, or a caveat). ``df.attrs["device"]`` names the device.
    """
    import pandas as pd

    device = torch.device(device) if device is not None else _default_device()
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
    wanted = set(variants) if variants is not None else None
    batches = []
    for batch in loader:
        batches.append(_split_batch(batch))
        if len(batches) >= 4:
            break
    if not batches:
        raise ValueError("compare_precision: the loader produced no batches")

    rows = []
    for name, use_amp, cl in _VARIANTS:
        if wanted is not None and name not in wanted:
            continue
        row = {
            "variant": name,
            "dtype": "float32",
            "channels_last": cl,
            "images_per_second": float("nan"),
            "note": "",
        }
        rows.append(row)
        dtype = None
        if use_amp:
            dtype = _amp_dtype(device)
            if dtype is None:
                row["note"] = f"skipped: autocast is not available on {device.type}"
                continue
            row["dtype"] = str(dtype).replace("torch.", "")
            if device.type == "cpu":
                row["note"] = (
                    "CPU bfloat16 autocast: rarely faster without AMX; the gain is a GPU's"
                )
        try:
            torch.manual_seed(0)
            model = model_fn().to(device)
            if cl:
                model.to(memory_format=torch.channels_last)
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
            data = [(_prepare(x, device, cl), y.to(device)) for x, y in batches]

            step = (model, opt, loss_fn, scaler, device, dtype, aux_logits_weight)
            _run_steps(data, warmup, step)
            _sync(device)
            rates = []
            for _ in range(max(1, repeats)):
                t0 = time.perf_counter()
                images = _run_steps(data, steps, step)
                _sync(device)
                rates.append(images / max(time.perf_counter() - t0, 1e-9))
            row["images_per_second"] = statistics.median(rates)
        except Exception as exc:  # an unsupported op under autocast must not end the comparison
            row["note"] = f"failed: {type(exc).__name__}: {exc}"[:200]
        finally:
            model = opt = data = step = None  # free device memory before the next variant

    frame = pd.DataFrame(rows)
    base = frame.loc[frame["variant"] == "float32", "images_per_second"]
    ref = float(base.iloc[0]) if len(base) else float("nan")
    frame["speedup"] = frame["images_per_second"] / ref
    frame = frame[["variant", "dtype", "channels_last", "images_per_second", "speedup", "note"]]
    frame.attrs["device"] = str(device)
    return frame
