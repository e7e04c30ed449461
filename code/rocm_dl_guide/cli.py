"""The guide's command line: ``python -m rocm_dl_guide COMMAND``.

The only place that builds the argparse parser and turns exceptions into
messages and exit codes: the modules behind the commands (``doctor``,
``datasets``, ``inference``, ``bench`` ...) expose plain functions that return
values or raise, and each ``_cmd_*`` handler here prints their result, or one
line on stderr, and returns the exit code (0 success, 1 failure, 2 a usage
error such as an unknown name).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rocm_dl_guide import __version__
from rocm_dl_guide.messages import one_line


def _fail(command: str, exc: BaseException | str, code: int = 1) -> int:
    """Print ``command: message`` on one line on stderr; return ``code``."""
    print(f"{command}: {one_line(exc)}", file=sys.stderr)
    return code


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rocm_dl_guide import doctor, snapshot

    if args.snapshot:
        if args.rocminfo or args.python:
            print(
                "doctor: --snapshot replays a snapshot as it is: no --rocminfo or --python",
                file=sys.stderr,
            )
            return 2
        try:
            report = doctor.from_snapshot(args.snapshot)
        except snapshot.SnapshotError as exc:
            print(f"doctor: {exc}", file=sys.stderr)
            return 2
        print(report.to_json() if args.json else report.to_text())
        return 0
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
    if args.collect:
        try:
            path = snapshot.write(args.collect, report.system)
        except OSError as exc:
            print(f"doctor: cannot write {args.collect}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(
            f"snapshot written to {path} (replay it with: doctor --snapshot {path})",
            file=sys.stderr,
        )
    print(report.to_json() if args.json else report.to_text())
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from rocm_dl_guide import profiles

    try:
        current = profiles.current().name
    except profiles.ProfileError as exc:
        where = f"${profiles.ENV_VAR} or ${profiles.DATA_SOURCE_VAR}"
        print(f"profiles: {exc} (from {where})", file=sys.stderr)
        return 2
    for p in profiles.PROFILES.values():
        mark = "*" if p.name == current else " "
        print(f"{mark} {p.name:<6} {p.description}")
    print(f"\nSelect one with {profiles.ENV_VAR}=NAME (now: {current}).")
    print(
        f"Data: {profiles.current().source_note()}; choose with "
        f"{profiles.DATA_SOURCE_VAR}=real|fixtures or --data-source."
    )
    return 0


def _cmd_compat(args: argparse.Namespace) -> int:
    from rocm_dl_guide import compat

    if args.framework == "gpus":
        table = compat.gpu_table()
    elif args.framework == "apus":
        table = compat.apu_table()
    elif args.framework == "driver":
        table = compat.kernel_driver_table()
    else:
        table = compat.framework_table(args.framework)
    print(table.to_string(index=False))
    keys = set(table.get("Source", []))
    if args.framework in compat.FRAMEWORKS:
        # The rows' other source fields: the framework's field source and the
        # sources of disagreeing values (shown inside the cells).
        for rocm in table["ROCm"]:
            rel = compat.find_release(rocm) or {}
            keys.add(compat.field_source(rel, args.framework))
            keys.update(a.get("source") for a in compat.alternatives(rel, args.framework))
    print("\nSources:")
    for key in sorted(k for k in keys if k):
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


def _train_kwargs(args: argparse.Namespace, profile) -> dict | str:
    """The case study's keyword arguments from the flags, or an error message."""
    import importlib
    import inspect

    module, func, framework, _ = TRAINERS[args.example]
    kwargs: dict = {"profile": profile, "epochs": args.epochs}
    pytorch_only = {
        "--resume": args.resume,
        "--checkpoint-dir": args.checkpoint_dir,
        "--amp": args.amp,
        "--channels-last": args.channels_last,
        "--nproc": args.nproc is not None,
        "--max-restarts": args.max_restarts,
        "--fsdp": args.fsdp,
    }
    used = [flag for flag, value in pytorch_only.items() if value]
    if used and framework != "pytorch":
        return f"{', '.join(used)}: only for the PyTorch examples"
    if framework == "pytorch":
        # PyTorch examples always checkpoint, so an interrupted run can be resumed.
        ckpt = Path(args.checkpoint_dir or Path("checkpoints") / args.example)
        kwargs.update(checkpoint_dir=ckpt, resume=args.resume)
    accepted = inspect.signature(getattr(importlib.import_module(module), func)).parameters
    for flag, name in (("--amp", "amp"), ("--channels-last", "channels_last"), ("--fsdp", "fsdp")):
        if getattr(args, name):
            if name not in accepted:
                return f"{args.example} does not support {flag}"
            kwargs[name] = True
    if args.json and "progress" in accepted:
        kwargs["progress"] = False
    return kwargs


