"""The ``selfcheck`` command: verify the PyTorch path on this machine and write a report."""

from __future__ import annotations

import argparse
import json
import sys

from rocm_dl_guide.cli.common import fail


def _cmd_selfcheck(args: argparse.Namespace) -> int:
    """Exit 0: every check passed (or was skipped with a reason); 1: a check failed
    or the record was refused; 2: a usage error; 3: --gpu and PyTorch sees no GPU."""
    from rocm_dl_guide.core import preflight
    from rocm_dl_guide.selfcheck import record, runner

    only = [name.strip() for name in args.only.split(",")] if args.only else None
    if args.record and not args.gpu:
        return fail("selfcheck", "--record needs --gpu: the record vouches for a GPU run", 2)
    if args.preflight:
        return preflight.main(["--gpu"] if args.gpu else [])
    try:
        report = runner.run(
            args.gpu,
            args.report,
            steps=args.steps,
            only=only,
            log=lambda line: print(line, file=sys.stderr),
            write_as_you_go=True,
        )
    except preflight.NoGPUError as exc:
        return fail("selfcheck --gpu", exc, preflight.NO_GPU_EXIT)
    except ValueError as exc:
        return fail("selfcheck", exc, 2)
    json_path, text_path = report.write(args.report)
    print(json.dumps(report.to_dict(), default=str) if args.json else report.summary())
    print(f"report: {json_path} and {text_path}", file=sys.stderr)
    if args.record:
        try:
            path = record.write_record(report)
        except record.RecordError as exc:
            return fail("selfcheck --record", exc)
        print(f"verification record written to {path}", file=sys.stderr)
    return 0 if report.passed else 1


def register(sub) -> None:
    """``selfcheck``."""
    from rocm_dl_guide.selfcheck import runner

    p = sub.add_parser(
        "selfcheck",
        help="verify the PyTorch path here: training, AMP, loaders, resume, ONNX, DDP",
        description="Run every PyTorch case study for a bounded number of steps, its "
        "training step swept over batch sizes and variants (float32, AMP, channels-last, "
        "torch.compile, graphs, fused optimizers) with the fraction of peak and of the time "
        "the GPU is busy, the real loaders against the model, loader workers with pinned "
        "memory, a checkpoint and resume, the ONNX export with the inference backends "
        "here and DDP over the local GPUs, offline on generated fixtures; write a "
        "report. `make gpu-check` runs it with --gpu.",
    )
    p.add_argument(
        "--gpu",
        action="store_true",
        help="check the GPU path (gpu-profile sizes); exits 3 at once if PyTorch sees no GPU",
    )
    p.add_argument("--steps", type=int, default=20, help="training batches per epoch (default 20)")
    p.add_argument(
        "--only", metavar="CHECKS", help="comma-separated: " + ", ".join(runner.CHECK_NAMES)
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
