"""Fully sharded data parallelism (FSDP2) and sharded checkpoints (DCP) for the shared loop.

With ``fit(..., fsdp=True)`` under torchrun, :func:`shard` applies PyTorch's
``fully_shard`` to each top-level block of the model that has parameters and
then to the model itself: every rank keeps ``1/world_size`` of each parameter,
gradient and optimizer state, and the full parameters of one block exist only
while that block runs. That is what lets a model train whose parameters and
optimizer state do not fit on one GPU.

Checkpoints then go through ``torch.distributed.checkpoint`` (DCP): every rank
writes its own shard (:func:`save`, one ``__RANK_0.distcp`` file each, plus a
``.metadata`` file saying which file holds which piece of which tensor), and
:func:`load` reads them back into whatever sharding the loading job has, so a
run saved by 2 ranks resumes on 1 or 4. The ``get_state_dict`` /
``set_state_dict`` helpers translate between the sharded model and optimizer
and the state dicts DCP reads and writes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from rocm_dl_guide.core import files

if TYPE_CHECKING:  # pragma: no cover
    import pandas


def shard(model: nn.Module, optimizer: torch.optim.Optimizer) -> nn.Module:
    """Apply ``fully_shard`` to ``model`` (in place) and re-point ``optimizer`` at the
    sharded parameters, keeping its parameter groups and their settings.

    The units sharded (and gathered) one at a time are ``model.fsdp_units()``
    where the model names them (each transformer block of
    :class:`rocm_dl_guide.lm.model.CausalLM`), else each child module; the
    root holds whatever is left.

    ``fully_shard`` replaces each parameter by a sharded one (a ``DTensor``), so
    an optimizer built before it would update tensors the model no longer uses;
    the usual advice is to build the optimizer afterwards, which this does for
    an optimizer that has not taken a step yet. Needs an initialised process group.
    """
    from torch.distributed.fsdp import fully_shard

    if any(optimizer.state.values()):
        raise ValueError("shard() needs an optimizer that has not taken a step yet")
    names = {id(p): n for n, p in model.named_parameters()}
    # A model may name its units (a transformer: each block); else each child is one.
    units = model.fsdp_units() if hasattr(model, "fsdp_units") else list(model.children())
    for unit in units:
        if any(p.requires_grad for p in unit.parameters()):
            fully_shard(unit)
    fully_shard(model)
    params = dict(model.named_parameters())
    for group in optimizer.param_groups:
        group["params"] = [params[names[id(p)]] for p in group["params"]]
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``fully_shard`` was applied to ``model``."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


STAGING_SUFFIX = ".partial"
"""A DCP folder is written as ``.NAME.partial`` and renamed to ``NAME`` when complete."""


def save(directory: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> Path:
    """Write the model and optimizer state, sharded as they are, into ``directory``.

    Collective: every rank must call it. An existing ``directory`` is replaced.
    The shards go into a hidden ``.NAME.partial`` folder next to it, renamed to
    ``directory`` once DCP has written every shard and the metadata, so a
    crash or a full disk never leaves a half-written ``directory``. A full
    disk raises :class:`~rocm_dl_guide.core.files.DiskFullError` on every rank
    (after rank 0 removed the partial folder), naming the shard folder and the
    earlier ones that are intact.
    """
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    directory = Path(directory)
    staging = directory.parent / f".{directory.name}{STAGING_SUFFIX}"
    main = not dist.is_initialized() or dist.get_rank() == 0
    if main:
        directory.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)  # left by a run killed while saving
    if dist.is_initialized():
        dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    try:
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(staging))
    except BaseException as exc:  # DCP's CheckpointException is a BaseException
        if main:
            shutil.rmtree(staging, ignore_errors=True)
        files.raise_if_disk_full(exc, directory, _earlier(directory), files.RESUME_ADVICE)
        raise
    if main:  # DCP's save ends once every rank's shard and the metadata are written
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
        files.fsync_dir(directory.parent)
    if dist.is_initialized():
        dist.barrier()
    return directory


def _earlier(directory: Path) -> str | None:
    """The complete DCP checkpoints next to ``directory`` that a failed save leaves intact."""
    kept = sorted(
        p.name
        for p in directory.parent.iterdir()
        if p != directory and not p.name.startswith(".") and (p / ".metadata").is_file()
    )
    if not kept:
        return None
    return f"the earlier sharded checkpoint(s) {', '.join(kept)} in {directory.parent} are intact"


def load(directory: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Read a checkpoint written by :func:`save` into ``model`` and ``optimizer``,
    resharding it for this job's world size (collective under torchrun)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(directory))
    set_state_dict(
        model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole (unsharded) model state on the CPU, e.g. for a plain weights file.

    For a sharded model this gathers every shard (collective: every rank must
    call it); for any other model it is the ordinary ``state_dict``.
    """
    if not is_sharded(model):
        return model.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)


def layout(directory: str | Path) -> pandas.DataFrame:
    """Which file of a DCP checkpoint holds which piece of which model tensor.

    One row per stored chunk of a ``model.*`` tensor: the tensor's name, its full
    shape, the chunk's offsets and size, and the file (``__R_0.distcp`` is what
    rank R wrote).
    """
    import pandas as pd
    import torch.distributed.checkpoint as dcp

    reader = dcp.FileSystemReader(str(directory))
    meta = reader.read_metadata()
    rows = []
    for index, info in meta.storage_data.items():
        if not index.fqn.startswith("model.") or index.offset is None:
            continue
        tensor_meta = meta.state_dict_metadata[index.fqn]
        chunk = tensor_meta.chunks[index.index] if index.index is not None else None
        rows.append(
            {
                "tensor": index.fqn.removeprefix("model."),
                "shape": tuple(tensor_meta.size),
                "offsets": tuple(index.offset),
                "chunk": tuple(chunk.sizes) if chunk is not None else None,
                "file": info.relative_path,
            }
        )
    return pd.DataFrame(rows).sort_values(["tensor", "offsets"], ignore_index=True)
