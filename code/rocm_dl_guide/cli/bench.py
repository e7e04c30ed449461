"""The ``bench`` commands: ``bench training`` (a case study's training step by
batch size and variant), ``bench inference`` (PyTorch eager against the compiled
backend), ``bench precision`` (fp32, bf16, int8, fp16 and torch.compile side by
side), ``bench conv`` (a convolution workload under the MIOpen settings in
force), ``bench llm`` (the language-model chapter's figures) and ``bench kernels``
(the kernels chapter's Triton kernels, checked and timed). Each subcommand takes
only its own flags: argparse rejects the others (exit 2); ``bench`` alone prints
its help and exits 2."""

from __future__ import annotations

import argparse
import json
import sys

from rocm_dl_guide.cli.common import (
    add_profile_args,
    fail,
    non_negative_int,
    positive_int,
    print_help_and_exit_2,
    run_profile,
)


def _batches(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected batch sizes like 1,8,32, got {text!r}")
    return values


def _cmd_bench_inference(args: argparse.Namespace) -> int:
    from rocm_dl_guide.optimization import backends, bench, onnx_files

    try:
        name = backends.select_backend(args.backend)
    except backends.BackendError as exc:
        return fail("bench", exc, 2)
    prof = run_profile("bench", args.profile)
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
    except (onnx_files.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _cmd_bench_precision(args: argparse.Namespace) -> int:
    from rocm_dl_guide.optimization import onnx_files, ort_int8, precision

    prof = run_profile("bench", args.profile)
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
    except (onnx_files.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc)
    recorded = None
    if 1 in args.batches and result.int8_rows(1):
        try:
            recorded = precision.record_int8_choice(result)
        except (precision.PrecisionError, OSError) as exc:
            return fail("bench", exc)
    if args.json:
        extra = {"int8_choice_file": str(recorded)} if recorded else {}
        print(json.dumps(result.to_dict() | extra))
        return 0
    print(result.summary())
    if recorded:
        print(f"int8 on this CPU from now on: {ort_int8.chosen_int8(recorded)[1]} ({recorded})")
    return 0


def _cmd_bench_conv(args: argparse.Namespace) -> int:
    from rocm_dl_guide.optimization import tuning

    prof = run_profile("bench", args.profile)
    try:
        baseline = tuning.read_baseline(args.baseline) if args.baseline else None
        result = tuning.conv_workload(
            batch=args.batch,  # None: the workload's own default
            profile=prof,
            warmup=args.warmup,
            iterations=args.iterations,
            baseline=baseline,
        )
    except (OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


# The bench subcommands take no abbreviated flags: in 'bench precision', '--batch 4'
# would otherwise be read as '--batches 4' instead of being refused.


def _add_runs_args(p: argparse.ArgumentParser) -> None:
    """``--iterations`` and ``--warmup``, which every benchmark takes."""
    p.add_argument("--iterations", type=positive_int, help="timed runs (default: the profile's)")
    p.add_argument(
        "--warmup", type=non_negative_int, help="untimed warm-up runs (default: the profile's)"
    )


def _add_common_tail(p: argparse.ArgumentParser, func) -> None:
    """``--profile``, ``--data-source`` and ``--json``, and the handler."""
    add_profile_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=func)


def _add_inference(bench_sub) -> None:
    p = bench_sub.add_parser(
        "inference",
        allow_abbrev=False,
        help="eager against the compiled backend",
        description="Median latency of Inception v3 inference after warm-up: PyTorch eager "
        "against the compiled backend, measured side by side.",
    )
    p.add_argument("--batch", type=positive_int, default=1, help="batch size (default 1)")
    _add_runs_args(p)
    p.add_argument(
        "--backend", default="auto", metavar="NAME", help="auto, migraphx or onnxruntime"
    )
    p.add_argument(
        "--threads", type=positive_int, help="CPU threads for both runtimes (default: all)"
    )
    p.add_argument("--tuning", action="store_true", help="also time untuned against tuned")
    _add_common_tail(p, _cmd_bench_inference)


def _add_precision(bench_sub) -> None:
    p = bench_sub.add_parser(
        "precision",
        allow_abbrev=False,
        help="fp32, bf16, int8, fp16 and torch.compile side by side, with agreement on a "
        "trained model",
        description="Every engine's agreement with fp32, and accuracy, on the trained "
        "CIFAR-10 network; then the median latency of every engine (fp32, bf16, int8, fp16, "
        "torch.compile) on Inception v3 at each batch size, timed side by side.",
    )
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
    _add_runs_args(p)
    p.add_argument(
        "--threads", type=positive_int, help="CPU threads for both runtimes (default: all)"
    )
    _add_common_tail(p, _cmd_bench_precision)


def _add_conv(bench_sub) -> None:
    p = bench_sub.add_parser(
        "conv",
        allow_abbrev=False,
        help="a PyTorch convolution workload under the MIOpen settings in force "
        "(MIOPEN_FIND_ENFORCE, MIOPEN_USER_DB_PATH)",
        description="Time eager Inception v3 forward passes (random weights: the kernels, "
        "not the answers, are measured) under the MIOpen settings in force (MIOPEN_FIND_ENFORCE, "
        "MIOPEN_USER_DB_PATH): the first pass on its own, then the median after warm-up.",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=None,
        help="batch size (default: the workload's own, 32 on a GPU profile, 1 in smoke)",
    )
    _add_runs_args(p)
    p.add_argument(
        "--baseline",
        metavar="FILE",
        help="'conv': the output of an earlier 'bench conv --json' run to compare with",
    )
    _add_common_tail(p, _cmd_bench_conv)


def _cmd_bench_llm(args: argparse.Namespace) -> int:
    from rocm_dl_guide.lm import benchmark, hub

    prof = run_profile("bench", args.profile)
    parts = tuple(args.parts.split(",")) if args.parts else benchmark.PARTS
    try:
        record = benchmark.run(prof, parts, log=lambda line: print(line, file=sys.stderr))
    except (hub.HubUnavailableError, OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc)
    if args.json:
        print(json.dumps(record))
        return 0
    for part in benchmark.PARTS:
        for row in record.get(part, []):
            print(part, " ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def _add_llm(bench_sub) -> None:
    from rocm_dl_guide.lm.benchmark import PARTS

    p = bench_sub.add_parser(
        "llm",
        help="the language-model chapter's figures: attention kernels, KV cache, speculative "
        "decoding, quantization, serving, DPO and GRPO",
        description="Measures, on the chapter's model: SDPA kernels against sequence length "
        "(attention), generation with and without the KV cache, the static cache eager and "
        "compiled, batches (generation), tokens/s, size and perplexity per precision "
        "(quantization), a server's time to first token and throughput at growing "
        "concurrency (serving), greedy against speculative decoding (speculative), and the "
        "post-training runs' speed and held-out measures (dpo, grpo). Compiling the static "
        "cache takes a minute on a CPU. With "
        "--json the last line is one JSON object with a list per part, the machine and "
        "the versions.",
    )
    p.add_argument(
        "--parts",
        help=f"comma-separated subset of {','.join(PARTS)} (default: all)",
    )
    _add_common_tail(p, _cmd_bench_llm)


def _cmd_bench_kernels(args: argparse.Namespace) -> int:
    prof = run_profile("bench", args.profile)
    from rocm_dl_guide.kernels import bench as kernels  # picks Triton's engine first

    parts = tuple(args.parts.split(",")) if args.parts else kernels.PARTS
    unknown = sorted(set(parts) - set(kernels.PARTS))
    if unknown:
        return fail("bench", f"unknown part(s) {', '.join(unknown)}: {','.join(kernels.PARTS)}", 2)
    try:
        record = kernels.run(prof, args.warmup, args.iterations, parts,
                             log=lambda line: print(line, file=sys.stderr))  # fmt: skip
    except (OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc)
    print(json.dumps(record) if args.json else kernels.summary(record))
    return 0 if record["ok"] else 1


def _add_kernels(bench_sub) -> None:
    p = bench_sub.add_parser(
        "kernels",
        allow_abbrev=False,
        help="the Triton kernels of the kernels chapter, checked against PyTorch and timed",
        description="Checks each Triton kernel of the book's kernels chapter against "
        "PyTorch and times it against PyTorch's own (median after warm-up): vector add, "
        "fused softmax (with torch.softmax, the unfused operators and torch.compile), the "
        "autotuned fp16 matmul (with torch.matmul, in TFLOP/s and as a fraction of the "
        "device's peak), and the torch.library operator under torch.compile and autograd. "
        "On a CPU the engine is Triton's interpreter, and the record says so. With --json "
        "the last line is one JSON object; the exit code is 1 when a kernel disagrees.",
    )
    p.add_argument("--parts", help="comma-separated subset of vector_add,softmax,matmul,ops")
    _add_runs_args(p)
    _add_common_tail(p, _cmd_bench_kernels)


def _cmd_bench_training(args: argparse.Namespace) -> int:
    import torch

    from rocm_dl_guide.core import casestudies
    from rocm_dl_guide.training import training_speed

    prof = run_profile("bench", args.profile)
    try:
        variants = [training_speed.Variant.parse(v).name for v in args.variants.split(",")] \
            if args.variants else None  # fmt: skip
        device = torch.device(args.device) if args.device else None
        if device is not None and device.type == "cuda" and not torch.cuda.is_available():
            return fail("bench", "--device cuda: PyTorch sees no GPU here", 2)
        device = device or training_speed.train.default_device()
        gpu = device.type == "cuda"
        batches = args.batches or ((32, 64, 128, 256, 512) if gpu else (2, 4))
        if not args.json:
            print(
                f"Timing the {args.example} training step on {device} at batch "
                f"{', '.join(map(str, batches))} (profile {prof.name}) ...",
                file=sys.stderr,
            )
        workload = training_speed.example_workload(args.example, prof, device)
        result = training_speed.sweep(
            workload,
            device,
            batches=batches,
            variants=variants,
            steps=args.iterations or (10 if gpu else 2),
            warmup=args.warmup if args.warmup is not None else (3 if gpu else 1),
            repeats=3 if gpu else 1,
            peak_tflops=training_speed.device_peak_tflops(device),
            log=None if args.json else (lambda line: print(line, file=sys.stderr)),
        )
    except (casestudies.UnknownCaseStudyError, OSError, RuntimeError, ValueError) as exc:
        return fail("bench", exc, 2 if isinstance(exc, ValueError) else 1)
    print(json.dumps(result.to_dict()) if args.json else result.summary())
    return 0


def _add_training(bench_sub) -> None:
    from rocm_dl_guide.core import casestudies
    from rocm_dl_guide.training.variants import CPU_VARIANTS, GPU_VARIANTS

    names = [c.name for c in casestudies.REGISTRY.values() if c.workload is not None]
    p = bench_sub.add_parser(
        "training",
        allow_abbrev=False,
        help="the training step by batch size and variant: throughput, FLOP/s, the "
        "fraction of peak, the busy fraction and peak memory",
        description="Times a case study's training step side by side in one run, for "
        "every batch size and variant (precision fp32, bf16 or fp16; +cl channels-last; "
        "+compile torch.compile, or +graphs its reduce-overhead mode; +fused the "
        "optimizer's fused kernel): images or tokens per second (median of 3 timed runs "
        "after warm-up), step time, TFLOP/s from torch.utils.flop_counter and the "
        "fraction of the device's bf16 peak, the fraction of the time the GPU is busy "
        "(torch.profiler) and peak memory. Data loading is not timed. A batch that runs "
        "out of memory ends that variant's sweep. CPU figures say nothing about a GPU.",
    )
    p.add_argument("example", choices=names, metavar="EXAMPLE", help=", ".join(names))
    p.add_argument(
        "--batches",
        type=_batches,
        metavar="N,N,...",
        help="batch sizes (default 32,64,128,256,512 on a GPU, 2,4 on a CPU)",
    )
    p.add_argument(
        "--variants",
        metavar="V,V,...",
        help=f"default on a GPU {','.join(GPU_VARIANTS)}; on a CPU {','.join(CPU_VARIANTS)}",
    )
    p.add_argument("--device", help="cpu or cuda (default: the GPU if PyTorch sees one)")
    _add_runs_args(p)
    _add_common_tail(p, _cmd_bench_training)


def register(sub) -> None:
    """``bench {inference,precision,conv,llm,kernels,training}``."""
    parser = sub.add_parser(
        "bench",
        help="time PyTorch eager against the compiled backend (MIGraphX or ONNX Runtime)",
        description="Inference benchmarks, each measured after warm-up: PyTorch eager against "
        "the compiled backend (inference), the precisions side by side (precision), a "
        "convolution workload under MIOpen's settings (conv), the language-model figures (llm), "
        "or the Triton kernels of the kernels chapter (kernels).",
    )
    bench_sub = parser.add_subparsers(dest="what", metavar="SUBCOMMAND")
    _add_inference(bench_sub)
    _add_precision(bench_sub)
    _add_conv(bench_sub)
    _add_llm(bench_sub)
    _add_kernels(bench_sub)
    _add_training(bench_sub)
    parser.set_defaults(func=print_help_and_exit_2(parser))
