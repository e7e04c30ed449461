"""The one training loop of the guide's PyTorch case studies.

Every PyTorch page trains through :func:`fit`, so that all of them share the
same behaviour: the device from :func:`rocm_dl_guide.core.device.pick`, per-epoch
caps from the run profile, optional mixed precision (``amp``) and
``channels_last``, models with auxiliary heads (Inception v3), a compact tqdm
progress bar, and crash-safe checkpoints that a later run resumes from.

The loop, like torchvision's ``references/classification/train.py``, is a few
plain steps that :func:`fit` calls in order:
:func:`~rocm_dl_guide.training.setup.setup_loop` (device, precision, the DDP or
FSDP wrapper), :func:`~rocm_dl_guide.training.resume.restore_checkpoint`, then
per epoch :func:`train_one_epoch` (each batch is one :func:`train_step`),
:func:`evaluate` and :func:`~rocm_dl_guide.training.resume.save_checkpoint`.

Checkpoints
    With ``checkpoint_dir``, :func:`fit` writes ``checkpoint_dir/last.pt``
    atomically at the end of every epoch (:mod:`rocm_dl_guide.training.resume`,
    :mod:`rocm_dl_guide.training.checkpoints`).
    ``resume=True`` continues from the last complete epoch; because the RNG
    states are restored, the resumed run draws the same shuffles and dropout
    masks as an uninterrupted one.

Preemption and long epochs
    With ``checkpoint_every=N`` it also checkpoints every N optimizer steps
    inside the epochs, and on ``SIGTERM`` or ``SIGINT`` (a scheduler's
    preemption, ``scancel``, Ctrl-C) it finishes the step in progress, writes
    ``last.pt`` with the position inside the epoch and raises
    :class:`rocm_dl_guide.core.preemption.Preempted` (:mod:`rocm_dl_guide.core.preemption`).
    The position is the training loader's own state: ``fit`` trains from a
    ``torchdata`` ``StatefulDataLoader`` (:func:`distributed.resumable_loader`),
    so a resumed run draws exactly the batches the interrupted epoch had not
    drawn yet, in the same order, and ends with the same losses.

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
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from rocm_dl_guide.core import distributed, files, preemption, runs
from rocm_dl_guide.training import checkpoints, sharded
from rocm_dl_guide.training.metrics import EpochMetrics, Tally
from rocm_dl_guide.training.resume import (
    EpochPosition,
    Interruptions,
    StartingPoint,
    restore_checkpoint,
    save_checkpoint,
)
from rocm_dl_guide.training.setup import (
    FitOptions,
    LoopState,
    autocast_dtype,
    loss_on,
    setup_loop,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas


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
    resumed_from_step: int = 0
    """The global step (optimizer steps since the first run began) the run continued
    from: inside an epoch after a mid-epoch checkpoint (``0`` from scratch)."""
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
        from rocm_dl_guide.core.plots import plot_history

        return plot_history(
            self.to_frame(),
            loss=("train_loss", "val_loss"),
            accuracy=("train_accuracy", "val_accuracy"),
            ax=ax,
            title=title,
        )


# --------------------------------------------------------------------------- step helpers


def autocast_context(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work (a no-op on the CPU), before reading a clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def split_batch(batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)`` of a batch: a pair, or a dict with image/label keys."""
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


