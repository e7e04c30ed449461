"""The selfcheck's kernel checks: the kernels chapter's Triton kernels compiled for the GPU.

Each ``kernels:*`` check runs one part of :func:`rocm_dl_guide.kernels.bench.run`
at the ``gpu`` profile's sizes: correctness against PyTorch is pass or fail; the
times, and the issue's targets (the fused softmax at least 2x the unfused
operators and within 20 % of ``torch.softmax``, the autotuned fp16 matmul at
4096^3 at least 70 % of ``torch.matmul``), are figures of the report. The vector
add and the softmax also record their GB/s and its fraction of the device's peak
memory bandwidth, where the guide's table lists the device. On a CPU
the checks are skipped: there Triton runs its interpreter, which the book's
pages and ``bench kernels`` already exercise.
"""

from __future__ import annotations

from rocm_dl_guide.selfcheck.checks import Setup
from rocm_dl_guide.selfcheck.report import Outcome

NAMES = ("kernels:vector-add", "kernels:softmax", "kernels:matmul", "kernels:compile")
"""The checks, in the order they run; each is one part of ``bench kernels``."""
_PARTS = dict(zip(NAMES, ("vector_add", "softmax", "matmul", "ops"), strict=True))


def check_kernel(ctx: Setup, name: str) -> Outcome:
    """Compile, check and time one part of the chapter on the GPU (skipped on a CPU)."""
    if ctx.device.type != "cuda":
        return Outcome(name, "skip", "Triton compiles for a GPU (no GPU here: the interpreter)")
    from rocm_dl_guide.kernels import bench

    part = _PARTS[name]
    record = bench.run(ctx.profile, parts=(part,))
    if not record[f"{part}_ok"]:
        raise AssertionError(f"disagrees with PyTorch: {record[part]}")
    targets = record["targets"]
    detail, figures = _describe(part, record, targets)
    return Outcome(name, "pass", f"{record['engine']['description']}; {detail}", figures=figures)


def bandwidth_figures(gb_per_s: float, device_name: str) -> tuple[str, dict]:
    """A kernel's GB/s as a figure, with its fraction of the device's peak memory
    bandwidth where the guide's table lists one (else no fraction, never a guess)."""
    from rocm_dl_guide.core import device as devices

    figures = {"gb_per_s": round(gb_per_s, 1)}
    peak = devices.peak_memory_bandwidth(device_name)
    if not peak:
        return "", figures
    figures["fraction_of_bandwidth"] = round(gb_per_s / peak[0], 3)
    return f" ({gb_per_s / peak[0]:.0%} of the {peak[0]:,.0f} GB/s peak)", figures


def _describe(part: str, record: dict, targets: dict) -> tuple[str, dict]:
    device_name = record["engine"]["name"]
    if part == "vector_add":
        last = record["vector_add"][-1]
        share, figures = bandwidth_figures(last["triton_gb_per_s"], device_name)
        return (
            f"n={last['n']:,}: {last['triton_gb_per_s']:.0f} GB/s{share}, torch "
            f"{last['torch_gb_per_s']:.0f} GB/s",
            figures,
        )
    if part == "softmax":
        met = targets.get("met", {})
        # the Triton kernel at the largest shape, the last measured
        ours = next(r for r in reversed(record["softmax"]) if r["version"] == "Triton kernel")
        share, figures = bandwidth_figures(ours["gb_per_s"], device_name)
        return (
            f"{targets['softmax_vs_unfused']:.2f}x the unfused operators (target 2x: "
            f"{'met' if met.get('softmax_vs_unfused') else 'not met'}), "
            f"{targets['softmax_vs_torch']:.2f}x torch.softmax (target 0.8x: "
            f"{'met' if met.get('softmax_vs_torch') else 'not met'}); "
            f"{ours['rows']}x{ours['cols']}: {ours['gb_per_s']:.0f} GB/s{share}",
            {k: round(targets[k], 3) for k in ("softmax_vs_unfused", "softmax_vs_torch")} | figures,
        )
    if part == "matmul":
        first = record["matmul"][0]
        fraction = first["fraction_of_peak"]
        peak = f", {fraction:.0%} of peak" if fraction else ""
        met = targets.get("met", {}).get("matmul_vs_torch")
        return (
            f"fp16 {first['M']}^3: {first['tflops']:.0f} TFLOP/s{peak}, "
            f"{targets['matmul_vs_torch']:.2f}x torch.matmul (target 0.7x: "
            f"{'met' if met else 'not met'}); {first['config']}",
            {
                "tflops": round(first["tflops"], 1),
                "matmul_vs_torch": round(targets["matmul_vs_torch"], 3),
            },  # fmt: skip
        )
    diffs = record["ops"]
    return (
        f"torch.compile matches eager within {diffs['compiled_vs_eager']:.1e}, "
        f"gradients autograd's within {diffs['grad_vs_autograd']:.1e}",
        {k: float(v) for k, v in diffs.items()},
    )
