"""The training-step sweep (rocm_dl_guide.training.training_speed) and ``bench
training``: variant names, every variant on a CPU, the rows and their figures,
out-of-memory and budget rows, the record's rows read back, and the command's
JSON. Tiny models on the CPU; the GPU figures are ``make gpu-check``'s."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from conftest import guide_cli  # noqa: E402
from rocm_dl_guide.selfcheck import record  # noqa: E402
from rocm_dl_guide.training import training_speed as ts  # noqa: E402

CPU = torch.device("cpu")


def tiny_workload(n: int = 8) -> ts.SweepWorkload:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, 3, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)

    def model_fn():
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                             nn.Flatten(), nn.Linear(4 * 36, 3))  # fmt: skip

    return ts.SweepWorkload("tiny", model_fn, (x, y))


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("fp32", ("fp32", False, None, False)),
        ("BF16+cl", ("bf16", True, None, False)),
        ("fp16+compile+fused", ("fp16", False, "default", True)),
        ("bf16+cl+graphs", ("bf16", True, "reduce-overhead", False)),
    ],
)
def test_variant_names_parse_and_print_back(name, fields):
    variant = ts.Variant.parse(name)
    assert (variant.precision, variant.channels_last, variant.compile, variant.fused) == fields
    assert ts.Variant.parse(variant.name) == variant and variant.name == name.lower()


@pytest.mark.parametrize("bad", ["fp8", "bf16+xx", "fp32+compile+graphs", "fp32+cl+cl", "cl"])
def test_an_unknown_variant_is_one_clear_error(bad):
    with pytest.raises(ValueError, match="a precision .* then any of"):
        ts.Variant.parse(bad)


def test_every_cpu_variant_runs_and_every_row_has_its_figures_or_a_reason():
    variants = (*ts.CPU_VARIANTS, "bf16+cl+graphs")
    result = ts.sweep(tiny_workload(), CPU, batches=(2, 4), variants=variants,
                      steps=1, warmup=1, repeats=1)  # fmt: skip
    assert [(r["variant"], r["batch"]) for r in result.rows] == [
        (v, b) for v in variants for b in (2, 4)
    ]
    for row in result.rows:
        if row["variant"].endswith("graphs"):  # CUDA/HIP graphs: a GPU's
            assert row["images_per_s"] is None and row["note"].startswith("not run: graphs")
            continue
        assert row["images_per_s"] > 0 and row["step_ms"] > 0, row
        assert row["tflops"] == pytest.approx(
            result.flops_per_sample * row["images_per_s"] / 1e12, rel=0.01, abs=1e-3
        )
        # a CPU has no peak, no busy fraction and no allocator peak: null, and a note says why
        assert row["fraction_of_peak"] is row["busy_fraction"] is row["peak_memory_mib"] is None
    assert {"busy_fraction", "peak_memory_mib", "fraction_of_peak", "tflops"} <= set(result.notes)
    assert "say nothing about a GPU" in result.notes["fraction_of_peak"]
    # FLOPs are PyTorch's count: conv 3->4 3x3 on 8x8 plus the linear layer, forward and backward
    forward = 2 * (36 * 4 * 27) + 2 * (144 * 3)
    assert 2 * forward <= result.flops_per_sample <= 3.5 * forward
    best = result.best()
    assert best["images_per_s"] == max(r["images_per_s"] for r in result.measured())
    data = json.loads(json.dumps(result.to_dict()))  # no NaN, JSON all the way
    assert data["best"]["variant"] == best["variant"] and len(data["rows"]) == len(result.rows)


def test_out_of_memory_ends_the_variant_and_the_budget_ends_the_sweep(monkeypatch):
    real = ts._point

    def point(workload, variant, batch, device, timing):
        if variant.precision == "fp32" and batch >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(workload, variant, batch, device, timing)

    monkeypatch.setattr(ts, "_point", point)
    result = ts.sweep(tiny_workload(), CPU, batches=(2, 4, 8), variants=("fp32",),
                      steps=1, warmup=0, repeats=1)  # fmt: skip
    notes = [r["note"] for r in result.rows]
    assert notes == ["", "out of memory", "not run: out of memory at batch 4"]
    assert result.rows[0]["images_per_s"] > 0 and result.rows[2]["images_per_s"] is None

    spent = ts.sweep(tiny_workload(), CPU, batches=(2, 4), variants=("fp32", "fp32+cl"),
                     steps=1, warmup=0, repeats=1, budget_s=0)  # fmt: skip
    assert all(r["note"] == "not run: the sweep's 0 s budget was spent" for r in spent.rows)
    assert spent.best() is None and spent.to_dict()["best"] is None


def test_a_failing_variant_is_its_rows_note_not_the_sweeps_end(monkeypatch):
    real = ts._point

    def point(workload, variant, batch, device, timing):
        if variant.fused:
            raise RuntimeError("fused kernel unavailable")
        return real(workload, variant, batch, device, timing)

    monkeypatch.setattr(ts, "_point", point)
    result = ts.sweep(tiny_workload(), CPU, batches=(2,), variants=("fp32+fused", "fp32"),
                      steps=1, warmup=0, repeats=1)  # fmt: skip
    fused, plain = result.rows
    assert fused["note"] == "failed: RuntimeError: fused kernel unavailable"
    assert plain["images_per_s"] > 0 and result.best()["variant"] == "fp32"


def test_autocast_speedup_is_taken_at_the_best_rows_batch():
    rows = [
        {"batch": 64, "variant": "fp32", "images_per_s": 100.0},
        {"batch": 64, "variant": "bf16+cl", "images_per_s": 110.0},
        {"batch": 256, "variant": "fp32", "images_per_s": 120.0},
        {"batch": 256, "variant": "bf16+cl", "images_per_s": 240.0},
        {"batch": 256, "variant": "bf16+cl+compile", "images_per_s": 300.0},
    ]
    for r in rows:
        r.update(step_ms=1.0, tflops=None, fraction_of_peak=None, busy_fraction=None,
                 peak_memory_mib=None, note="")  # fmt: skip
    result = ts.Sweep("x", "cuda:0", "images", rows, 1e9, None, {})
    assert result.best()["variant"] == "bf16+cl+compile"
    # eager autocast over float32 at batch 256: the compiled row is not autocast's doing
    assert result.amp_speedup_at_best_batch() == pytest.approx(2.0)
    assert result.speedup("bf16+cl", "fp32", 64) == pytest.approx(1.1)
    assert result.speedup("bf16", "fp32", 64) is None


def test_the_records_rows_read_back_as_a_sweep_and_plot():
    tracked = record.latest_record()
    if tracked is None or "rows" not in tracked["figures"].get("inception-v3", {}):
        pytest.skip("no GPU record with sweep rows yet")
    figs = tracked["figures"]["inception-v3"]
    result = ts.from_record("inception-v3", figs, tracked["device"]["name"])
    assert len(result.rows) == len(figs["rows"]) > 0
    best = result.best()
    assert (best["variant"], best["batch"]) == (figs["best"]["variant"], figs["best"]["batch"])
    assert best["fraction_of_peak"] == pytest.approx(figs["best"]["fraction_of_peak"], rel=0.01)
    fig = result.plot("Inception v3")
    assert len(fig.axes) == 2 and fig.axes[0].get_lines()


def test_bench_training_prints_one_json_object_with_every_field():
    done = guide_cli(
        "bench", "training", "mnist-pytorch", "--batches", "2", "--variants", "fp32,bf16+cl",
        "--iterations", "1", "--warmup", "0", "--json", timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["workload"] == "mnist-pytorch" and data["unit"] == "images"
    assert [(r["batch"], r["variant"]) for r in data["rows"]] == [(2, "fp32"), (2, "bf16+cl")]
    keys = {"batch", "variant", "images_per_s", "step_ms", "tflops", "fraction_of_peak",
            "busy_fraction", "peak_memory_mib", "note"}  # fmt: skip
    for row in data["rows"]:
        assert keys <= set(row) and row["images_per_s"] > 0
        assert row["busy_fraction"] is None and "busy_fraction" in data["notes"]
    assert math.isfinite(data["flops_per_sample"]) and data["best"]["batch"] == 2


def test_bench_training_refuses_bad_input_in_one_line():
    done = guide_cli("bench", "training", "mnist-pytorch", "--variants", "fp8", timeout=60)
    assert done.returncode == 2 and "unknown training variant 'fp8'" in done.stderr
    assert "Traceback" not in done.stderr
    done = guide_cli("bench", "training", "alexnet", timeout=60)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_the_decoders_flops_per_token_are_the_standard_mfu_count():
    """PyTorch's count of one token's forward and backward FLOPs equals 6 per
    matrix parameter plus 12 L T d for attention (PaLM's formula for MFU), on
    the CPU as on a GPU: attention is counted through SDPA's math path."""
    from rocm_dl_guide.lm import model, pretrain

    size, vocab = model.SIZES["smoke"], 512
    params = size.layers * (4 * size.width**2 + 3 * size.width * size.ffn) + vocab * size.width
    attention = 12 * size.layers * size.context * size.width
    got = pretrain.flops_per_token(size, vocab, 0)
    assert got == pytest.approx(6 * params + attention, rel=1e-3)
