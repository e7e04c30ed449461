"""The ``train`` command: run one of the guide's training examples, in this
process or, with ``--nproc N``, in N workers under torchrun."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rocm_dl_guide.cli.common import add_profile_args, positive_int, run_profile
from rocm_dl_guide.core import casestudies
from rocm_dl_guide.core.casestudies import CaseStudy
from rocm_dl_guide.core.preemption import EXIT_PREEMPTED, Preempted

# The command's flags that only some case studies support: flag -> the
# registry's name for it (rocm_dl_guide.core.casestudies.FLAGS), or None where every
# PyTorch case study has it (they all checkpoint).
_CASE_STUDY_FLAGS = {
    "--resume": None,
    "--checkpoint-dir": None,
    "--checkpoint-every": None,
    "--max-restarts": "nproc",
    "--nproc": "nproc",
    "--amp": "amp",
    "--channels-last": "channels_last",
    "--fsdp": "fsdp",
    "--qlora": "qlora",
    "--model": "model",
}


def _flags_used(args: argparse.Namespace) -> list[str]:
    values = {
        "--resume": args.resume,
        "--checkpoint-dir": args.checkpoint_dir,
        "--checkpoint-every": args.checkpoint_every,
        "--max-restarts": args.max_restarts,
        "--nproc": args.nproc is not None,
        "--amp": args.amp,
        "--channels-last": args.channels_last,
        "--fsdp": args.fsdp,
        "--qlora": args.qlora,
        "--model": args.model is not None,
    }
    return [flag for flag, value in values.items() if value]


def _unsupported(study: CaseStudy, args: argparse.Namespace) -> str | None:
    """Why a flag given on the command line does not apply to ``study``, else None."""
    used = _flags_used(args)
    if not study.checkpoints and used:
        return f"{', '.join(used)}: only for the PyTorch examples"
    for flag in used:
        name = _CASE_STUDY_FLAGS[flag]
        if name is not None and not study.supports(name):
            return f"{study.name} does not support {flag}"
    return None


def _train_kwargs(study: CaseStudy, args: argparse.Namespace, profile) -> dict:
    """The case study's keyword arguments from the flags (already checked)."""
    kwargs: dict = {"profile": profile, "epochs": args.epochs, "progress": not args.json}
    if study.checkpoints:
        # PyTorch examples always checkpoint, so an interrupted run can be resumed.
        ckpt = Path(args.checkpoint_dir or study.default_checkpoint_dir)
        kwargs.update(checkpoint_dir=ckpt, resume=args.resume)
        if args.checkpoint_every:
            kwargs["checkpoint_every"] = args.checkpoint_every
    for name in ("amp", "channels_last", "fsdp", "qlora"):
        if getattr(args, name):
            kwargs[name] = True
    if args.model is not None:
        kwargs["base"] = args.model
    return kwargs


def _checkpoint_dir_in_use(args: argparse.Namespace) -> str | None:
    """Why a PyTorch example's checkpoint folder cannot be used now (another run
    holds its lock), else None.

    Asked before anything heavy is loaded or any worker is launched, so a second
    job on the same folder is refused at once; the run itself takes the lock
    again for its whole length (:func:`train.fit`).
    """
    from rocm_dl_guide.core import distributed

    if not casestudies.get(args.example).checkpoints:
        return None
    folder = Path(args.checkpoint_dir or casestudies.get(args.example).default_checkpoint_dir)
    if not (folder / distributed.LOCK_NAME).exists():
        return None  # nobody has ever locked it: nothing to ask, nothing created
    try:
        distributed.lock_checkpoint_dir(folder).release()
    except distributed.CheckpointInUseError as exc:
        return str(exc)
    return None


def _launch_workers(args: argparse.Namespace, argv: list[str]) -> int:
    """Re-run this very command in ``--nproc`` workers under torchrun's elastic agent."""
    from rocm_dl_guide.core import distributed

    if args.nproc < 1:
        print("train: --nproc must be at least 1", file=sys.stderr)
        return 2
    worker_argv = _without_flags(argv, {"--nproc": True, "--max-restarts": True})
    restarts = args.max_restarts or 0
    print(
        f"Launching {args.nproc} workers with torchrun (max restarts {restarts}) ...",
        file=sys.stderr,
    )
    module_args = ["rocm_dl_guide", *worker_argv]
    code = distributed.launch(module_args, args.nproc, max_restarts=restarts)
    if code == EXIT_PREEMPTED:
        print(f"train: {_saved_position(args)}", file=sys.stderr)
    return code


def _checkpoint_path(args: argparse.Namespace) -> Path:
    from rocm_dl_guide.training import checkpoints

    folder = Path(args.checkpoint_dir or casestudies.get(args.example).default_checkpoint_dir)
    return folder / checkpoints.CHECKPOINT_NAME


