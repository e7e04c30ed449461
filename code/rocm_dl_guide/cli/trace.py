"""The ``trace`` command: torch.profiler on a training or an inference step
(``profile``, its old name, is an alias). Not to be confused with the run
profiles (``--profile``, ``profiles``): this command traces operators."""

from __future__ import annotations

import argparse
import json
import sys

from rocm_dl_guide.cli.common import add_profile_args, fail, positive_int, run_profile


def _cmd_trace(args: argparse.Namespace) -> int:
    from rocm_dl_guide.optimization import onnx_files, profiling

    prof = run_profile("trace", args.profile)
    if not args.json:
        print(
            f"Profiling {args.steps} {args.kind} step(s) with torch.profiler "
            f"(profile {prof.name}) ...",
            file=sys.stderr,
        )
    try:
        result = profiling.profile_step(prof, args.kind, steps=args.steps, folder=args.output)
    except (onnx_files.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return fail("trace", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def register(sub) -> None:
    """``trace {training,inference}``, alias ``profile``."""
    p = sub.add_parser(
        "trace",
        aliases=["profile"],
        help="torch.profiler on a training or an inference step: top operators, Chrome trace",
        description="Run a few steps of a case study under torch.profiler (one warm-up "
        "step first): 'training' profiles the shared loop's step on the CIFAR-10 network, "
        "'inference' an eager forward pass of Inception v3. Prints the operators with the "
        "most self time per step and writes a Chrome trace (trace.json) to the run folder.",
    )
    p.add_argument("kind", choices=["training", "inference"], help="which step to profile")
    p.add_argument("--steps", type=positive_int, default=3, help="recorded steps (default 3)")
    p.add_argument(
        "--output", metavar="DIR", help="folder for trace.json (default: the run folder)"
    )
    add_profile_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_trace)