def _checkpoint_dir_in_use(args: argparse.Namespace) -> str | None:
    """Why a PyTorch example's checkpoint folder cannot be used now (another run
    holds its lock), else None.

    Asked before anything heavy is loaded or any worker is launched, so a second
    job on the same folder is refused at once; the run itself takes the lock
    again for its whole length (:func:`train.fit`).
    """
    from rocm_dl_guide import distributed

    if TRAINERS[args.example][2] != "pytorch":
        return None
    folder = Path(args.checkpoint_dir or Path("checkpoints") / args.example)
    if not (folder / distributed.LOCK_NAME).exists():
        return None  # nobody has ever locked it: nothing to ask, nothing created
    try:
        distributed.lock_checkpoint_dir(folder).release()
    except distributed.CheckpointInUseError as exc:
        return str(exc)
    return None


def _launch_workers(args: argparse.Namespace, argv: list[str]) -> int:
    """Re-run this very command in ``--nproc`` workers under torchrun's elastic agent."""
    from rocm_dl_guide import distributed

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
    return distributed.launch(module_args, args.nproc, max_restarts=restarts)


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
    import importlib

    from rocm_dl_guide import distributed, profiles, runs

    if not distributed.launched_by_torchrun():
        busy = _checkpoint_dir_in_use(args)
        if busy:
            print(f"train: {busy}", file=sys.stderr)
            return 1
    if args.nproc is not None and not distributed.launched_by_torchrun():
        if TRAINERS[args.example][2] != "pytorch":
            print("train: --nproc: only for the PyTorch examples", file=sys.stderr)
            return 2
        return _launch_workers(args, args.argv)
    try:
        profile = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return 2
    kwargs = _train_kwargs(args, profile)
    if isinstance(kwargs, str):
        print(f"train: {kwargs}", file=sys.stderr)
        return 2
    main = not distributed.launched_by_torchrun() or os.environ.get("RANK") == "0"
    if main and "checkpoint_dir" in kwargs and not args.resume:
        ckpt = kwargs["checkpoint_dir"]
        print(
            f"checkpoints go to {ckpt} (continue an interrupted run with --resume)", file=sys.stderr
        )
    if main:
        print(
            f"Training {args.example} with the {profile.name} profile, {profile.source_note()} ...",
            file=sys.stderr,
        )
    module, func, _, _ = TRAINERS[args.example]
    try:
        run = getattr(importlib.import_module(module), func)(**kwargs)
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


# --------------------------------------------------------------------------- data


def _cmd_data_list(args: argparse.Namespace) -> int:
    from rocm_dl_guide import datasets

    entries = datasets.cached()
    print(f"Data cache: {datasets.cache_dir()}  (set ${datasets.ENV_VAR} to move it)")
    if entries:
        print(f"{'NAME':<18} {'KIND':<8} {'SIZE':>9}  PATH")
        for e in entries:
            size = datasets.human_size(e["size"])
            print(f"{e['name']:<18} {e['kind']:<8} {size:>9}  {e['path']}")
    else:
        print("Nothing cached yet.")
    have_real = {e["name"] for e in entries if e["kind"] == "real"}
    missing = [n for n in datasets.REGISTRY if n not in have_real]
    if missing:
        print("\nReal data not downloaded (python -m rocm_dl_guide data fetch NAME):")
        for n in missing:
            spec = datasets.REGISTRY[n]
            print(f"  {n:<18} {datasets.human_size(spec.download_size):>9}  {spec.title}")
    return 0


