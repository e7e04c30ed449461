"""Every kernel of the chapter, checked against PyTorch and timed: ``bench kernels``.

:func:`run` measures the vector add, the fused softmax and the matmul at the
profile's sizes (median after warm-up), and checks the operator's
``torch.compile`` and autograd; :func:`targets` reads the issue's GPU targets
off the record. The same record serves ``python -m rocm_dl_guide bench kernels
--json`` and the ``kernels:*`` checks of ``make gpu-check``. On the CPU the
engine is Triton's interpreter: the record says so, and its times measure NumPy
running the kernels, not a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rocm_dl_guide.core import profiles
from rocm_dl_guide.kernels import engine, matmul, ops, softmax, vector_add

PARTS = ("vector_add", "softmax", "matmul", "ops")
"""What :func:`run` measures, in order."""
SOFTMAX_VS_UNFUSED = 2.0
"""GPU target: the fused softmax's throughput over the unfused PyTorch version's."""
SOFTMAX_VS_TORCH = 0.8
"""GPU target: the fused softmax within 20 % of ``torch.softmax``."""
MATMUL_VS_TORCH = 0.7
"""GPU target: the autotuned fp16 matmul at 4096^3 against ``torch.matmul``."""
RUNS = {"smoke": (1, 5), "gpu": (10, 50)}
"""(warm-up, timed) runs per profile: few on the interpreter, where one softmax
takes a tenth of a second."""


def sizes(profile: profiles.Profile) -> str:
    """The profile's sizes key: ``smoke`` for the interpreter's, ``gpu`` otherwise."""
    return "smoke" if profile.name == "smoke" else "gpu"


def run(
    profile: profiles.Profile,
    warmup: int | None = None,
    iterations: int | None = None,
    parts: tuple[str, ...] = PARTS,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Check and time ``parts`` at the profile's sizes; one JSON-ready record."""
    eng = engine.describe()
    dev = torch.device(eng.device)
    key = sizes(profile)
    w, n = RUNS[key]
    w = w if warmup is None else warmup
    n = n if iterations is None else iterations
    record: dict[str, Any] = {"engine": eng.to_dict(), "profile": profile.name,
                              "warmup": w, "iterations": n}  # fmt: skip
    if "vector_add" in parts:
        log(f"vector add on {eng} ...")
        rows = vector_add.measure(vector_add.SIZES[key], dev, torch.float32, w, n)
        record["vector_add"] = [r.to_dict() for r in rows]
        record["vector_add_ok"] = all(r.max_abs_diff == 0 for r in rows)
    if "softmax" in parts:
        log("fused softmax ...")
        rows = softmax.measure(softmax.SHAPES[key], dev, torch.float32, w, n)
        record["softmax"] = [r.to_dict() for r in rows]
        record["softmax_ok"] = softmax.agree(rows, torch.float32)
    if "matmul" in parts:
        log("matmul (autotuning first) ...")
        rows = matmul.measure(matmul.SHAPES[key], dev, torch.float16, w, n)
        record["matmul"] = [r.to_dict() for r in rows]
        record["matmul_ok"] = matmul.agree(rows, torch.float16)
        record["matmul_tuning"] = matmul.tuning_table()
    if "ops" in parts:
        log("torch.library operator, torch.compile and autograd ...")
        diffs = ops.check_compiled(dev=dev)
        record["ops"] = diffs
        record["ops_ok"] = max(diffs.values()) <= 1e-4
    record["ok"] = all(v for k, v in record.items() if k.endswith("_ok"))
    record["targets"] = targets(record)
    return record


def _at(table: list[dict], **where: Any) -> dict[str, dict]:
    """The rows of ``table`` matching ``where``, by version."""
    return {r["version"]: r for r in table if all(r[k] == v for k, v in where.items())}


def targets(record: dict[str, Any]) -> dict[str, Any]:
    """The issue's GPU targets, read off the record: the softmax's throughput
    against the unfused version (at least 2x) and ``torch.softmax`` (at least 0.8x)
    at its largest shape, and the fp16 matmul against ``torch.matmul`` at 4096^3
    (at least 0.7x). ``measured`` is False on the interpreter, which says nothing
    about a GPU."""
    out: dict[str, Any] = {"measured": record["engine"]["engine"] == "compiled"}
    if record.get("softmax"):
        last = record["softmax"][-1]
        at = _at(record["softmax"], rows=last["rows"], cols=last["cols"])
        ours = at["Triton kernel"]["gb_per_s"]
        out["softmax_vs_unfused"] = ours / at["unfused PyTorch"]["gb_per_s"]
        out["softmax_vs_torch"] = ours / at["torch.softmax"]["gb_per_s"]
    if record.get("matmul"):
        first = record["matmul"][0]
        at = _at(record["matmul"], M=first["M"], N=first["N"], K=first["K"])
        out["matmul_shape"] = [first["M"], first["N"], first["K"]]
        out["matmul_vs_torch"] = at["Triton kernel"]["tflops"] / at["torch.matmul"]["tflops"]
    if out["measured"]:
        out["met"] = {
            "softmax_vs_unfused": out.get("softmax_vs_unfused", 0) >= SOFTMAX_VS_UNFUSED,
            "softmax_vs_torch": out.get("softmax_vs_torch", 0) >= SOFTMAX_VS_TORCH,
            "matmul_vs_torch": out.get("matmul_vs_torch", 0) >= MATMUL_VS_TORCH,
        }
    return out


def summary(record: dict[str, Any]) -> str:
    """The record as lines a reader can scan."""
    lines = [f"engine: {record['engine']['description']}",
             f"runs: {record['warmup']} warm-up, median of {record['iterations']}"]  # fmt: skip
    for r in record.get("vector_add", []):
        lines.append(f"vector_add n={r['n']:,} {r['dtype']}: triton {r['triton_ms']:.3f} ms, "
                     f"torch {r['torch_ms']:.3f} ms, max diff {r['max_abs_diff']:.1e}")  # fmt: skip
    for r in record.get("softmax", []):
        lines.append(f"softmax {r['rows']}x{r['cols']} {r['version']}: {r['ms']:.3f} ms, "
                     f"{r['gb_per_s']:.3g} GB/s, max diff {r['max_abs_diff']:.1e}")  # fmt: skip
    for r in record.get("matmul", []):
        lines.append(
            f"matmul {r['M']}x{r['N']}x{r['K']} {r['version']}: {r['ms']:.3f} ms, "
            f"{r['tflops']:.3g} TFLOP/s, rel. error {r['relative_error']:.1e}"
        )
    if "ops" in record:
        lines.append("operator: " + ", ".join(f"{k} {v:.1e}" for k, v in record["ops"].items()))
    lines.append(f"all agree with PyTorch: {record['ok']}")
    return "\n".join(lines)