def split_output(out: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
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


def to_device(x: torch.Tensor, device: torch.device, channels_last: bool) -> torch.Tensor:
    """``x`` on ``device`` (asynchronously from pinned memory), NHWC if asked for."""
    x = x.to(device, non_blocking=True)
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def num_batches(loader: Iterable, cap: int | None) -> int | None:
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
    labels are not class indices (as in
    :class:`~rocm_dl_guide.training.metrics.EpochMetrics`). In a distributed run
    every rank must call it, and the totals are summed over ranks (each rank
    passes its own shard, see :func:`rocm_dl_guide.core.distributed.shard_eval_loader`).
    Raises ``ValueError`` if the loader is empty.
    """
    device = torch.device(device) if device is not None else default_device()
    loss_fn = loss_on(loss_fn, device)
    amp_dtype = autocast_dtype(device) if amp else None
    was_training = model.training
    model.eval()
    tally = Tally(device)
    try:
        with torch.no_grad():
            for i, batch in enumerate(loader):
                if max_batches is not None and i >= max_batches:
                    break
                x, y = split_batch(batch)
                x, y = to_device(x, device, channels_last), y.to(device, non_blocking=True)
                with autocast_context(device, amp_dtype):
                    logits, _ = split_output(model(x))
                    loss = loss_fn(logits, y)
                tally.add(logits, y, loss)
    finally:
        model.train(was_training)
    tally.sum_over_ranks()  # in a distributed run: over every rank's shard
    if tally.samples == 0:
        raise ValueError("evaluate: the loader produced no batches")
    return tally.loss(), tally.accuracy()


def train_step(
    state: LoopState, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step; returns (detached main logits, detached main loss)."""
    state.optimizer.zero_grad(set_to_none=True)
    with autocast_context(state.device, state.amp_dtype):
        logits, aux = split_output(state.model(x))
        loss = state.loss_fn(logits, y)
        total = loss
        weight = state.options.aux_logits_weight
        if aux is not None and weight:
            total = loss + weight * state.loss_fn(aux, y)
    state.scaler.scale(total).backward()
    state.scaler.step(state.optimizer)
    state.scaler.update()
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
    device = torch.device(device) if device is not None else default_device()
    state = setup_loop(
        model,
        optimizer,
        ctx=distributed.Context.single(device),
        options=options or FitOptions(),
        loss_fn=loss_fn,
    )

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = to_device(x, device, state.options.channels_last)
        return train_step(state, x, y.to(device))[1]

    return step


def train_one_epoch(
    state: LoopState,
    loader: Iterable,
    epoch: int,
    epochs: int,
    *,
    position: EpochPosition | None = None,
    after_step: Callable[[int, Tally, float], Any] | None = None,
) -> tuple[Tally, float, float]:
    """Step 2 of :func:`fit`: one pass over ``loader`` (capped by ``max_train_batches``).

    With ``position`` (a mid-epoch checkpoint's) the pass continues from there:
    the loader's state, the running sums and the RNG states are restored.
    ``after_step(batches_done, tally, seconds)`` runs after every step (the
    loop's mid-epoch checkpoints and stop signals). Returns the running tally
    (loss and accuracy), the wall time of the pass and the learning rate of its
    last step.
    """
    from tqdm import tqdm

    from rocm_dl_guide.core.progress import enabled as bars_enabled

    opts, device = state.options, state.device
    show = bars_enabled(opts.progress) and state.ctx.is_main
    distributed.set_epoch(loader, epoch)
    total = num_batches(loader, opts.max_train_batches)
    done, tally, seconds_before = 0, Tally(device), 0.0
    if position is not None:
        loader.load_state_dict(position.loader)
        done, seconds_before = position.batches, position.seconds
        tally = Tally.restored(device, position.tally)
    batches = iter(loader)  # may draw a seed from the RNG: restore the states after it
    if position is not None:
        checkpoints.set_rng_state(position.rng, loader)
    bar = tqdm(
        total=total,
        initial=done,
        desc=f"epoch {epoch}/{epochs}",
        unit="batch",
        leave=False,
        disable=not show,
        dynamic_ncols=True,
    )
    state.model.train()
    lr = float(state.optimizer.param_groups[0]["lr"])
    start = time.perf_counter() - seconds_before
    try:
        for i, batch in enumerate(batches, start=done):
            if opts.max_train_batches is not None and i >= opts.max_train_batches:
                break
            x, y = split_batch(batch)
            x, y = to_device(x, device, opts.channels_last), y.to(device, non_blocking=True)
            lr = float(state.optimizer.param_groups[0]["lr"])
            logits, loss = train_step(state, x, y)
            state.step += 1
            if state.scheduler is not None and opts.scheduler_interval == "batch":
                state.scheduler.step()
            tally.add(logits, y, loss)
            bar.update(1)
            if show and (i % 10 == 0 or i + 1 == total):
                rate = tally.samples / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix(
                    {"loss": f"{tally.loss():.4f}", "samples/s": f"{rate:.0f}"}, refresh=False
                )
            if after_step is not None:
                after_step(i + 1, tally, time.perf_counter() - start)
        synchronize(device)
        seconds = time.perf_counter() - start
    finally:
        bar.close()
    tally.sum_over_ranks()
    if tally.samples == 0:
        raise ValueError("fit: the training loader produced no batches")
    return tally, seconds, lr


def _step_scheduler(state: LoopState, val_loss: float | None, train_loss: float) -> None:
    """The once-per-epoch scheduler step (``ReduceLROnPlateau`` gets a loss)."""
    if state.scheduler is None or state.options.scheduler_interval != "epoch":
        return
    if isinstance(state.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        state.scheduler.step(val_loss if val_loss is not None else train_loss)
    else:
        state.scheduler.step()


def _run_epoch(
    state: LoopState,
    train_loader,
    val_loader,
    epoch: int,
    epochs: int,
    checkpoint: Path | None,
    position: EpochPosition | None = None,
    after_step: Callable[[int, Tally, float], Any] | None = None,
) -> EpochMetrics:
    """Train one epoch, then evaluate and step the scheduler; returns its metrics."""
    opts = state.options
    started = time.perf_counter() - (position.seconds if position is not None else 0.0)
    tally, train_seconds, lr = train_one_epoch(
        state, train_loader, epoch, epochs, position=position, after_step=after_step
    )
    train_loss = tally.loss()
    if not math.isfinite(train_loss):
        raise FloatingPointError(
            f"training loss is {train_loss} in epoch {epoch}; lower the learning rate"
            + (f" (last good checkpoint: {checkpoint})" if checkpoint and epoch > 1 else "")
        )
    val_loss = val_acc = None
    if val_loader is not None:
        val_loss, val_acc = evaluate(
            state.model,
            val_loader,
            state.device,
            state.loss_fn,
            opts.max_val_batches,
            opts.amp,
            opts.channels_last,
        )
    _step_scheduler(state, val_loss, train_loss)
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


def _finish(state: LoopState, start: StartingPoint, history: list[EpochMetrics]) -> TrainResult:
    """The run's result; saves the final weights next to the checkpoint if asked to."""
    ctx = state.ctx
    result = TrainResult(
        history=history,
        device=str(state.device),
        checkpoint=start.checkpoint,
        resumed_from_epoch=start.epoch,
        resumed_from_step=start.step,
        world_size=ctx.world_size,
        backend=ctx.backend,
    )
    name = state.options.final_weights
    if name and start.checkpoint is not None:
        result.weights = start.checkpoint.parent / name
        weights = sharded.full_state_dict(state.module)  # collective for a sharded model
        if ctx.is_main:
            checkpoints.atomic_torch_save(weights, result.weights)
        distributed.barrier()
    return result


def default_device() -> torch.device:
    """The device the loop trains on when none is given: the GPU if any."""
    from rocm_dl_guide.core.device import pick

    return pick()


def _epoch_line(m: EpochMetrics, epochs: int, tag: str = "") -> str:
    return (
        f"epoch {m.epoch}/{epochs}: {runs.losses_text(asdict(m))}"
        f" | {m.images_per_second:.0f} samples/s, {m.seconds:.1f} s" + (f" [{tag}]" if tag else "")
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
    :func:`rocm_dl_guide.core.device.pick`, the GPU if any). The knobs are the
    fields of :class:`~rocm_dl_guide.training.setup.FitOptions`, as ``options=``
    or as keywords. Each epoch is :func:`train_one_epoch`, :func:`evaluate` on
    ``val_loader``, a scheduler step (``ReduceLROnPlateau`` gets the validation
    loss) and :func:`~rocm_dl_guide.training.resume.save_checkpoint`; a run with
    ``resume`` starts with :func:`~rocm_dl_guide.training.resume.restore_checkpoint`.
    ``log`` gets one line per epoch and notes (``None`` silences it);
    ``on_epoch_end(metrics)`` is called after the epoch's checkpoint is on disk,
    and returning ``True`` stops training.

    A non-finite training loss raises ``FloatingPointError`` before the epoch's
    checkpoint is written, so ``last.pt`` stays the last good epoch. A
    checkpoint already at ``epochs`` returns its history without training.
    Rank 0 holds a lock on ``checkpoint_dir`` for the whole run, so a second run
    pointed at the same folder fails at once
    (:class:`rocm_dl_guide.core.distributed.CheckpointInUseError`).

    Started by ``torchrun``, the same call trains data-parallel (see
    :mod:`rocm_dl_guide.core.distributed`): each process uses its local GPU (``device``
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
    else:
        train_loader = distributed.resumable_loader(train_loader)
    state = setup_loop(
        model, optimizer, ctx=ctx, options=opts, loss_fn=loss_fn, scheduler=scheduler, say=say
    )
    start = restore_checkpoint(state)
    # Signals ask for a clean stop only where there is a checkpoint to resume from.
    watching = preemption.watch() if start.checkpoint is not None else _no_signals()
    try:
        with watching as request:
            interruptions = Interruptions(state, start, train_loader, request)
            history = _train_epochs(
                state, start, train_loader, val_loader, epochs, on_epoch_end, interruptions
            )
        return _finish(state, start, history)
    finally:
        if start.lock is not None:
            start.lock.release()


@contextlib.contextmanager
def _no_signals():
    yield preemption.StopRequest()


def _train_epochs(
    state: LoopState,
    start: StartingPoint,
    train_loader,
    val_loader,
    epochs: int,
    on_epoch_end,
    interruptions: Interruptions,
) -> list[EpochMetrics]:
    """Epochs ``start.epoch + 1`` to ``epochs``, each checkpointed; the whole history."""
    say = state.say
    if start.epoch >= epochs:
        say(
            f"{files.shown(start.checkpoint)} is already at epoch {start.epoch} "
            f"(asked for {epochs}): "
            "not training"
        )
        return start.history
    position = start.position
    if position is not None:  # its RNG states are restored once the loader is positioned
        say(
            f"resuming from {files.shown(start.checkpoint)}: step {start.step}, inside epoch "
            f"{position.epoch} after {position.batches} batches ({start.epoch} of {epochs} "
            "epochs done)"
        )
    elif start.rng is not None:
        checkpoints.set_rng_state(start.rng, train_loader)
        say(f"resuming from {files.shown(start.checkpoint)}: epoch {start.epoch} of {epochs} done")
    history = list(start.history)
    for epoch in range(start.epoch + 1, epochs + 1):
        metrics = _run_epoch(
            state,
            train_loader,
            val_loader,
            epoch,
            epochs,
            start.checkpoint,
            position=position if position is not None and position.epoch == epoch else None,
            after_step=interruptions,
        )
        history.append(metrics)
        save_checkpoint(state, start, history, train_loader)
        say(_epoch_line(metrics, epochs, state.options.data_tag))
        if on_epoch_end is not None and on_epoch_end(metrics) is True:
            say(f"stopped after epoch {epoch} by on_epoch_end")
            break
        if epoch < epochs:
            interruptions.epoch_saved(history)
    return history