def _data_command(command: str, action, expected: tuple[type[BaseException], ...]) -> int:
    """Run ``action()`` (which returns a prepared root) for ``data fetch``/``data import``.

    Prints the root (exit 0); an unknown data-set name is exit 2, the
    ``expected`` errors exit 1, anything else exit 1 with its type named; always
    one line on stderr, never a traceback.
    """
    from rocm_dl_guide import datasets

    try:
        root = action()
    except datasets.UnknownDatasetError as exc:
        return _fail(command, exc, 2)
    except expected as exc:
        return _fail(command, exc)
    except Exception as exc:  # noqa: BLE001 - a command line prints one line, not a traceback
        return _fail(command, f"unexpected {type(exc).__name__}: {one_line(exc)}")
    print(root)
    return 0


def _cmd_data_fetch(args: argparse.Namespace) -> int:
    from rocm_dl_guide import datasets

    expected = (
        datasets.DataUnavailableError,
        datasets.ChecksumError,
        datasets.ArchiveError,
        OSError,
    )
    return _data_command("data fetch", lambda: datasets.fetch(args.name), expected)


def _cmd_data_import(args: argparse.Namespace) -> int:
    from rocm_dl_guide import datasets

    expected = (datasets.ChecksumError, datasets.ArchiveError, OSError)
    return _data_command(
        "data import", lambda: datasets.import_archive(args.name, Path(args.archive)), expected
    )


# --------------------------------------------------------------------------- inference


def _at_least(command: str, checks: tuple[tuple[str, int | None, int], ...]) -> int | None:
    """Exit code 2 with a message for the first ``(flag, value, least)`` below its least."""
    for flag, value, least in checks:
        if value is not None and value < least:
            print(f"{command}: {flag} must be at least {least}, got {value}", file=sys.stderr)
            return 2
    return None


def _cmd_infer(args: argparse.Namespace) -> int:
    from rocm_dl_guide import inception, inference

    try:
        backend = inference.select_backend(args.backend)
    except inference.BackendError as exc:
        return _fail("infer", exc, 2)
    flags = (("--top", args.top, 1), ("--size", args.size, 1), ("--threads", args.threads, 1))
    if (code := _at_least("infer", flags)) is not None:
        return code
    try:
        compiled, table = inference.classify(
            args.model, args.image, backend, args.top, args.size, args.threads
        )
    except (inference.InferenceError, inception.ImageError, OSError, RuntimeError) as exc:
        return _fail("infer", exc)
    if args.json:
        record = {
            "backend": compiled.backend,
            "provider": compiled.provider,
            "device": compiled.device,
            "model": str(Path(args.model)),
            "image": str(args.image),
            "top": table.to_dict(orient="records"),
        }
        print(json.dumps(record))
        return 0
    print(compiled.summary())
    for row in table.itertuples():
        print(f"{row.rank}. {row.category:<30} {row.probability:7.2%}  (class {row.index})")
    return 0


