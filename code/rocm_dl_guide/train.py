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
import shutil
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rocm_dl_guide import distributed, files, sharded
from rocm_dl_guide.device import cpu_has_native_bf16

if TYPE_CHECKING:  # pragma: no cover
    import pandas

CHECKPOINT_NAME = "last.pt"
"""File name of the checkpoint written at every epoch end."""
BEST_NAME = "best.pt"
"""File name of the weights of the best epoch by validation accuracy."""
SHARDED_PREFIX = "sharded-epoch-"
"""FSDP runs: the DCP folder of epoch N is ``sharded-epoch-N`` next to ``last.pt``."""
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
    world_size: int = 1
    """How many processes trained together (1 without torchrun)."""
    backend: str | None = None
    """The process group's backend (``nccl``, ``gloo``), ``None`` for one process."""

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


def _atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` so that readers see the old file or the new, never half.

    Writes a hidden temporary file in the same directory (``.NAME.*.tmp``, never
    mistaken for a checkpoint), flushes and fsyncs it, renames it over ``path``
    and fsyncs the directory. On any error the temporary file is removed and
    ``path`` is untouched.
    """
    with files.atomic_write(path) as fh:
        torch.save(obj, fh)


def _stale_temp_files(path: Path) -> list[Path]:
    """Temporary files left by a process killed while saving ``path``."""
    return files.stale_temp_files(path)


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
    loop: _Loop,
    history: list[EpochMetrics],
    best_val_accuracy: float | None,
    loader: Any = None,
    shards: Path | None = None,
) -> None:
    """``last.pt``: everything to resume. With ``shards`` (an FSDP run) the model and
    optimizer state live in that DCP folder next to it, and ``last.pt`` names it."""
    _atomic_torch_save(
        {
            "format": _FORMAT,
            "epoch": history[-1].epoch,
            "model": None if shards else loop.module.state_dict(),
            "optimizer": None if shards else loop.optimizer.state_dict(),
            "sharded": shards.name if shards else None,
            "scheduler": loop.scheduler.state_dict() if loop.scheduler is not None else None,
            "scaler": loop.scaler.state_dict() if loop.scaler.is_enabled() else None,
            "history": [asdict(m) for m in history],
            "best_val_accuracy": best_val_accuracy,
            "rng": _rng_state(loop.device, loader),
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

    def sum_over_ranks(self) -> None:
        """Replace this rank's totals by the totals of all ranks (distributed runs)."""
        device = self.loss_sum.device
        totals = distributed.all_reduce_sums(
            [self.loss_sum.item(), self.correct.item(), self.samples, self.labels], device
        )
        self.loss_sum = torch.tensor(totals[0], dtype=torch.float64, device=device)
        self.correct = torch.tensor(int(totals[1]), dtype=torch.int64, device=device)
        self.samples, self.labels = int(totals[2]), int(totals[3])


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
) -> tuple[float, float | None]:
    """Mean loss and accuracy of ``model`` over ``loader`` (at most ``max_batches`` batches).

    Runs under ``torch.no_grad()`` in eval mode and restores the model's previous
    mode afterwards. The loss is averaged per sample; accuracy is ``None`` when the
    labels are not class indices (as in :class:`EpochMetrics`). In a distributed
    run every rank must call it, and the totals are summed over ranks (each rank
    passes its own shard, see :func:`rocm_dl_guide.distributed.shard_eval_loader`).
    Raises ``ValueError`` if the loader is empty.
    """
    device = torch.device(device) if device is not None else _default_device()
    loss_fn = _loss_on(loss_fn, device)
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
    tally.sum_over_ranks()  # in a distributed run: over every rank's shard
    if tally.samples == 0:
        raise ValueError("evaluate: the loader produced no batches")
    return tally.loss(), tally.accuracy()


@dataclass(frozen=True)
class FitOptions:
    """The knobs of :func:`fit` beyond the model, the data and the optimizer.

    Pass them to :func:`fit` as keywords (``fit(..., amp=True)``) or as one
    object (``fit(..., options=FitOptions(amp=True))``); keywords override the
    object's fields.
    """

    max_train_batches: int | None = None
    """Cap on training batches per epoch (the run profile's ``max_train_batches``)."""
    max_val_batches: int | None = None
    """Cap on validation batches per epoch."""
    checkpoint_dir: str | os.PathLike | None = None
    """Write ``last.pt`` (and ``best.pt``) here atomically at every epoch end."""
    resume: bool = False
    """Continue after the last complete epoch stored in ``checkpoint_dir``."""
    amp: bool = False
    """Autocast: bfloat16 where supported, else float16 with a grad scaler."""
    channels_last: bool = False
    """NHWC memory format for the model and 4-D inputs."""
    aux_logits_weight: float | None = None
    """Weight of the auxiliary head's loss for models that have one (Inception v3)."""
    progress: bool = True
    """A tqdm bar per epoch (only on a terminal, see :mod:`rocm_dl_guide.progress`)."""
    keep_best: bool = True
    """Also keep ``best.pt``: the weights of the epoch with the best validation accuracy."""
    scheduler_interval: str = "epoch"
    """Step the scheduler once per ``"epoch"`` or after every ``"batch"``."""
    final_weights: str | None = None
    """Save the trained weights under this file name in ``checkpoint_dir`` at the end."""
    fsdp: bool = False
    """Under torchrun: shard the model with FSDP2 instead of replicating it with DDP,
    and checkpoint through ``torch.distributed.checkpoint`` (see :mod:`rocm_dl_guide.sharded`)."""

    def __post_init__(self) -> None:
        if self.scheduler_interval not in ("epoch", "batch"):
            raise ValueError("scheduler_interval must be 'epoch' or 'batch'")
        if self.resume and self.checkpoint_dir is None:
            raise ValueError("resume=True needs a checkpoint_dir")


@dataclass
class _Loop:
    """What every step of :func:`fit` needs: the model and its optimisation state."""

    model: nn.Module
    """What trains: the model, or its DistributedDataParallel wrapper."""
    optimizer: torch.optim.Optimizer
    loss_fn: Callable
    scheduler: Any
    device: torch.device
    amp_dtype: torch.dtype | None
    scaler: torch.amp.GradScaler
    options: FitOptions
    say: Callable[[str], Any]
    ctx: distributed.Context
    module: nn.Module
    """The model itself (whose ``state_dict`` is saved and loaded)."""


@dataclass
class _Start:
    """Where a run starts: from scratch, or after a checkpoint's last epoch."""

    checkpoint: Path | None
    epoch: int = 0
    history: list[EpochMetrics] = field(default_factory=list)
    best_val_accuracy: float | None = None
    rng: Mapping[str, Any] | None = None
    lock: Any = None
    """The checkpoint folder's lock, held by rank 0 until the run ends."""


def _loss_on(loss_fn: Callable | None, device: torch.device) -> Callable:
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
    return loss_fn


def _make_loop(model, optimizer, loss_fn, scheduler, ctx, options, say) -> _Loop:
    """Move the model to the device, wrap it for data parallelism when several
    processes train together, and pick the precision: the set-up of a run."""
    device = ctx.device
    model.to(device)
    if options.channels_last:
        model.to(memory_format=torch.channels_last)
    amp_dtype = _amp_dtype(device) if options.amp else None
    if options.amp and amp_dtype is None:
        say(f"note: autocast is not available on {device}; training in float32")
    elif options.amp and device.type == "cpu":
        slow = "" if cpu_has_native_bf16() else "; this CPU has neither, so expect it much slower"
        say(
            "note: amp on the CPU uses bfloat16 autocast; it is only faster on CPUs "
            f"with native bf16 (AVX512-BF16/AMX){slow}"
        )
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    loss_fn = _loss_on(loss_fn, device)
    trained = model
    if options.fsdp:
        if not ctx.distributed:
            raise ValueError(
                "fsdp=True needs several processes: start the run with torchrun "
                "(python -m rocm_dl_guide train EXAMPLE --nproc N --fsdp)"
            )
        sharded.shard(model, optimizer)
    elif ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        ids = [ctx.local_rank] if device.type == "cuda" else None
        trained = DistributedDataParallel(model, device_ids=ids)
    return _Loop(
        trained, optimizer, loss_fn, scheduler, device, amp_dtype, scaler, options, say, ctx, model
    )


def restore_checkpoint(loop: _Loop) -> _Start:
    """Step 1 of :func:`fit`: load ``last.pt`` into the model and optimizer when resuming.

    Removes temporary files left by a run killed while saving. Returns where the
    run starts; an unusable checkpoint raises :class:`CheckpointError`.
    """
    opts, say = loop.options, loop.say
    if opts.checkpoint_dir is None:
        return _Start(None)
    path = Path(opts.checkpoint_dir) / CHECKPOINT_NAME
    lock = _take_checkpoint_dir(loop, path)
    resume = opts.resume or distributed.restart_count() > 0  # torchrun restarted the group
    if not resume:
        if path.exists():
            say(f"starting from scratch; {path} will be overwritten (resume=False)")
        return _Start(path, lock=lock)
    if not path.exists():
        say(f"no checkpoint at {path}: starting from scratch")
        return _Start(path, lock=lock)
    ckpt = _read_checkpoint(path)
    try:
        _load_model_and_optimizer(loop, ckpt, path)
        if loop.scheduler is not None and ckpt.get("scheduler") is not None:
            loop.scheduler.load_state_dict(ckpt["scheduler"])
        if loop.scaler.is_enabled() and ckpt.get("scaler"):
            loop.scaler.load_state_dict(ckpt["scaler"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(path, f"does not match this model/optimizer: {exc}") from exc
    try:
        history = [EpochMetrics(**row) for row in ckpt["history"]]
    except TypeError as exc:
        raise CheckpointError(path, f"has an unknown history format: {exc}") from exc
    best = ckpt.get("best_val_accuracy")
    return _Start(path, ckpt["epoch"], history, best, ckpt["rng"], lock)


def _load_model_and_optimizer(loop: _Loop, ckpt: Mapping[str, Any], path: Path) -> None:
    if ckpt.get("sharded"):  # an FSDP run's DCP folder; DCP reshards it for this job
        folder = path.parent / ckpt["sharded"]
        if not (folder / ".metadata").is_file():
            raise CheckpointError(path, f"names {folder.name}, which is missing or incomplete")
        sharded.load(folder, loop.module, loop.optimizer)
    elif loop.options.fsdp:
        raise CheckpointError(path, "was written without fsdp; resume it without --fsdp")
    else:
        loop.module.load_state_dict(ckpt["model"])
        loop.optimizer.load_state_dict(ckpt["optimizer"])


def _take_checkpoint_dir(loop: _Loop, path: Path) -> Any:
    """Rank 0 locks the checkpoint folder and removes temporary files of a killed
    save; the other ranks wait for it. Returns the lock (``None`` on other ranks)."""
    lock = None
    if loop.ctx.is_main:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = distributed.lock_checkpoint_dir(path.parent)
        for stale in _stale_temp_files(path) + _stale_temp_files(path.parent / BEST_NAME):
            loop.say(f"removing {stale.name}, left by a run killed while saving")
            stale.unlink(missing_ok=True)
    distributed.barrier()
    return lock


def _train_step(loop: _Loop, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step; returns (detached main logits, detached main loss)."""
    loop.optimizer.zero_grad(set_to_none=True)
    with _autocast(loop.device, loop.amp_dtype):
        logits, aux = _split_output(loop.model(x))
        loss = loop.loss_fn(logits, y)
        total = loss
        weight = loop.options.aux_logits_weight
        if aux is not None and weight:
            total = loss + weight * loop.loss_fn(aux, y)
    loop.scaler.scale(total).backward()
    loop.scaler.step(loop.optimizer)
    loop.scaler.update()
    return logits.detach(), loss.detach()


def step_function(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable | None = None,
    device: str | torch.device | None = None,
    options: FitOptions | None = None,
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """One training step of the shared loop as a function ``step(x, y) -> loss``.

    The same set-up and step as :func:`fit` (model on the device, precision from
    ``options``, forward, loss, backward, optimizer step), in one process and
    without epochs, checkpoints or logs: for profilers and micro-benchmarks that
    want to look at exactly the step that trains the case studies.
    """
    device = torch.device(device) if device is not None else _default_device()
    one = distributed.Context(0, 1, 0, None, device)
    loop = _make_loop(
        model, optimizer, loss_fn, None, one, options or FitOptions(), lambda _m: None
    )

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = _prepare(x, device, loop.options.channels_last)
        return _train_step(loop, x, y.to(device))[1]

    return step


def train_one_epoch(
    loop: _Loop, loader: Iterable, epoch: int, epochs: int
) -> tuple[_Tally, float, float]:
    """Step 2 of :func:`fit`: one pass over ``loader`` (capped by ``max_train_batches``).

    Returns the running tally (loss and accuracy), the wall time of the pass and
    the learning rate of its last step.
    """
    from tqdm import tqdm

    from rocm_dl_guide.progress import enabled as bars_enabled

    opts, device = loop.options, loop.device
    show = bars_enabled(opts.progress) and loop.ctx.is_main
    distributed.set_epoch(loader, epoch)
    total = _num_batches(loader, opts.max_train_batches)
    bar = tqdm(
        total=total,
        desc=f"epoch {epoch}/{epochs}",
        unit="batch",
        leave=False,
        disable=not show,
        dynamic_ncols=True,
    )
    loop.model.train()
    tally = _Tally(device)
    lr = float(loop.optimizer.param_groups[0]["lr"])
    start = time.perf_counter()
    try:
        for i, batch in enumerate(loader):
            if opts.max_train_batches is not None and i >= opts.max_train_batches:
                break
            x, y = _split_batch(batch)
            x, y = _prepare(x, device, opts.channels_last), y.to(device, non_blocking=True)
            lr = float(loop.optimizer.param_groups[0]["lr"])
            logits, loss = _train_step(loop, x, y)
            if loop.scheduler is not None and opts.scheduler_interval == "batch":
                loop.scheduler.step()
            tally.add(logits, y, loss)
            bar.update(1)
            if show and (i % 10 == 0 or i + 1 == total):
                rate = tally.samples / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix(
                    {"loss": f"{tally.loss():.4f}", "img/s": f"{rate:.0f}"}, refresh=False
                )
        _sync(device)
        seconds = time.perf_counter() - start
    finally:
        bar.close()
    tally.sum_over_ranks()
    if tally.samples == 0:
        raise ValueError("fit: the training loader produced no batches")
    return tally, seconds, lr


def _step_scheduler(loop: _Loop, val_loss: float | None, train_loss: float) -> None:
    """The once-per-epoch scheduler step (``ReduceLROnPlateau`` gets a loss)."""
    if loop.scheduler is None or loop.options.scheduler_interval != "epoch":
        return
    if isinstance(loop.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        loop.scheduler.step(val_loss if val_loss is not None else train_loss)
    else:
        loop.scheduler.step()


def _run_epoch(
    loop: _Loop, train_loader, val_loader, epoch: int, epochs: int, checkpoint: Path | None
) -> EpochMetrics:
    """Train one epoch, then evaluate and step the scheduler; returns its metrics."""
    opts = loop.options
    started = time.perf_counter()
    tally, train_seconds, lr = train_one_epoch(loop, train_loader, epoch, epochs)
    train_loss = tally.loss()
    if not math.isfinite(train_loss):
        raise FloatingPointError(
            f"training loss is {train_loss} in epoch {epoch}; lower the learning rate"
            + (f" (last good checkpoint: {checkpoint})" if checkpoint and epoch > 1 else "")
        )
    val_loss = val_acc = None
    if val_loader is not None:
        val_loss, val_acc = evaluate(
            loop.model,
            val_loader,
            loop.device,
            loop.loss_fn,
            opts.max_val_batches,
            opts.amp,
            opts.channels_last,
        )
    _step_scheduler(loop, val_loss, train_loss)
    return EpochMetrics(
        epoch=epoch,
        train_loss=train_loss,
        train_accuracy=tally.accuracy(),
        val_loss=val_loss,
        val_accuracy=val_acc,
        images_per_second=tally.samples / max(train_seconds, 1e-9),
        seconds=time.perf_counter() - started,
        lr=lr,
    )


def save_checkpoint(loop: _Loop, start: _Start, history: list[EpochMetrics], loader: Any) -> None:
    """Step 4 of :func:`fit`: ``best.pt`` if this epoch is the best so far, then ``last.pt``."""
    if start.checkpoint is None:
        return
    val_acc = history[-1].val_accuracy
    best = start.best_val_accuracy
    is_best = loop.options.keep_best and val_acc is not None and (best is None or val_acc > best)
    if is_best:
        start.best_val_accuracy = val_acc
    folder = start.checkpoint.parent
    shards = None
    if loop.options.fsdp:  # collective: every rank writes its own shard
        name = f"{SHARDED_PREFIX}{history[-1].epoch}"
        shards = sharded.save(folder / name, loop.module, loop.optimizer)
    best_state = sharded.full_state_dict(loop.module) if is_best else None  # collective
    if loop.ctx.is_main:  # one writer; the others wait until the files are complete
        if is_best:
            _atomic_torch_save(best_state, folder / BEST_NAME)
        _write_checkpoint(start.checkpoint, loop, history, start.best_val_accuracy, loader, shards)
        for old in folder.glob(f"{SHARDED_PREFIX}*"):
            if shards is None or old.name != shards.name:
                shutil.rmtree(old, ignore_errors=True)  # last.pt no longer names it
    distributed.barrier()


def _finish(loop: _Loop, start: _Start, history: list[EpochMetrics]) -> TrainResult:
    """The run's result; saves the final weights next to the checkpoint if asked to."""
    ctx = loop.ctx
    result = TrainResult(
        history, str(loop.device), start.checkpoint, start.epoch, None, ctx.world_size, ctx.backend
    )
    name = loop.options.final_weights
    if name and start.checkpoint is not None:
        result.weights = start.checkpoint.parent / name
        state = sharded.full_state_dict(loop.module)  # collective for a sharded model
        if ctx.is_main:
            _atomic_torch_save(state, result.weights)
        distributed.barrier()
    return result


def _default_device() -> torch.device:
    from rocm_dl_guide.device import pick

    return pick()


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def _epoch_line(m: EpochMetrics, epochs: int) -> str:
    return (
        f"epoch {m.epoch}/{epochs}: train loss {m.train_loss:.4f} acc {_fmt(m.train_accuracy)}"
        f" | val loss {_fmt(m.val_loss)} acc {_fmt(m.val_accuracy)}"
        f" | {m.images_per_second:.0f} img/s, {m.seconds:.1f} s"
    )


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
    options: FitOptions | None = None,
    log: Callable[[str], Any] | None = print,
    on_epoch_end: Callable[[EpochMetrics], Any] | None = None,
    **knobs: Any,
) -> TrainResult:
    """Train ``model`` for ``epochs`` epochs: the shared loop of every PyTorch case study.

    Works for any classifier and any DataLoader of ``(inputs, labels)``. The
    model (and ``loss_fn``, default cross-entropy) go to ``device`` (default:
    :func:`rocm_dl_guide.device.pick`, the GPU if any). The knobs are the fields
    of :class:`FitOptions`, as ``options=`` or as keywords. Each epoch is
    :func:`train_one_epoch`, :func:`evaluate` on ``val_loader``, a scheduler
    step (``ReduceLROnPlateau`` gets the validation loss) and
    :func:`save_checkpoint`; a run with ``resume`` starts with
    :func:`restore_checkpoint`. ``log`` gets one line per epoch and notes
    (``None`` silences it); ``on_epoch_end(metrics)`` is called after the
    epoch's checkpoint is on disk, and returning ``True`` stops training.

    A non-finite training loss raises ``FloatingPointError`` before the epoch's
    checkpoint is written, so ``last.pt`` stays the last good epoch. A
    checkpoint already at ``epochs`` returns its history without training.
    Rank 0 holds a lock on ``checkpoint_dir`` for the whole run, so a second run
    pointed at the same folder fails at once
    (:class:`rocm_dl_guide.distributed.CheckpointInUseError`).

    Started by ``torchrun``, the same call trains data-parallel (see
    :mod:`rocm_dl_guide.distributed`): each process uses its local GPU (``device``
    is then ignored) or the CPU with ``gloo``, the model is wrapped in
    ``DistributedDataParallel``, the loaders are sharded (per-rank batch size
    unchanged), the metrics are summed over ranks, rank 0 alone logs and writes
    checkpoints, and after an elastic restart every rank resumes from ``last.pt``.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    opts = replace(options or FitOptions(), **knobs)
    ctx = distributed.setup(device)
    say = log if log is not None and ctx.is_main else (lambda _msg: None)
    if ctx.distributed:
        kind = "fully sharded (FSDP2)" if opts.fsdp else "data parallel (DDP)"
        say(f"{kind}: {ctx.world_size} processes, {ctx.backend} backend")
        train_loader = distributed.shard_train_loader(train_loader, ctx)
        if val_loader is not None:
            val_loader = distributed.shard_eval_loader(val_loader, ctx)
    loop = _make_loop(model, optimizer, loss_fn, scheduler, ctx, opts, say)
    start = restore_checkpoint(loop)
    try:
        history = _train_epochs(loop, start, train_loader, val_loader, epochs, on_epoch_end)
        return _finish(loop, start, history)
    finally:
        if start.lock is not None:
            start.lock.release()


def _train_epochs(
    loop: _Loop, start: _Start, train_loader, val_loader, epochs: int, on_epoch_end
) -> list[EpochMetrics]:
    """Epochs ``start.epoch + 1`` to ``epochs``, each checkpointed; the whole history."""
    say = loop.say
    if start.epoch >= epochs:
        say(
            f"{start.checkpoint} is already at epoch {start.epoch} (asked for {epochs}): "
            "not training"
        )
        return start.history
    if start.rng is not None:
        _set_rng_state(start.rng, train_loader)
        say(f"resuming from {start.checkpoint}: epoch {start.epoch} of {epochs} done")
    history = list(start.history)
    for epoch in range(start.epoch + 1, epochs + 1):
        metrics = _run_epoch(loop, train_loader, val_loader, epoch, epochs, start.checkpoint)
        history.append(metrics)
        save_checkpoint(loop, start, history, train_loader)
        say(_epoch_line(metrics, epochs))
        if on_epoch_end is not None and on_epoch_end(metrics) is True:
            say(f"stopped after epoch {epoch} by on_epoch_end")
            break
    return history


# --------------------------------------------------------------------------- precision


_VARIANTS = (
    ("float32", None, False),
    ("channels_last", None, True),
    ("amp", "auto", False),
    ("amp+channels_last", "auto", True),
)
"""``(name, autocast dtype, channels_last)``: the rows :func:`compare_precision`
measures by default (``auto``: bfloat16 where supported, else float16)."""
_EXTRA_VARIANTS = (
    ("amp-bfloat16", "bfloat16", False),
    ("amp-float16", "float16", False),
    ("amp-float16+channels_last", "float16", True),
)
"""Rows measured only when asked for by name: autocast with a fixed dtype
(float16 trains with a gradient scaler)."""


@dataclass
class PrecisionComparison:
    """What :func:`compare_precision` returns: one row per variant, measured in one run."""

    frame: pandas.DataFrame
    """Columns ``variant``, ``dtype`` (autocast's), ``channels_last``,
    ``images_per_second`` (median of the repeats), ``speedup`` (relative to
    float32) and ``note`` (why a variant was skipped or failed, or a caveat)."""
    device: str
    """The device the variants ran on."""
    batch_size: int | None = None
    """Images per training step, when the caller knows it."""
    image_size: int | None = None
    """Input height and width, when the caller knows it."""

    def speedup(self, variant: str) -> float:
        """The named variant's speed-up over float32 (``nan`` if it did not run)."""
        rows = self.frame.loc[self.frame["variant"] == variant, "speedup"]
        return float(rows.iloc[0]) if len(rows) else float("nan")

    def fastest(self) -> tuple[str, float]:
        """``(variant, speed-up over float32)`` of the fastest variant that ran."""
        row = self.frame.loc[self.frame["speedup"].idxmax()]
        return str(row["variant"]), float(row["speedup"])


def _run_steps(loop: _Loop, data: list, n: int) -> int:
    """``n`` training steps cycling over ``data``; returns the number of images seen."""
    images = 0
    for k in range(n):
        x, y = data[k % len(data)]
        _train_step(loop, x, y)
        images += x.shape[0]
    return images


def _time_variant(loop: _Loop, data: list, steps: int, warmup: int, repeats: int) -> float:
    """Median images/s over ``repeats`` timed runs of ``steps`` steps, after ``warmup``."""
    _run_steps(loop, data, warmup)
    _sync(loop.device)
    rates = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        images = _run_steps(loop, data, steps)
        _sync(loop.device)
        rates.append(images / max(time.perf_counter() - t0, 1e-9))
    return statistics.median(rates)


def _variant_dtype(device: torch.device, amp: str | None) -> tuple[torch.dtype | None, str]:
    """The autocast dtype of a variant on ``device``, or ``(None, why not)``."""
    if amp is None:
        return None, ""
    auto = _amp_dtype(device)
    if auto is None:
        return None, f"skipped: autocast is not available on {device.type}"
    if amp == "auto":
        return auto, ""
    dtype = getattr(torch, amp)
    if dtype == torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return None, "skipped: this GPU does not support bfloat16"
    if dtype == torch.float16 and device.type == "cpu":
        return None, "skipped: float16 autocast with a grad scaler is a GPU's recipe"
    return dtype, ""


def _measure_variant(
    row: dict, amp: str | None, model_fn, batches, device, loss_fn, lr, aux_logits_weight, timing
) -> None:
    """Fill ``row`` with one variant's images/s, or a note saying why it has none."""
    use_amp = amp is not None
    dtype, why_not = _variant_dtype(device, amp)
    if use_amp and dtype is None:
        row["note"] = why_not
        return
    if dtype == torch.bfloat16 and device.type == "cpu" and not cpu_has_native_bf16():
        row["dtype"] = "bfloat16"
        row["note"] = (
            "skipped: this CPU has no native bfloat16 (AVX512-BF16/AMX), so autocast would "
            "be emulated and many times slower; the gain is a GPU's"
        )
        return
    if use_amp:
        row["dtype"] = str(dtype).replace("torch.", "")
        if device.type == "cpu":
            row["note"] = "CPU bfloat16 autocast: rarely faster without AMX; the gain is a GPU's"
    cl = row["channels_last"]
    try:
        torch.manual_seed(0)
        model = model_fn()
        opts = FitOptions(channels_last=cl, aux_logits_weight=aux_logits_weight)
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        one = distributed.Context(0, 1, 0, None, device)
        loop = _make_loop(model, opt, loss_fn, None, one, opts, lambda _m: None)
        loop.amp_dtype = dtype
        loop.scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
        data = [(_prepare(x, device, cl), y.to(device)) for x, y in batches]
        row["images_per_second"] = _time_variant(loop, data, *timing)
    except Exception as exc:  # an unsupported op under autocast must not end the comparison
        row["note"] = f"failed: {type(exc).__name__}: {exc}"[:200]


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
) -> PrecisionComparison:
    """Training-step throughput of float32 vs autocast vs channels_last (vs both), one run.

    For each variant a fresh model from ``model_fn()`` (seeded alike) is trained
    with SGD on a few batches taken once from ``loader`` and kept on the device,
    so data loading is not measured: ``warmup`` steps first, then ``repeats``
    timed runs of ``steps`` steps each, with the device synchronised around each.
    ``variants`` picks rows by name: the default four, and also ``amp-bfloat16``,
    ``amp-float16`` and ``amp-float16+channels_last`` (a fixed autocast dtype).
    """
    import pandas as pd

    device = torch.device(device) if device is not None else _default_device()
    loss_fn = _loss_on(loss_fn, device)
    wanted = set(variants) if variants is not None else None
    known = [v[0] for v in _VARIANTS + _EXTRA_VARIANTS]
    if wanted and wanted - set(known):
        raise ValueError(f"unknown variant(s) {sorted(wanted - set(known))}: choose from {known}")
    batches = []
    for batch in loader:
        batches.append(_split_batch(batch))
        if len(batches) >= 4:
            break
    if not batches:
        raise ValueError("compare_precision: the loader produced no batches")
    rows = []
    for name, use_amp, cl in _VARIANTS + _EXTRA_VARIANTS:
        if (wanted is None and (name, use_amp, cl) in _VARIANTS) or (wanted and name in wanted):
            row = {
                "variant": name,
                "dtype": "float32",
                "channels_last": cl,
                "images_per_second": float("nan"),
                "note": "",
            }
            rows.append(row)
            _measure_variant(
                row,
                use_amp,
                model_fn,
                batches,
                device,
                loss_fn,
                lr,
                aux_logits_weight,
                (steps, warmup, repeats),
            )
    frame = pd.DataFrame(rows)
    base = frame.loc[frame["variant"] == "float32", "images_per_second"]
    frame["speedup"] = frame["images_per_second"] / (
        float(base.iloc[0]) if len(base) else float("nan")
    )
    columns = ["variant", "dtype", "channels_last", "images_per_second", "speedup", "note"]
    return PrecisionComparison(frame[columns], str(device))
