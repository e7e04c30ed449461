"""The guide's command line: ``python -m rocm_dl_guide COMMAND``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_dl_guide import __version__


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rocm_dl_guide import doctor

    text = source = None
    if args.rocminfo:
        path = Path(args.rocminfo)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            print(f"doctor: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        source = f"saved rocminfo output {path.name}"
    if not args.json:
        print(
            "Checking ROCm, the GPUs and the frameworks (each framework is imported in a "
            "separate process; this takes a few seconds)...",
            file=sys.stderr,
        )
    report = doctor.run(rocminfo_text=text, rocminfo_source=source, python=args.python)
    print(report.to_json() if args.json else report.to_text())
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from rocm_dl_guide import profiles

    try:
        current = profiles.current().name
    except profiles.ProfileError as exc:
        print(f"profiles: {exc} (from ${profiles.ENV_VAR})", file=sys.stderr)
        return 2
    for p in profiles.PROFILES.values():
        mark = "*" if p.name == current else " "
        print(f"{mark} {p.name:<6} {p.description}")
    print(f"\nSelect one with {profiles.ENV_VAR}=NAME (now: {current}).")
    return 0


def _cmd_compat(args: argparse.Namespace) -> int:
    from rocm_dl_guide import compat

    if args.framework == "gpus":
        table = compat.gpu_table()
    elif args.framework == "driver":
        table = compat.kernel_driver_table()
    else:
        table = compat.framework_table(args.framework)
    print(table.to_string(index=False))
    print("\nSources:")
    for key in sorted(set(table.get("Source", []))):
        src = compat.sources().get(key, {})
        print(f"  {key}: {src.get('title', '?')} <{src.get('url', '?')}>")
    return 0


# Training examples runnable from the command line:
# name -> (module, function, framework, help). Each function takes ``profile``
# and ``epochs`` (PyTorch ones also ``checkpoint_dir`` and ``resume``) and
# returns an object with a ``summary()`` line.
TRAINERS = {
    "mnist-pytorch": ("rocm_dl_guide.mnist", "train_pytorch", "pytorch", "MNIST CNN with PyTorch"),
    "mnist-tensorflow": ("rocm_dl_guide.mnist", "train_keras", "tensorflow", "MNIST with Keras"),
    "inception-v3": (
        "rocm_dl_guide.inception",
        "train",
        "pytorch",
        "fine-tune Inception v3 on tiny-imagenet-200",
    ),
    "cifar10": ("rocm_dl_guide.cifar10", "train", "pytorch", "custom CNN on CIFAR-10"),
    "fashion-mnist": (
        "rocm_dl_guide.fashion_mnist",
        "train",
        "tensorflow",
        "Keras classifier on Fashion-MNIST",
    ),
    "imdb": ("rocm_dl_guide.imdb", "train", "tensorflow", "Keras sentiment model on IMDB"),
}


def _cmd_train(args: argparse.Namespace) -> int:
    import importlib

    from rocm_dl_guide import profiles

    try:
        profile = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 2
    module, func, framework, _ = TRAINERS[args.example]
    kwargs = {"profile": profile.name, "epochs": args.epochs}
    pytorch_only = {
        "--resume": args.resume,
        "--checkpoint-dir": args.checkpoint_dir,
        "--amp": args.amp,
        "--channels-last": args.channels_last,
    }
    used = [flag for flag, value in pytorch_only.items() if value]
    if used and framework != "pytorch":
        print(f"train: {', '.join(used)}: only for the PyTorch examples", file=sys.stderr)
        return 2
    if framework == "pytorch":
        # PyTorch examples always checkpoint, so an interrupted run can be resumed.
        ckpt = Path(args.checkpoint_dir or Path("checkpoints") / args.example)
        kwargs.update(checkpoint_dir=ckpt, resume=args.resume)
        if not args.resume:
            print(
                f"checkpoints go to {ckpt} (continue an interrupted run with --resume)",
                file=sys.stderr,
            )
    if args.amp or args.channels_last:
        import inspect

        fn = getattr(importlib.import_module(module), func)
        accepted = inspect.signature(fn).parameters
        for flag, name in (("--amp", "amp"), ("--channels-last", "channels_last")):
            if getattr(args, name):
                if name not in accepted:
                    print(f"train: {args.example} does not support {flag}", file=sys.stderr)
                    return 2
                kwargs[name] = True
    print(f"Training {args.example} with the {profile.name} profile ...", file=sys.stderr)
    try:
        run = getattr(importlib.import_module(module), func)(**kwargs)
    except (ValueError, RuntimeError, OSError, FloatingPointError) as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 1
    print(run.summary())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rocm_dl_guide",
        description="Examples and checks from the executable ROCm Deep Learning Guide.",
    )
    parser.add_argument("--version", action="version", version=f"rocm_dl_guide {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("doctor", help="check ROCm, GPUs and frameworks against the guide's data")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--rocminfo",
        metavar="FILE",
        help="read saved `rocminfo` output from FILE instead of running rocminfo",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        help="probe the frameworks of another Python interpreter (default: this one)",
    )
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("profiles", help="list the run profiles and the one in force")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser("train", help="run one of the guide's training examples")
    p.add_argument(
        "example",
        choices=sorted(TRAINERS),
        help="; ".join(f"{name}: {TRAINERS[name][3]}" for name in sorted(TRAINERS)),
    )
    p.add_argument("--profile", help="smoke, gpu or full (default: $ROCM_DL_GUIDE_PROFILE or auto)")
    p.add_argument("--epochs", type=int, help="number of epochs (default: the profile's)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--checkpoint-dir", help="where checkpoints go (default: checkpoints/EXAMPLE)")
    p.add_argument(
        "--amp", action="store_true", help="mixed precision (torch.autocast; useful on a GPU)"
    )
    p.add_argument(
        "--channels-last", action="store_true", help="channels-last (NHWC) memory format"
    )
    p.set_defaults(func=_cmd_train)

    from rocm_dl_guide import datasets

    datasets.add_cli(sub)
    from rocm_dl_guide import inference

    inference.add_cli(sub)

    p = sub.add_parser("compat", help="print the sourced ROCm compatibility tables")
    p.add_argument(
        "framework",
        choices=["pytorch", "tensorflow", "onnxruntime", "migraphx", "gpus", "driver"],
        help="which table",
    )
    p.set_defaults(func=_cmd_compat)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