def _batches(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected batch sizes like 1,8,32, got {text!r}")
    return values


def _cmd_bench_precision(args: argparse.Namespace) -> int:
    from rocm_dl_guide import inference, precision, profiles

    try:
        prof = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        return _fail("bench", exc, 2)
    if args.tuning or args.batch != 1 or args.backend != "auto":
        return _fail(
            "bench",
            "bench precision runs every backend and precision: use --batches, "
            "not --batch, --backend or --tuning",
            2,
        )
    flags = (
        ("--iterations", args.iterations, 1),
        ("--warmup", args.warmup, 0),
        ("--threads", args.threads, 1),
    )
    if (code := _at_least("bench", flags)) is not None:
        return code
    runs = None
    if args.iterations is not None or args.warmup is not None:
        runs = (args.warmup if args.warmup is not None else 1, args.iterations or 10)
    if not args.json:
        print(
            f"Training the CIFAR-10 network, quantizing, then timing Inception v3 at "
            f"batch {', '.join(map(str, args.batches))} (profile {prof.name}) ...",
            file=sys.stderr,
        )
    try:
        result = precision.run(
            batches=args.batches,
            profile=prof,
            threads=args.threads,
            runs=runs,
            show_progress=not args.json,
            emulated=args.emulated,
        )
    except (inference.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return _fail("bench", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _cmd_bench_conv(args: argparse.Namespace) -> int:
    from rocm_dl_guide import profiles, tuning

    try:
        prof = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        return _fail("bench", exc, 2)
    if args.tuning or args.backend != "auto" or args.threads is not None:
        return _fail(
            "bench",
            "bench conv times PyTorch itself: --backend, --tuning and --threads "
            "are for 'bench inference'",
            2,
        )
    flags = (
        ("--batch", args.batch, 1),
        ("--iterations", args.iterations, 1),
        ("--warmup", args.warmup, 0),
    )
    if (code := _at_least("bench", flags)) is not None:
        return code
    try:
        baseline = tuning.read_baseline(args.baseline) if args.baseline else None
        given = any(a == "--batch" or a.startswith("--batch=") for a in args.argv)
        batch = args.batch if given else None
        result = tuning.conv_workload(
            batch=batch,
            profile=prof,
            warmup=args.warmup,
            iterations=args.iterations,
            baseline=baseline,
        )
    except (OSError, RuntimeError, ValueError) as exc:
        return _fail("bench", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from rocm_dl_guide import bench, inference, profiles

    if args.what == "precision":
        return _cmd_bench_precision(args)
    if args.emulated or args.batches != (1, 8, 32):
        return _fail("bench", "--batches and --emulated are for 'bench precision'", 2)
    if args.what == "conv":
        return _cmd_bench_conv(args)
    if args.baseline:
        return _fail("bench", "--baseline is for 'bench conv'", 2)
    try:
        name = inference.select_backend(args.backend)
        prof = profiles.current(args.profile)
    except (inference.BackendError, profiles.ProfileError) as exc:
        return _fail("bench", exc, 2)
    flags = (
        ("--batch", args.batch, 1),
        ("--iterations", args.iterations, 1),
        ("--warmup", args.warmup, 0),
        ("--threads", args.threads, 1),
    )
    if (code := _at_least("bench", flags)) is not None:
        return code
    if not args.json:
        print(
            f"Exporting Inception v3 and timing batch {args.batch} (profile {prof.name}) ...",
            file=sys.stderr,
        )
    try:
        result = bench.run(
            batch=args.batch,
            iterations=args.iterations,
            warmup=args.warmup,
            backend=name,
            tuning=args.tuning,
            threads=args.threads,
            profile=prof,
        )
    except (inference.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return _fail("bench", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from rocm_dl_guide import inference, profiles, profiling

    if (code := _at_least("profile", (("--steps", args.steps, 1),))) is not None:
        return code
    try:
        prof = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        return _fail("profile", exc, 2)
    if not args.json:
        print(
            f"Profiling {args.steps} {args.kind} step(s) with torch.profiler "
            f"(profile {prof.name}) ...",
            file=sys.stderr,
        )
    try:
        result = profiling.profile_step(
            args.kind, steps=args.steps, profile=prof, folder=args.output
        )
    except (inference.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return _fail("profile", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from rocm_dl_guide import inference, profiles

    try:
        prof = profiles.current(args.profile)
    except profiles.ProfileError as exc:
        return _fail("export", exc, 2)
    try:
        files = inference.write_cpp_inputs(args.output, prof)
    except (inference.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return _fail("export", exc)
    for key, path in files.items():
        print(f"{key:<9}{path}")
    return 0


def _cmd_check_sources(args: argparse.Namespace) -> int:
    """Exit 0: every source current; 1: something is stale; 2: a malformed
    $ROCM_DL_GUIDE_SOURCES_BASE or --timeout; 3: the network is unreachable."""
    from rocm_dl_guide import freshness

    if args.timeout <= 0:
        return _fail("check-sources", "--timeout must be positive", 2)
    try:
        rewrite = freshness.rewrites_from_env()
    except ValueError as exc:
        return _fail("check-sources", exc, 2)
    print("Checking the compatibility data's sources (needs the network) ...", file=sys.stderr)
    try:
        report = freshness.check_sources(rewrite=rewrite, timeout=args.timeout)
    except freshness.NetworkUnavailable as exc:
        return _fail("check-sources", exc, 3)
    for note in report.notes:
        print(f"note: {note.key}: {note.detail}" + (f" <{note.url}>" if note.url else ""))
    if report.current:
        print(f"all {report.sources} sources current")
        return 0
    print(f"STALE: {len(report.stale)} problem(s) in the compatibility data's sources:")
    for f in report.stale:
        print(f"  [{f.kind}] {f.key}  {f.url}\n      {f.detail}")
    return 1


def _cmd_selfcheck(args: argparse.Namespace) -> int:
    """Exit 0: every check passed (or was skipped with a reason); 1: a check failed
    or the record was refused; 2: a usage error; 3: --gpu and PyTorch sees no GPU."""
    from rocm_dl_guide import selfcheck

    only = [name.strip() for name in args.only.split(",")] if args.only else None
    if args.record and not args.gpu:
        return _fail("selfcheck", "--record needs --gpu: the record vouches for a GPU run", 2)
    if args.preflight:
        try:
            device = selfcheck.preflight(args.gpu)
        except selfcheck.NoGPUError as exc:
            return _fail("selfcheck --gpu" if args.gpu else "selfcheck", exc, 3)
        print(f"selfcheck: {selfcheck.device_facts(device)['name']} is usable", file=sys.stderr)
        return 0
    try:
        report = selfcheck.run(
            args.gpu,
            args.report,
            steps=args.steps,
            only=only,
            log=lambda line: print(line, file=sys.stderr),
        )
    except selfcheck.NoGPUError as exc:
        return _fail("selfcheck --gpu", exc, 3)
    except ValueError as exc:
        return _fail("selfcheck", exc, 2)
    json_path, text_path = report.write(args.report)
    print(json.dumps(report.to_dict(), default=str) if args.json else report.summary())
    print(f"report: {json_path} and {text_path}", file=sys.stderr)
    if args.record:
        try:
            path = selfcheck.write_record(report)
        except selfcheck.RecordError as exc:
            return _fail("selfcheck --record", exc)
        print(f"verification record written to {path}", file=sys.stderr)
    return 0 if report.passed else 1


# --------------------------------------------------------------------------- the parser

PROFILE_HELP = "smoke, gpu or full (default: $ROCM_DL_GUIDE_PROFILE or auto)"
DATA_SOURCE_HELP = (
    "real (real data sets, pretrained weights; downloads) or fixtures (generated offline "
    "fixtures, random weights); default: $ROCM_DL_GUIDE_DATA_SOURCE or the profile's own"
)


def _add_profile_args(p) -> None:
    """``--profile`` and ``--data-source``, for the commands that load data or weights."""
    p.add_argument("--profile", help=PROFILE_HELP)
    p.add_argument("--data-source", choices=("real", "fixtures"), help=DATA_SOURCE_HELP)


def _add_doctor_and_profiles(sub) -> None:
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
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--collect",
        metavar="FILE",
        help="also write everything the checks read to FILE (JSON), to attach to a bug report",
    )
    group.add_argument(
        "--snapshot",
        metavar="FILE",
        help="run every check on a snapshot written by --collect instead of on this machine",
    )
    p.set_defaults(func=_cmd_doctor)

    p = sub.add_parser("profiles", help="list the run profiles and the one in force")
    p.set_defaults(func=_cmd_profiles)


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="run one of the guide's training examples")
    p.add_argument(
        "example",
        choices=sorted(TRAINERS),
        help="; ".join(f"{name}: {TRAINERS[name][3]}" for name in sorted(TRAINERS)),
    )
    _add_profile_args(p)
    p.add_argument("--epochs", type=int, help="number of epochs (default: the profile's)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--checkpoint-dir", help="where checkpoints go (default: checkpoints/EXAMPLE)")
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
        "--json",
        action="store_true",
        help="print the result as one JSON object (the last line of standard output)",
    )
    p.set_defaults(func=_cmd_train)


def _add_data(sub) -> None:
    """``data {list,fetch,import}``: errors are one line on stderr (exit 1, or 2 for an
    unknown data-set name); ``data`` alone prints its help and exits 2."""
    from rocm_dl_guide import datasets

    names = ", ".join(datasets.REGISTRY)
    parser = sub.add_parser(
        "data",
        help="list, download or import the guide's data sets",
        description="The guide's data sets: list the cache, download and verify a real data "
        f"set, or import one downloaded elsewhere. Cache: ${datasets.ENV_VAR} or the OS cache.",
    )
    data_sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    p = data_sub.add_parser("list", help="the cache directory and the data sets in it")
    p.set_defaults(func=_cmd_data_list)

    p = data_sub.add_parser("fetch", help="download, verify and extract a real data set")
    p.add_argument("name", metavar="NAME", help=f"one of: {names}")
    p.set_defaults(func=_cmd_data_fetch)

    p = data_sub.add_parser(
        "import", help="install a data set from a file downloaded elsewhere (no network)"
    )
    p.add_argument("name", metavar="NAME", help=f"one of: {names}")
    p.add_argument(
        "archive",
        metavar="ARCHIVE",
        help="the upstream archive (for mnist/fashion-mnist: a directory or archive holding "
        "the four .gz files)",
    )
    p.set_defaults(func=_cmd_data_import)

    def no_subcommand(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    parser.set_defaults(func=no_subcommand)


def _add_infer(sub) -> None:
    from rocm_dl_guide.inference import BACKEND_CHOICES

    backends = ", ".join(BACKEND_CHOICES)
    p = sub.add_parser(
        "infer",
        help="classify one image with a compiled model (MIGraphX or ONNX Runtime)",
        description="Compile an ONNX model (or load a saved .mxr) and print the image's top "
        "classes.",
    )
    p.add_argument("--model", required=True, metavar="FILE", help=".onnx or .mxr model file")
    p.add_argument("--image", required=True, metavar="FILE", help="an image file (JPEG, PNG ...)")
    p.add_argument("--backend", default="auto", metavar="NAME", help=f"one of {backends}")
    p.add_argument("--top", type=int, default=5, help="how many classes to print (default 5)")
    p.add_argument(
        "--size", type=int, help="resize/crop the image to SIZE (default: the model's input)"
    )
    p.add_argument("--threads", type=int, help="CPU threads for ONNX Runtime (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_infer)


def _add_bench_and_export(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="time PyTorch eager against the compiled backend (MIGraphX or ONNX Runtime)",
        description="Median latency of Inception v3 inference after warm-up: PyTorch eager "
        "against the compiled backend, measured side by side.",
    )
    p.add_argument(
        "what",
        choices=["inference", "precision", "conv"],
        help="inference: eager against the compiled backend; precision: fp32, bf16, "
        "int8, fp16 and torch.compile side by side, with agreement on a trained model; "
        "conv: a PyTorch convolution workload under the MIOpen settings in force "
        "(MIOPEN_FIND_ENFORCE, MIOPEN_USER_DB_PATH)",
    )
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument(
        "--batches",
        type=_batches,
        default=(1, 8, 32),
        metavar="N,N,...",
        help="batch sizes for 'precision' (default 1,8,32)",
    )
    p.add_argument(
        "--emulated",
        action="store_true",
        help="'precision': also run bf16/fp16 on a CPU without instructions for them",
    )
    p.add_argument("--iterations", type=int, help="timed runs (default: the profile's)")
    p.add_argument("--warmup", type=int, help="untimed warm-up runs (default: the profile's)")
    p.add_argument(
        "--backend", default="auto", metavar="NAME", help="auto, migraphx or onnxruntime"
    )
    p.add_argument("--threads", type=int, help="CPU threads for both runtimes (default: all)")
    p.add_argument("--tuning", action="store_true", help="also time untuned against tuned")
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help="'conv': the output of an earlier 'bench conv --json' run to compare with",
    )
    _add_profile_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser(
        "profile",
        help="torch.profiler on a training or an inference step: top operators, Chrome trace",
        description="Run a few steps of a case study under torch.profiler (one warm-up "
        "step first): 'training' profiles the shared loop's step on the CIFAR-10 network, "
        "'inference' an eager forward pass of Inception v3. Prints the operators with the "
        "most self time per step and writes a Chrome trace (trace.json) to the run folder.",
    )
    p.add_argument("kind", choices=["training", "inference"], help="which step to profile")
    p.add_argument("--steps", type=int, default=3, help="recorded steps (default 3)")
    p.add_argument(
        "--output", metavar="DIR", help="folder for trace.json (default: the run folder)"
    )
    _add_profile_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_profile)

    p = sub.add_parser(
        "export",
        help="export Inception v3 to ONNX with an input tensor for the C++ example",
        description="Write inception_v3.onnx, input.bin (the preprocessed sample photo, "
        "float32 1x3x299x299) and expected.bin (PyTorch's logits, float32 1x1000) into DIR.",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="directory to write into")
    _add_profile_args(p)
    p.set_defaults(func=_cmd_export)


def _add_compat(sub) -> None:
    p = sub.add_parser("compat", help="print the sourced ROCm compatibility tables")
    p.add_argument(
        "framework",
        choices=["pytorch", "tensorflow", "onnxruntime", "migraphx", "gpus", "apus", "driver"],
        help="which table",
    )
    p.set_defaults(func=_cmd_compat)


def _add_check_sources(sub) -> None:
    p = sub.add_parser(
        "check-sources",
        help="check that the compatibility data's sources still say what it cites (network)",
        description="Fetch every source the compatibility data cites and check its recorded "
        "facts; look for ROCm releases, rocm/pytorch tags and PyTorch ROCm wheel indexes "
        "newer than the data knows. Exit 0 when current, 1 when stale, 3 when offline. "
        "URL prefixes can be redirected with $ROCM_DL_GUIDE_SOURCES_BASE (a JSON object).",
    )
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per request (default 20)")
    p.set_defaults(func=_cmd_check_sources)


def _add_selfcheck(sub) -> None:
    from rocm_dl_guide import selfcheck

    p = sub.add_parser(
        "selfcheck",
        help="verify the PyTorch path here: training, AMP, loaders, resume, ONNX, DDP",
        description="Run every PyTorch case study for a bounded number of steps, float32 "
        "against AMP and channels-last, loader workers with pinned memory, a checkpoint and "
        "resume, the ONNX export with the inference backends here and DDP over the local "
        "GPUs, offline on generated fixtures; write a report. `make gpu-check` runs it "
        "with --gpu.",
    )
    p.add_argument(
        "--gpu",
        action="store_true",
        help="check the GPU path (gpu-profile sizes); exits 3 at once if PyTorch sees no GPU",
    )
    p.add_argument("--steps", type=int, default=20, help="training batches per epoch (default 20)")
    p.add_argument(
        "--only", metavar="CHECKS", help="comma-separated: " + ", ".join(selfcheck.CHECK_NAMES)
    )
    p.add_argument(
        "--report", default="selfcheck-report", metavar="DIR", help="where the report goes"
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="with --gpu, when every check passed: write the verification record the book shows",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--preflight", action="store_true", help="only check that the device is usable, then exit"
    )
    p.set_defaults(func=_cmd_selfcheck)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rocm_dl_guide",
        description="Examples and checks from the executable ROCm Deep Learning Guide.",
    )
    parser.add_argument("--version", action="version", version=f"rocm_dl_guide {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_doctor_and_profiles(sub)
    _add_train(sub)
    _add_data(sub)
    _add_infer(sub)
    _add_bench_and_export(sub)
    _add_compat(sub)
    _add_check_sources(sub)
    _add_selfcheck(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "data_source", None):
        # Through the environment, so that torchrun's workers and every
        # profiles.current() in this process see it too.
        from rocm_dl_guide import profiles

        os.environ[profiles.DATA_SOURCE_VAR] = args.data_source
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): no traceback. Point stdout at
        # devnull so the interpreter's final flush cannot fail again, and exit
        # 141 (128 + SIGPIPE), as a shell tool killed by SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
