"""Setting up a run of the training loop: its knobs (:class:`FitOptions`), the
state every step of the loop shares (:class:`LoopState`), and :func:`setup_loop`,
which puts the model and the loss on the device, picks the precision
(:func:`autocast_dtype`) and wraps the model for DDP or FSDP when several
processes train together."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rocm_dl_guide.core import distributed
from rocm_dl_guide.core.device import cpu_has_native_bf16
from rocm_dl_guide.training import sharded


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``device`` (bfloat16 where supported, else float16), or
    ``None`` where autocast is unavailable."""
    if not torch.amp.is_autocast_available(device.type):
        return None
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "cpu":
        return torch.bfloat16
    return torch.float16


@dataclass(frozen=True)
class FitOptions:
    """The knobs of :func:`~rocm_dl_guide.training.train.fit` beyond the model, the data and the
    optimizer.

    Pass them to :func:`~rocm_dl_guide.training.train.fit` as keywords (``fit(..., amp=True)``)
    or as one object (``fit(..., options=FitOptions(amp=True))``); keywords override
    the object's fields.
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
    amp_dtype: str | None = None
    """With ``amp``: force ``"bfloat16"`` or ``"float16"`` (with a grad scaler)
    instead of the device's choice (:func:`autocast_dtype`)."""
    channels_last: bool = False
    """NHWC memory format for the model and 4-D inputs."""
    aux_logits_weight: float | None = None
    """Weight of the auxiliary head's loss for models that have one (Inception v3)."""
    progress: bool = True
    """A tqdm bar per epoch (only on a terminal, see :mod:`rocm_dl_guide.core.progress`)."""
    keep_best: bool = True
    """Also keep ``best.pt``: the weights of the epoch with the best validation accuracy."""
    scheduler_interval: str = "epoch"
    """Step the scheduler once per ``"epoch"`` or after every ``"batch"``."""
    final_weights: str | None = None
    """Save the trained weights under this file name in ``checkpoint_dir`` at the end."""
    fsdp: bool = False
    """Under torchrun: shard the model with FSDP2 instead of replicating it with DDP,
    and checkpoint through ``torch.distributed.checkpoint`` (see
    :mod:`rocm_dl_guide.training.sharded`)."""
    checkpoint_every: int | None = None
    """Also write ``last.pt`` every this many optimizer steps inside the epochs
    (the position in the epoch included), for epochs too long to lose."""
    data_tag: str = ""
    """Said at the end of every epoch line, in brackets: where the data are a
    stand-in (:func:`rocm_dl_guide.core.datasets.stand_in`), each accuracy says
    so on its own line."""

    def __post_init__(self) -> None:
        if self.scheduler_interval not in ("epoch", "batch"):
            raise ValueError("scheduler_interval must be 'epoch' or 'batch'")
        if self.resume and self.checkpoint_dir is None:
            raise ValueError("resume=True needs a checkpoint_dir")
        if self.amp_dtype not in (None, "bfloat16", "float16"):
            raise ValueError("amp_dtype must be None, 'bfloat16' or 'float16'")
        if self.checkpoint_every is not None:
            if self.checkpoint_every < 1:
                raise ValueError(
                    f"checkpoint_every must be at least 1, got {self.checkpoint_every}"
                )
            if self.checkpoint_dir is None:
                raise ValueError("checkpoint_every needs a checkpoint_dir")


@dataclass(kw_only=True)
class LoopState:
    """What every step of :func:`~rocm_dl_guide.training.train.fit` needs: the model and its
    optimisation state.

    Built by :func:`setup_loop`; its fields are keywords."""

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
    step: int = 0
    """Optimizer steps so far, counting those of the runs this one resumed."""


def loss_on(loss_fn: Callable | None, device: torch.device) -> Callable:
    loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss()
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
    return loss_fn


def data_parallel(model: nn.Module, ctx: distributed.Context, device: torch.device) -> nn.Module:
    """``model`` wrapped in ``DistributedDataParallel``: each rank keeps a whole
    replica, and ``backward()`` averages the gradients over the ranks (an
    all-reduce, overlapped with the backward pass), so every rank's optimizer
    takes the same step."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.local_rank] if device.type == "cuda" else None  # one GPU per process
    return DistributedDataParallel(model, device_ids=ids)


def setup_loop(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    ctx: distributed.Context,
    options: FitOptions,
    loss_fn: Callable | None = None,
    scheduler: Any = None,
    say: Callable[[str], Any] = lambda _msg: None,
) -> LoopState:
    """Move the model to the device, wrap it for data parallelism when several
    processes train together, and pick the precision: the set-up of a run."""
    device = ctx.device
    model.to(device)
    if options.channels_last:
        model.to(memory_format=torch.channels_last)
    amp_dtype = autocast_dtype(device) if options.amp else None
    if amp_dtype is not None and options.amp_dtype is not None:
        amp_dtype = getattr(torch, options.amp_dtype)
    if options.amp and amp_dtype is None:
        say(f"note: autocast is not available on {device}; training in float32")
    elif options.amp and device.type == "cpu":
        slow = "" if cpu_has_native_bf16() else "; this CPU has neither, so expect it much slower"
        say(
            "note: amp on the CPU uses bfloat16 autocast; it is only faster on CPUs "
            f"with native bf16 (AVX512-BF16/AMX){slow}"
        )
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    loss_fn = loss_on(loss_fn, device)
    trained = model
    if options.fsdp:
        if not ctx.distributed:
            raise ValueError(
                "fsdp=True needs several processes: start the run with torchrun "
                "(python -m rocm_dl_guide train EXAMPLE --nproc N --fsdp)"
            )
        sharded.shard(model, optimizer)
    elif ctx.distributed:
        trained = data_parallel(model, ctx, device)
    return LoopState(
        model=trained,
        optimizer=optimizer,
        loss_fn=loss_fn,
        scheduler=scheduler,
        device=device,
        amp_dtype=amp_dtype,
        scaler=scaler,
        options=options,
        say=say,
        ctx=ctx,
        module=model,
    )