def _saved_position(args: argparse.Namespace) -> str:
    """What the workers left after torchrun stopped them on a signal: the step in ``last.pt``."""
    from rocm_dl_guide.core import files
    from rocm_dl_guide.training import checkpoints

    path = _checkpoint_path(args)
    try:
        ckpt = checkpoints.read_checkpoint(path)
    except checkpoints.CheckpointError as exc:
        return f"stopped by a signal; {exc}"
    where = ckpt.get("in_epoch")
    inside = (
        f"epoch {where['epoch']}, batch {where['batches']}"
        if where
        else f"end of epoch {ckpt['epoch']}"
    )
    return (
        f"stopped by a signal; the workers saved step {ckpt.get('step', 0)} ({inside}) in "
        f"{files.shown(path)}. Run the same command with --resume to continue from there."
    )


def _without_flags(argv: list[str], flags: dict[str, bool]) -> list[str]:
    """``argv`` without the given flags (``True``: the flag takes a value)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in flags:
            skip = flags[name] and "=" not in arg
            continue
        out.append(arg)
    return out


def _cmd_train(args: argparse.Namespace) -> int:
    from rocm_dl_guide.core import distributed, files, runs

    study = casestudies.get(args.example)
    why_not = _unsupported(study, args)
    if why_not:
        print(f"train: {why_not}", file=sys.stderr)
        return 2
    if not distributed.launched_by_torchrun():
        busy = _checkpoint_dir_in_use(args)
        if busy:
            print(f"train: {busy}", file=sys.stderr)
            return 1
    if args.nproc is not None and not distributed.launched_by_torchrun():
        return _launch_workers(args, args.argv)
    profile = run_profile("train", args.profile)
    kwargs = _train_kwargs(study, args, profile)
    main = not distributed.launched_by_torchrun() or os.environ.get("RANK") == "0"
    if main and "checkpoint_dir" in kwargs and not args.resume:
        ckpt = kwargs["checkpoint_dir"]
        print(
            f"checkpoints go to {files.shown(ckpt)} (continue an interrupted run with --resume)",
            file=sys.stderr,
        )
    if main:
        print(
            f"Training {args.example} with the {profile.name} profile, "
            f"{study.data_line(profile)} ...",
            file=sys.stderr,
        )
    try:
        run = study.train_function()(**kwargs)
    except Preempted as exc:
        if main:
            print(f"train: {exc}", file=sys.stderr)
        return EXIT_PREEMPTED
    except (ValueError, RuntimeError, OSError, FloatingPointError) as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 1
    finally:
        if distributed.active():
            distributed.shutdown()
    if main:
        record = runs.run_record(args.example, run, profile.data_source)
        print(json.dumps(record) if args.json else run.summary())
    return 0


def register(sub) -> None:
    """``train EXAMPLE``."""
    p = sub.add_parser("train", help="run one of the guide's training examples")
    p.add_argument(
        "example",
        choices=list(casestudies.REGISTRY),
        help="; ".join(f"{cs.name}: {cs.summary}" for cs in casestudies.REGISTRY.values()),
    )
    add_profile_args(p)
    p.add_argument("--epochs", type=int, help="number of epochs (default: the profile's)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--checkpoint-dir", help="where checkpoints go (default: checkpoints/EXAMPLE)")
    p.add_argument(
        "--checkpoint-every",
        type=positive_int,
        metavar="N",
        help="also checkpoint every N optimizer steps inside the epochs (long epochs). On "
        f"SIGTERM or Ctrl-C the run always checkpoints where it is and exits {EXIT_PREEMPTED}: "
        "run it again with --resume",
    )
    p.add_argument(
        "--amp", action="store_true", help="mixed precision (torch.autocast; useful on a GPU)"
    )
    p.add_argument(
        "--channels-last", action="store_true", help="channels-last (NHWC) memory format"
    )
    p.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="train data-parallel in N local worker processes, launched with torchrun "
        "(nccl on GPUs, gloo on the CPU)",
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        metavar="R",
        help="with --nproc: let torchrun restart the workers up to R times after a failure; "
        "they resume from the last checkpoint",
    )
    p.add_argument(
        "--fsdp",
        action="store_true",
        help="with --nproc: shard the model with FSDP2 instead of replicating it (DDP); "
        "checkpoints become sharded (torch.distributed.checkpoint)",
    )
    p.add_argument(
        "--qlora",
        action="store_true",
        help="lora: hold the frozen base model in 4 bits (bitsandbytes NF4), as QLoRA does",
    )
    p.add_argument(
        "--model",
        metavar="FOLDER",
        help="dpo, grpo: the transformers model folder to start from (default: the lora "
        "example's model, its adapter merged; fine-tuned first if missing)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object (the last line of standard output)",
    )
    p.set_defaults(func=_cmd_train)
