"""Reduced precision: the calibration reader, ONNX Runtime's int8 quantization
and its refusals, the agreement computation, the CPU-flag rules, and the
``bench precision`` command (its JSON rows and its argument errors)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from conftest import guide_cli  # noqa: E402
from rocm_dl_guide.casestudies import cifar10  # noqa: E402
from rocm_dl_guide.core import device, messages, profiles  # noqa: E402
from rocm_dl_guide.optimization import (  # noqa: E402
    agreement,
    backends,
    inference,
    onnx_files,
    ort_int8,
    precision,
    precision_results,
)

SMOKE = profiles.current("smoke")

ROOT = Path(__file__).resolve().parents[1]


def batches(n: int = 4, size: int = 8, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((size, 3, 32, 32)).astype(np.float32) for _ in range(n)]


@pytest.fixture(scope="module")
def cifar_onnx(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("precision") / "net.onnx"
    onnx_files.export_onnx(cifar10.Net().eval(), path, image_size=32)
    return path


# --------------------------------------------------------------------------- calibration


def test_calibration_reader_serves_every_batch_once_then_none_and_rewinds():
    data = batches(3)
    reader = ort_int8.CalibrationReader("image", data)
    served = []
    while (item := reader.get_next()) is not None:
        served.append(item["image"])
    assert len(served) == 3 and all(a is b for a, b in zip(served, data, strict=True))
    assert reader.get_next() is None
    reader.rewind()
    assert reader.get_next()["image"] is data[0]


@pytest.mark.parametrize(
    "bad,message",
    [
        ([], "at least one batch"),
        ([np.zeros((2, 3, 32, 32), np.float32), np.zeros((2, 3, 16, 16), np.float32)], "shapes"),
        ([np.zeros((2, 3, 32, 32), np.float64)], "float32"),
    ],
)
def test_calibration_reader_refuses_unusable_batches(bad, message):
    with pytest.raises(ort_int8.PrecisionError, match=message):
        ort_int8.CalibrationReader("image", bad)


def test_calibration_batches_come_from_a_loader():
    loader = [(torch.ones(4, 3, 32, 32), torch.zeros(4)) for _ in range(5)]
    out = ort_int8.calibration_batches(loader, 3)
    assert len(out) == 3 and out[0].dtype == np.float32 and out[0].shape == (4, 3, 32, 32)
    with pytest.raises(ort_int8.PrecisionError, match="no batches"):
        ort_int8.calibration_batches([], 3)


# --------------------------------------------------------------------------- quantization


def test_int8_model_is_quantized_runs_and_follows_the_fp32_model(cifar_onnx, tmp_path):
    out = ort_int8.quantize_onnx_int8(cifar_onnx, tmp_path / "net.int8.onnx", batches())
    ops = onnx_files.op_counts(out)
    assert ops.get("QuantizeLinear", 0) > 0 and ops.get("DequantizeLinear", 0) > 0
    assert not [p.name for p in tmp_path.iterdir() if p.name != "net.int8.onnx"]
    x = batches(1, 16, seed=1)[0]
    fp32 = inference.compile_model(cifar_onnx, "onnxruntime", threads=1).run(x)
    int8 = inference.compile_model(out, "onnxruntime", threads=1).run(x)
    assert int8.shape == fp32.shape
    # Random weights give near-tied classes, so compare the logits, not the top-1.
    assert np.corrcoef(fp32.ravel(), int8.ravel())[0, 1] > 0.95


def _zero_point_types(path: Path) -> set[int]:
    """The element types of a QDQ model's activation zero points (QuantizeLinear's third input)."""
    model = onnx.load(path)
    inits = {i.name: i.data_type for i in model.graph.initializer}
    return {
        inits[n.input[2]]
        for n in model.graph.node
        if n.op_type == "QuantizeLinear" and n.input[2] in inits
    }


def test_each_int8_config_is_applied_as_asked(cifar_onnx, tmp_path):
    from onnx import TensorProto

    u8 = ort_int8.quantize_onnx_int8(
        cifar_onnx, tmp_path / "u8.onnx", batches(), config=ort_int8.U8S8
    )
    s8 = ort_int8.quantize_onnx_int8(
        cifar_onnx, tmp_path / "s8.onnx", batches(), config=ort_int8.S8S8
    )
    assert _zero_point_types(u8) == {TensorProto.UINT8}
    assert _zero_point_types(s8) == {TensorProto.INT8}
    pct = replace(ort_int8.U8S8, reduce_range=True, calibration="Percentile")
    out = ort_int8.quantize_onnx_int8(cifar_onnx, tmp_path / "pct.onnx", batches(), config=pct)
    x = batches(1, 16, seed=1)[0]
    fp32 = inference.compile_model(cifar_onnx, "onnxruntime", threads=1).run(x)
    for path in (u8, out):
        int8 = inference.compile_model(path, "onnxruntime", threads=1).run(x)
        assert np.corrcoef(fp32.ravel(), int8.ravel())[0, 1] > 0.9
    assert pct.name == "U8S8 per-channel reduce_range Percentile"
    assert pct.to_dict()["format"] == "QDQ" and pct.to_dict()["reduce_range"] is True


def test_the_int8_candidates_follow_the_cpu():
    no_vnni = ort_int8.int8_configs({"avx2", "fma"})
    vnni = ort_int8.int8_configs({"avx2", "avx512f", "avx512_vnni"})
    assert [c.name for c in vnni] == [
        "U8S8 per-channel MinMax",
        "S8S8 per-channel MinMax",
        "U8S8 per-channel Percentile",
    ]
    assert [c.name for c in no_vnni] == [
        "U8S8 per-channel MinMax",
        "S8S8 per-channel MinMax",
        "U8S8 per-channel reduce_range MinMax",
        "U8S8 per-channel Percentile",
    ]
    assert "VPMADDUBSW" in ort_int8.int8_reason({"avx2"})
    assert "VNNI" in ort_int8.int8_reason({"avx2", "avx512_vnni"})
    assert "AMX" in ort_int8.int8_reason({"amx_int8"})


def _relu_only(path: Path) -> Path:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_quantization_refuses_a_model_with_nothing_to_quantize(tmp_path):
    path = _relu_only(tmp_path / "relu.onnx")
    with pytest.raises(ort_int8.PrecisionError, match="nothing to quantize.*Relu"):
        ort_int8.quantize_onnx_int8(path, tmp_path / "out.onnx", batches())
    assert not (tmp_path / "out.onnx").exists()


def test_quantization_refuses_an_already_quantized_model(cifar_onnx, tmp_path):
    once = ort_int8.quantize_onnx_int8(cifar_onnx, tmp_path / "once.onnx", batches())
    with pytest.raises(ort_int8.PrecisionError, match="already quantized"):
        ort_int8.quantize_onnx_int8(once, tmp_path / "twice.onnx", batches())
    assert not (tmp_path / "twice.onnx").exists()


def test_quantization_refuses_a_file_that_is_not_a_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(onnx_files.ModelFileError):
        ort_int8.quantize_onnx_int8(bad, tmp_path / "out.onnx", batches())
    assert not (tmp_path / "out.onnx").exists()


# --------------------------------------------------------------------------- agreement


def _engine(name: str, fn) -> precision.Engine:
    return precision.Engine(name, "fp32", fn, "test")


def test_agreement_counts_top1_matches_with_the_reference_and_accuracy():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((200, 10)).astype(np.float32)
    images = np.arange(200, dtype=np.float32).reshape(200, 1)
    reference = logits.argmax(1)
    labels = reference.copy()
    labels[:50] = (labels[:50] + 1) % 10  # the reference is right on 150 of 200

    def flipped(x):  # disagrees with the reference on the first 20 images
        out = logits[x[:, 0].astype(int)].copy()
        first = x[:, 0] < 20
        out[first] = np.roll(out[first], 1, axis=1)
        return out

    found = agreement.prediction_agreement(
        [_engine("ref", lambda x: logits[x[:, 0].astype(int)]), _engine("other", flipped)],
        images,
        labels,
        batch=64,
    )
    assert found[0].top1_agreement == 1.0 and found[0].accuracy == 0.75
    assert found[1].top1_agreement == pytest.approx(0.9)
    assert found[1].images == 200


def test_agreement_near_the_boundary_counts_the_least_sure_tenth_alone():
    """The images whose two largest fp32 logits are closest are where a rounding
    error flips the answer: an engine that disagrees only there agrees on 90% of
    the set and on none of the least-sure tenth."""
    logits = np.zeros((100, 3), dtype=np.float32)
    logits[:, 0] = np.linspace(1.0, 10.0, 100)  # class 0 wins, surer down the rows
    logits[:10, 1] = logits[:10, 0] - 0.01  # the first ten: nearly a tie with class 1
    assert sorted(agreement.least_sure(logits)) == list(range(10))
    assert len(agreement.least_sure(logits[:4])) == 1  # at least one image
    images = np.arange(100, dtype=np.float32).reshape(100, 1)

    def rounded(x):  # a coarse format: the near-ties tip over to class 1
        out = logits[x[:, 0].astype(int)].copy()
        out[:, 1] = np.where(out[:, 0] - out[:, 1] < 0.1, out[:, 0] + 0.01, out[:, 1])
        return out

    ref, other = agreement.prediction_agreement(
        [_engine("ref", lambda x: logits[x[:, 0].astype(int)]), _engine("coarse", rounded)],
        images,
        np.zeros(100, dtype=int),
        batch=32,
    )
    assert (ref.boundary_agreement, ref.boundary_images) == (1.0, 10)
    assert other.top1_agreement == pytest.approx(0.9) and other.boundary_agreement == 0.0
    assert f"{agreement.LEAST_SURE_SHARE:.0%}" in precision_results.LEAST_SURE_COLUMN
    with pytest.raises(ort_int8.PrecisionError, match="2 or more"):
        agreement.least_sure(np.zeros((5, 1)))


def test_the_least_sure_sentence_names_the_engine_that_agreed_least():
    def row(backend, precision, value):
        return dict(backend=backend, precision=precision, batch=1, config=None, ms=1.0,
                    speedup_vs_eager_fp32=1.0, top1_agreement=1.0, agreement_interval=None,
                    accuracy=1.0, instructions="", least_sure_agreement=value,
                    least_sure_images=20)  # fmt: skip

    def bench(rows):
        return precision_results.PrecisionBench(
            rows=rows, machine="m", threads=1, cpu_flags=[], versions={}, profile="smoke",
            speed_model="s",
            agreement_model="a", agreement_note="n", warmup={1: 1}, iterations={1: 1},
        )  # fmt: skip

    mixed = bench([row("PyTorch eager", "fp32", 1.0), row("ONNX Runtime", "int8", 0.85),
                   row("PyTorch eager", "bf16", 0.95)])  # fmt: skip
    text = mixed.least_sure_summary(1)
    assert text.startswith("On the 20 test images") and text.endswith(
        "ONNX Runtime int8 agreed least: 85.0%."
    )
    same = bench([row("PyTorch eager", "fp32", 1.0), row("ONNX Runtime", "fp32", 1.0)])
    assert same.least_sure_summary(1).endswith("every engine still gave fp32's answer.")
    assert bench([row("PyTorch eager", "fp32", 1.0)]).least_sure_summary(1) == ""
    assert precision_results.LEAST_SURE_COLUMN in mixed.frame()


def test_wilson_interval():
    # Brown, Cai and DasGupta (2001): the interval at 97.0% of 1,000 is about 95.7-97.9%.
    low, high = agreement.wilson_interval(970, 1000)
    assert low == pytest.approx(0.9575, abs=1e-4) and high == pytest.approx(0.9789, abs=1e-4)
    low, high = agreement.wilson_interval(200, 200)  # all agree: not an empty interval
    assert high == 1.0 and 0.97 < low < 0.99
    assert agreement.wilson_interval(0, 10)[0] == 0.0
    # four times the images, half the width
    lo1, hi1 = agreement.wilson_interval(450, 500)
    lo4, hi4 = agreement.wilson_interval(1800, 2000)
    w1, w4 = hi1 - lo1, hi4 - lo4
    assert w4 == pytest.approx(w1 / 2, rel=0.05)
    with pytest.raises(ort_int8.PrecisionError, match="no interval"):
        agreement.wilson_interval(3, 0)


def test_agreement_refuses_mismatched_inputs():
    with pytest.raises(ort_int8.PrecisionError, match="3 images for 2 labels"):
        agreement.prediction_agreement([_engine("e", lambda x: x)], np.zeros((3, 1)), np.zeros(2))


# --------------------------------------------------------------------------- the CPU


CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma f16c avx512f avx512_vnni avx512_bf16\n"


def test_cpu_flags_and_what_each_precision_uses():
    flags = device.cpu_flags(CPUINFO)
    assert {"avx512_vnni", "avx512_bf16"} <= flags and "amx_tile" not in flags
    assert "VNNI" in precision.instructions("int8", flags)
    assert "AVX512-BF16" in precision.instructions("bf16", flags)
    plain = device.cpu_flags("flags\t: avx2 fma f16c\n")
    assert "no VNNI" in precision.instructions("int8", plain)
    assert "software" in precision.instructions("bf16", plain)
    assert device.cpu_flags("") == set()
    assert "fp32" == precision.instructions("fp32", set())


def test_precisions_without_instructions_are_skipped_and_say_why():
    plain = device.cpu_flags("flags\t: avx2 fma f16c\n")
    why = precision.skipped(precision.ENGINES, plain)
    assert "PyTorch eager bf16" in why and "no bf16 instructions" in why["PyTorch eager bf16"]
    assert "ONNX Runtime int8" not in why and "torch.compile fp32" not in why
    if not backends.migraphx_status().available:
        assert "MIGraphX fp16" in why and "MIGraphX int8" in why
    assert "PyTorch eager bf16" not in precision.skipped(precision.ENGINES, plain, emulated=True)
    rich = device.cpu_flags(CPUINFO)
    assert "PyTorch eager bf16" not in precision.skipped(precision.ENGINES, rich)


def test_the_two_pages_engines_make_the_commands_engines():
    """The precision page runs the floating-point engines, the int8 page the int8
    ones; together they are every engine `bench precision` runs, and both start
    from the same reference."""
    both = set(precision.FORMAT_ENGINES) | set(precision.INT8_ENGINES)
    assert both == set(precision.ENGINES)
    assert not {p for _, p in precision.FORMAT_ENGINES} & {"int8"}
    assert {p for _, p in precision.INT8_ENGINES} == {"fp32", "int8"}
    assert precision.FORMAT_ENGINES[0] == precision.INT8_ENGINES[0] == precision_results.REFERENCE


# --------------------------------------------------------------------------- the command


def _cli(*args: str) -> subprocess.CompletedProcess:
    return guide_cli(*args, timeout=120)


@pytest.mark.parametrize(
    "args,flag",
    [
        (["bench", "precision", "--batch", "8"], "--batch"),
        (["bench", "precision", "--tuning"], "--tuning"),
        (["bench", "precision", "--backend", "onnxruntime"], "--backend"),
        (["bench", "inference", "--batches", "1,8"], "--batches"),
        (["bench", "inference", "--emulated"], "--emulated"),
        (["bench", "precision", "--iterations", "0"], "--iterations"),
    ],
)
def test_bench_precision_argument_errors_are_usage_errors(args, flag):
    """Each bench subcommand takes only its own flags: argparse refuses the
    others (and values out of bounds) with exit code 2, naming the flag."""
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "error:" in last and flag in last, proc.stderr


def test_bench_precision_rejects_bad_batch_lists():
    proc = _cli("bench", "precision", "--batches", "1,x")
    assert proc.returncode == 2 and "expected batch sizes like 1,8,32" in proc.stderr


@pytest.mark.timeout(180)  # 26 s alone, 44-60 s beside the book build: a limit, not the budget
def test_bench_precision_json_rows(tmp_path):
    """The whole command on a small scale: the trained CIFAR-10 network's
    agreement and Inception v3's medians, for the reference and ONNX Runtime's
    fp32 and int8 (torch.compile's Inductor build takes minutes here), int8 in
    two of this CPU's settings (each costs two quantizations; the command
    measures every setting of ``int8_configs``, whose choice is tested above)."""
    configs = ort_int8.int8_configs(device.cpu_flags())[:2]
    result = precision.run(
        batches=(1,),
        profile=SMOKE,
        include=[("ONNX Runtime", "fp32"), ("ONNX Runtime", "int8")],
        calibration=4,
        test_images=200,
        runs=(1, 3),
        show_progress=False,
        configs=configs,
    )
    data = json.loads(json.dumps(result.to_dict()))
    int8 = [r for r in data["rows"] if r["precision"] == "int8"]
    assert [r["config"]["name"] for r in int8] == [c.name for c in configs]
    assert all(r["top1_agreement"] >= 0.8 for r in int8)
    assert all(r["least_sure_images"] == 20 and 0 <= r["least_sure_agreement"] <= 1 for r in int8)
    assert result.best_int8(1) in result.int8_rows(1)
    rows = {(r["backend"], r["precision"]): r for r in data["rows"]}
    assert set(rows) == {
        precision_results.REFERENCE,
        ("ONNX Runtime", "fp32"),
        ("ONNX Runtime", "int8"),
    }
    for row in rows.values():
        assert row["batch"] == 1 and row["ms"] > 0 and row["speedup_vs_eager_fp32"] > 0
        assert 0 <= row["accuracy"] <= 1
    assert rows[precision_results.REFERENCE]["top1_agreement"] == 1.0
    assert rows[precision_results.REFERENCE]["speedup_vs_eager_fp32"] == 1.0
    # ONNX Runtime fp32 computes the same network: the same predictions.
    # Trained until it is sure of its answers. The fixture moves 15% of the labels
    # (fixture_formats.LABEL_AGREEMENT), so 85% is the most a network can score;
    # the kept network scores about 85% on the 2,000 test images.
    assert rows[precision_results.REFERENCE]["accuracy"] >= 0.6
    low, high = rows[("ONNX Runtime", "int8")]["agreement_interval"]
    assert low <= rows[("ONNX Runtime", "int8")]["top1_agreement"] <= high
    assert rows[precision_results.REFERENCE]["test_images"] == result.test_images == 200
    assert rows[("ONNX Runtime", "fp32")]["top1_agreement"] >= 0.99
    assert rows[("ONNX Runtime", "int8")]["top1_agreement"] >= 0.8
    assert data["threads"] >= 1 and data["versions"]["ONNX Runtime"]
    assert "fixture" in data["agreement_note"] and "Inception v3" in data["speed_model"]
    assert "1" in data["iterations"]
    assert data["skipped"] == {}  # only what was asked for, and this machine runs all of it
    assert "ONNX Runtime    int8" in result.summary()


def _bench(rows) -> precision_results.PrecisionBench:
    return precision_results.PrecisionBench(
        rows=rows,
        machine="CPU (test)",
        threads=2,
        cpu_flags=[],
        versions={},
        profile="smoke",
        speed_model="m",
        agreement_model="a",
        agreement_note="n",
        warmup={1: 1},
        iterations={1: 2},
    )


def _row(backend, prec, batch, ms, agreement):
    return {
        "backend": backend,
        "precision": prec,
        "batch": batch,
        "ms": ms,
        "speedup_vs_eager_fp32": 100.0 / ms,
        "top1_agreement": agreement,
        "accuracy": agreement,
        "device": "cpu",
        "instructions": "x",
        "note": "",
        "config": {"name": f"C{ms:.0f}"} if prec == "int8" else None,
    }


def test_bench_table_best_engine_and_plot():
    import matplotlib

    matplotlib.use("Agg")
    result = _bench(
        [
            _row("PyTorch eager", "fp32", 1, 100.0, 1.0),
            _row("ONNX Runtime", "fp32", 1, 50.0, 1.0),
            _row("ONNX Runtime", "int8", 1, 40.0, 0.95),
            _row("PyTorch eager", "fp32", 8, 400.0, 1.0),
        ]
    )
    frame = result.frame()
    assert list(frame["backend"]) == [
        "PyTorch eager",
        "ONNX Runtime",
        "ONNX Runtime",
        "PyTorch eager",
    ]
    assert frame.loc[2, "vs eager fp32"] == pytest.approx(2.5)
    assert result.best(1)["precision"] == "int8"  # the fastest, never the reference
    assert result.row("ONNX Runtime", "fp32", 1)["ms"] == 50.0
    with pytest.raises(KeyError):
        result.row("MIGraphX", "fp16", 1)
    with pytest.raises(KeyError):
        result.best(8)  # only the reference ran at batch 8
    fig = result.plot(batch=1)
    points = [c for c in fig.axes[0].collections]
    assert len(points) == 3  # one point per engine that has an agreement figure
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(legend) == 3 and "PyTorch eager fp32" in legend  # named in a legend
    assert not fig.axes[0].texts  # no labels beside the points, which would overlap


def test_the_int8_choice_is_recorded_per_cpu_and_read_back(tmp_path):
    record = tmp_path / "int8-choice.json"
    config, why = ort_int8.chosen_int8(record)  # nothing measured yet: the default
    assert config == ort_int8.DEFAULT_INT8 and "ONNX Runtime's default types" in why
    rows = [_row("PyTorch eager", "fp32", 1, 100.0, 1.0)]
    for ms, setting in ((40.0, ort_int8.S8S8), (20.0, replace(ort_int8.U8S8, reduce_range=True))):
        rows.append(_row("ONNX Runtime", "int8", 1, ms, 0.995) | {"config": setting.to_dict()})
    result = replace(
        _bench(rows), cpu_flags=[f for f in ort_int8.CPU_FLAGS if f in device.cpu_flags()]
    )
    assert precision.record_int8_choice(result, record) == record
    config, why = ort_int8.chosen_int8(record)
    assert config == replace(ort_int8.U8S8, reduce_range=True)
    assert "measured on this CPU" in why and "20.0 ms" in why and "99.5%" in why
    # another CPU's choice is kept beside this one's, and not used here
    other = replace(result, cpu_flags=["made-up"])
    precision.record_int8_choice(replace(other, rows=rows[:2]), record)
    entries = json.loads(record.read_text())
    assert len(entries) == 2 and ort_int8.chosen_int8(record)[0] == config


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_a_broken_int8_choice_record_is_one_clear_error(tmp_path, content):
    record = tmp_path / "int8-choice.json"
    record.write_text(content)
    with pytest.raises(ort_int8.PrecisionError, match="int8 choice record"):
        ort_int8.chosen_int8(record)
    with pytest.raises(ort_int8.PrecisionError, match="not an int8 setting"):
        ort_int8.Int8Config.from_dict({"activation": "float", "weight": "int8"})


def test_export_int8_uses_the_default_setting_where_none_was_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(tmp_path / "runs"))
    prepared = onnx_files.export_inception(SMOKE)
    model = tmp_path / "inception_v3.onnx"
    model.write_bytes(prepared.onnx.path.read_bytes())
    out, config, why = ort_int8.export_int8(model, SMOKE, calibration=1)
    assert out == tmp_path / "inception_v3.int8.onnx" and config == ort_int8.DEFAULT_INT8
    assert "no int8 setting measured on this CPU" in why
    ops = onnx_files.op_counts(out)
    assert ops.get("QuantizeLinear", 0) > 0 and ops.get("DequantizeLinear", 0) > 0


def test_export_int8_on_the_command_line_applies_the_recorded_setting(
    tmp_path, monkeypatch, capsys
):
    """`export --int8` writes the int8 model with the setting `bench precision`
    recorded for this CPU (U8S8 with 7-bit activations here, not the default
    S8S8) and says so."""
    from onnx import TensorProto

    from rocm_dl_guide import cli

    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(tmp_path / "runs"))
    setting = replace(ort_int8.U8S8, reduce_range=True)
    rows = [
        _row("PyTorch eager", "fp32", 1, 100.0, 1.0),
        _row("ONNX Runtime", "int8", 1, 30.0, 0.99) | {"config": setting.to_dict()},
    ]
    here = [f for f in ort_int8.CPU_FLAGS if f in device.cpu_flags()]
    precision.record_int8_choice(replace(_bench(rows), cpu_flags=here))
    # one calibration batch instead of 16: the command's path, at test speed
    real = ort_int8.export_int8
    monkeypatch.setattr(ort_int8, "export_int8", lambda path, prof: real(path, prof, calibration=1))
    out = tmp_path / "out"
    assert cli.main(["export", "--output", str(out), "--int8", "--profile", "smoke"]) == 0
    printed = capsys.readouterr().out
    int8 = out / "inception_v3.int8.onnx"
    assert f"int8     {int8}" in printed
    assert "int8 setting: U8S8 per-channel reduce_range MinMax: the fastest" in printed
    assert "30.0 ms at batch 1, 99.0% top-1 agreement" in printed
    assert _zero_point_types(int8) == {TensorProto.UINT8}  # not the default's int8
    assert (out / "inception_v3.onnx").is_file() and (out / "input.bin").is_file()


def test_the_fastest_int8_config_wins_unless_it_agrees_less():
    result = _bench(
        [
            _row("PyTorch eager", "fp32", 1, 100.0, 1.0),
            _row("ONNX Runtime", "int8", 1, 40.0, 0.99),
            _row("ONNX Runtime", "int8", 1, 20.0, 0.985),
            _row("ONNX Runtime", "int8", 1, 10.0, 0.90),
        ]
    )
    assert result.best_int8(1)["config"]["name"] == "C20"  # C10 agrees 9 points less
    assert result.row("ONNX Runtime", "int8", 1)["ms"] == 20.0
    assert result.row("ONNX Runtime", "int8", 1, config="C40")["ms"] == 40.0
    assert "C10" in result.summary() and list(result.frame()["config"])[1:] == ["C40", "C20", "C10"]
    with pytest.raises(KeyError):
        result.best_int8(8)


def test_the_pages_say_what_agreement_on_fixtures_can_show():
    from rocm_dl_guide.optimization import agreement

    fixtures = agreement.what_agreement_shows(SMOKE, 0.858)
    assert SMOKE.data_source == "fixtures" and "85.8%" in fixtures and "=real" in fixtures
    assert "wrong on purpose" in fixtures
    for column in (precision_results.LEAST_SURE_COLUMN, precision_results.LOGIT_COLUMN):
        assert column in fixtures
    real = agreement.what_agreement_shows(replace(SMOKE, data_source="real"), 0.6)
    assert "60.0%" in real and "wrong on purpose" not in real and "=real" not in real


# --------------------------------------------------------------------------- shared work


def test_the_settings_share_one_preprocessing_and_one_calibration_per_method(
    cifar_onnx, tmp_path, monkeypatch
):
    """ONNX Runtime's pre-processing runs once per model and calibration once per
    calibration method; the settings quantized together are the very models each
    one quantized alone would be."""
    from onnxruntime.quantization import shape_inference

    configs = [*ort_int8.int8_configs({"avx2"}), ort_int8.S8S8]  # three MinMax, one Percentile
    configs = list(dict.fromkeys(configs))
    calls = []
    real_pre = shape_inference.quant_pre_process
    monkeypatch.setattr(
        shape_inference, "quant_pre_process", lambda *a, **k: calls.append(a) or real_pre(*a, **k)
    )
    served = []
    real_next = ort_int8.CalibrationReader.get_next

    def counted(self):
        item = real_next(self)
        served.append(item is not None)
        return item

    monkeypatch.setattr(ort_int8.CalibrationReader, "get_next", counted)
    data = batches(3)
    together = ort_int8.quantize_onnx_int8_all(
        cifar_onnx, {c: tmp_path / f"all-{i}.onnx" for i, c in enumerate(configs)}, data
    )
    assert len(calls) == 1
    methods = {c.calibration for c in configs}
    assert methods == {"MinMax", "Percentile"}
    assert sum(served) == len(data) * len(methods)  # each batch read once per method
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"all-{i}.onnx" for i in range(len(configs))
    )
    for i, config in enumerate(configs):
        alone = ort_int8.quantize_onnx_int8(
            cifar_onnx, tmp_path / f"alone-{i}.onnx", data, config=config
        )
        shared = {
            t.name: onnx.numpy_helper.to_array(t)
            for t in onnx.load(together[config]).graph.initializer
        }
        single = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(alone).graph.initializer}
        assert shared.keys() == single.keys(), config.name
        assert all(np.array_equal(shared[k], single[k]) for k in shared), config.name


def test_the_agreement_network_is_trained_once_and_shared(tmp_path, monkeypatch):
    """The precision and int8 pages compare their engines on one trained network:
    the first call trains it (on one thread) and keeps it, the next reads it back,
    and a different recipe (here: the epochs) trains it again."""
    monkeypatch.setattr(onnx_files, "models_dir", lambda: tmp_path)
    trained = []
    real_train = cifar10.train

    def train(*args, **kwargs):
        trained.append((kwargs.get("epochs"), torch.get_num_threads()))
        return real_train(*args, **kwargs)

    monkeypatch.setattr(cifar10, "train", train)
    first, data, note = agreement.trained_cifar10(SMOKE, epochs=1)
    again, _, note_again = agreement.trained_cifar10(SMOKE, epochs=1)
    assert trained == [(1, 1)]  # trained once, on one thread
    assert note_again == note and "1 epoch on" in note and "fixture" in note
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert len(agreement.test_arrays(data, 100)[0]) == 100
    agreement.trained_cifar10(SMOKE, epochs=2)
    assert [e for e, _ in trained] == [1, 2]
    # A damaged record is not trusted: the network is trained again.
    (tmp_path / (agreement.AGREEMENT_MODEL + ".json")).write_text("{not json")
    agreement.trained_cifar10(SMOKE, epochs=2)
    assert [e for e, _ in trained] == [1, 2, 2]


# --------------------------------------------------------------------------- emulated formats


PLAIN = device.cpu_flags("flags\t: avx2 fma f16c\n")
"""An AVX2-only CPU's flags, as GitHub's hosted runners have them."""


class _Fake:
    """An engine that returns zeros, for timing and labelling without a model."""

    def __init__(self, backend, prec, on_gpu=False):
        self.backend, self.precision, self.on_gpu, self.config = backend, prec, on_gpu, None
        self.device, self.note, self.calls = "cpu", "", 0

    @property
    def key(self):
        return precision.engine_key(self.backend, self.precision)

    def run(self, x):
        self.calls += 1
        return np.zeros((len(x), 10), dtype=np.float32)


def test_formats_without_instructions_are_timed_in_fewer_runs_and_labelled_emulated():
    found = [
        _Fake("PyTorch eager", "fp32"),
        _Fake("PyTorch eager", "bf16"),
        _Fake("PyTorch eager", "fp16"),
        _Fake("ONNX Runtime", "fp32"),
    ]
    rows = precision._speed_rows(found, 1, 2, 10, {}, PLAIN)
    by = {r["precision"] + r["backend"]: r for r in rows}
    for fmt in ("bf16", "fp16"):
        row = by[fmt + "PyTorch eager"]
        assert row["emulated"] and row["runs"] == list(precision.EMULATED_RUNS)
    assert not by["fp32PyTorch eager"]["emulated"] and by["fp32PyTorch eager"]["runs"] == [2, 10]
    emulated_calls = sum(precision.EMULATED_RUNS)
    assert [e.calls for e in found] == [12, emulated_calls, emulated_calls, 12]
    shown = _bench(rows).display_frame()
    labels = dict(zip(shown["precision"] + shown["backend"], shown["instructions"], strict=True))
    assert labels["bf16PyTorch eager"].startswith("emulated: no bf16 instructions")
    assert (
        "converted" in labels["bf16PyTorch eager"]
        and messages.count(precision.EMULATED_RUNS[1], "timed run") in labels["bf16PyTorch eager"]
    )
    assert labels["fp16PyTorch eager"].startswith("emulated: ")
    assert not labels["fp32PyTorch eager"].startswith("emulated")
    rich = precision._speed_rows(
        found, 1, 2, 10, {}, device.cpu_flags(CPUINFO.replace("bf16", "bf16 avx512_fp16"))
    )
    assert not any(r["emulated"] for r in rich)


def test_a_cpu_without_bf16_still_measures_the_16_bit_formats(monkeypatch):
    """On a CPU whose flags lack bf16 and fp16 (GitHub's runners), the page's
    settings run both formats, labelled emulated, beside fp32: no row is missing
    and no cell of the table is NaN."""
    monkeypatch.setattr(device, "cpu_flags", lambda cpuinfo=None: set(PLAIN))
    settings = precision.page_settings(SMOKE, precision.FORMAT_ENGINES)
    assert settings["emulated"] and settings["batches"] == (1,)
    # Two cores: nothing that compiles Inception v3, and each such row says why.
    assert not [e for e in settings["include"] if e[0] == "torch.compile"]
    for prec in ("fp32", "bf16"):
        assert precision.COMPILE_COST in settings["not_run"][f"torch.compile {prec}"]
    int8 = precision.page_settings(SMOKE, precision.INT8_ENGINES)
    assert "PT2E" in int8["not_run"]["torch.compile int8"]
    assert ("ONNX Runtime", "int8") in int8["include"]
    gpu = precision.page_settings(profiles.get("gpu"), precision.FORMAT_ENGINES)
    assert gpu["include"] == list(precision.FORMAT_ENGINES) and "not_run" not in gpu
    include = [precision_results.REFERENCE, ("PyTorch eager", "bf16"), ("PyTorch eager", "fp16")]
    result = precision.run(
        SMOKE,
        include=include,
        batches=(1,),
        test_images=100,
        runs=(1, 1),
        show_progress=False,
        emulated=True,
        not_run={"torch.compile bf16": "not asked for here"},
    )
    for fmt in ("bf16", "fp16"):
        row = result.row("PyTorch eager", fmt, 1)
        assert row["emulated"] and row["ms"] > 0 and 0 <= row["top1_agreement"] <= 1
        assert row["runs"] == [min(1, n) for n in precision.EMULATED_RUNS]  # runs=(1, 1)
    assert result.emulated_rows(1) and "emulated" in result.emulation_summary(1)
    shown = result.display_frame()
    text = shown.to_string()
    assert "nan" not in text.lower() and "None" not in text
    assert "not run: not asked for here" in list(shown["instructions"])
    assert "emulated" in result.summary()
    json.loads(json.dumps(result.to_dict()))  # the rows stay plain JSON


def test_the_table_shows_engines_that_did_not_run_as_rows_and_never_nan():
    rows = [
        _row("PyTorch eager", "fp32", 1, 100.0, 1.0),
        _row("ONNX Runtime", "fp32", 1, 50.0, None) | {"accuracy": float("nan")},
    ]
    result = replace(_bench(rows), skipped={"MIGraphX fp16": "MIGraphX is not importable here"})
    shown = result.display_frame()
    assert list(shown["backend"]) == ["PyTorch eager", "ONNX Runtime", "MIGraphX"]
    last = shown.iloc[-1]
    assert last["precision"] == "fp16" and last["instructions"].startswith("not run: MIGraphX")
    assert last["ms (median)"] == "" and last["batch"] == ""
    assert "nan" not in shown.to_string().lower()
    # split in two narrower tables: speed (every row), agreement (measured ones, once each)
    speed, agree = result.display_frames()
    assert list(speed["backend"]) == ["PyTorch eager", "ONNX Runtime", "MIGraphX"]
    assert "top-1 agreement" not in speed and "ms (median)" not in agree
    assert list(agree["backend"]) == ["PyTorch eager"]
    assert agree[precision_results.WITH_INTERVAL].iloc[0] == "100.0%"  # no interval recorded
    assert "95% interval" not in agree  # beside its figure, not a column of its own
    assert len(speed.columns) <= 7 and len(agree.columns) <= 7


def test_the_logit_change_is_the_median_largest_move_against_the_largest_logit():
    from rocm_dl_guide.optimization import agreement

    reference = np.array([[10.0, 0.0], [-4.0, 2.0], [1.0, 1.0]], dtype=np.float32)
    assert agreement.logit_change(reference, reference) == 0.0
    moved = reference + np.array([[0.1, 0.0], [0.0, 0.4], [0.5, 0.0]], dtype=np.float32)
    # per image: 0.1 / 10, 0.4 / 4, 0.5 / 1: the median is 0.1
    assert agreement.logit_change(moved, reference) == pytest.approx(0.1)
    with pytest.raises(agreement.PrecisionError):
        agreement.logit_change(moved[:2], reference)
    assert precision_results._small_percent(0.0000004) == "< 0.01%"
    assert precision_results._small_percent(0.0123) == "1.23%"


def test_the_16_bit_sentence_follows_the_figures():
    def row(prec, speedup, emulated):
        return _row("PyTorch eager", prec, 1, 100.0 / speedup, 1.0) | {
            "emulated": emulated,
            "instructions": "x",
        }

    slow = _bench([_row("PyTorch eager", "fp32", 1, 100.0, 1.0), row("bf16", 0.2, True)])
    assert "0.20x (emulated)" in slow.emulation_summary(1)
    assert "slower than fp32" in slow.emulation_summary(1)
    fast = _bench([row("bf16", 1.5, True), row("fp16", 0.5, True)])
    assert "PyTorch eager bf16 still ran at least as fast" in fast.emulation_summary(1)
    assert "slower than fp32" not in fast.emulation_summary(1)
    native = _bench([row("bf16", 1.8, False)])
    assert "instructions for each format" in native.emulation_summary(1)
    # a format with instructions that ran slower: the bare matrix product says why
    measured = {"matrix_speed": {"fp32": 1.0, "bf16": 0.5}, "matrix_size": 512}
    kernels = replace(_bench([row("bf16", 0.7, False)]), **measured)
    text = kernels.emulation_summary(1)
    assert "instructions for each format" in text and "512x512 matrix product ran at 0.50x" in text
    assert "cannot pay here" in text
    measured["matrix_speed"]["bf16"] = 0.997  # prints 1.00x: as fast, not slower
    same = replace(_bench([row("bf16", 0.7, False)]), **measured).emulation_summary(1)
    assert "1.00x in bf16" in same and "cannot pay" not in same and "autocast converts" in same
    measured["matrix_speed"]["bf16"] = 2.0
    around = replace(_bench([row("bf16", 0.7, False)]), **measured).emulation_summary(1)
    assert "2.00x in bf16" in around and "autocast converts" in around
    assert "cannot pay" not in around
    assert _bench([_row("PyTorch eager", "fp32", 1, 100.0, 1.0)]).emulation_summary(1) == ""


def test_the_gpu_record_sentence_says_what_the_record_has():
    from rocm_dl_guide.selfcheck import record

    tracked = record.latest_record()
    if tracked is not None:
        text = precision_results.gpu_record_sentence(tracked)
        assert "training" in text and "not inference ones" in text
    base = {"device": {"name": "GPU X"}, "date": "2026-01-01"}
    rows = [[64, "fp32", 90.0, 0.9], [256, "fp32", 100.0, 0.99], [256, "bf16", 108.0, 0.99]]
    figs = {"best": {"batch": 256}, "rows": rows}
    plain = precision_results.gpu_record_sentence(base | {"figures": {"inception-v3": figs}})
    assert "at batch 256" in plain and "float32 100; bf16 autocast 108 (1.08x)" in plain
    assert "bf16 gained 1.08x in the default layout." in plain
    assert "No AMD GPU has been measured" in plain  # GPU X is not an AMD one
    rows += [[256, "fp32+cl", 150.0, 0.99], [256, "bf16+cl", 202.0, 0.99]]
    both = precision_results.gpu_record_sentence(base | {"figures": {"inception-v3": figs}})
    assert "bf16 autocast channels-last 202 (2.02x)" in both
    assert "1.08x in the default layout and 1.35x in the channels-last layout" in both
    amd = base | {"device": {"name": "AMD Instinct MI300X"}, "figures": {"inception-v3": figs}}
    assert "No AMD GPU" not in precision_results.gpu_record_sentence(amd)
    none = precision_results.gpu_record_sentence(base | {"figures": {}})
    assert "no 16-bit figures" in none
    assert "No GPU verification record" in precision_results.gpu_record_sentence(None)


def test_a_capped_cpu_says_onnx_runtime_ignores_the_cap(monkeypatch):
    cpuinfo = "flags\t: avx2 fma f16c avx512f avx512_vnni avx512_bf16\n"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setattr(
        device,
        "cpu_flags",
        lambda text=None: (
            {"avx2", "fma", "f16c"}
            if text is None
            else {"avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16"}
        ),
    )
    note = ort_int8.uncapped_note(cpuinfo, cpuid_masked=False)
    assert "avx512f, avx512_vnni, avx512_bf16" in note and "MLAS" in note and "VNNI" in note
    # Under make test-slow's CPUID mask ONNX Runtime follows the cap: nothing to say.
    assert ort_int8.uncapped_note(cpuinfo, cpuid_masked=True) == ""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert ort_int8.uncapped_note(cpuinfo, cpuid_masked=False) == ""


def test_every_page_gets_the_same_random_inception_and_so_one_export(tmp_path):
    """With random weights (smoke), Inception v3 is drawn from a fixed seed: a
    second page finds the first one's export instead of exporting 95 MB again,
    and the caller's own random state is left as it was."""
    path = tmp_path / "inception_v3.onnx"
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    first = onnx_files.export_inception(SMOKE, path)
    assert torch.equal(torch.rand(3), expected)
    written = path.stat().st_mtime_ns
    second = onnx_files.export_inception(SMOKE, path)
    assert path.stat().st_mtime_ns == written  # read back, not exported again
    assert onnx_files.weights_digest(first.model) == onnx_files.weights_digest(second.model)


def test_the_compile_sentence_gives_the_speed_or_why_not():
    ran = _bench(
        [
            _row("PyTorch eager", "fp32", 1, 100.0, 1.0),
            _row("torch.compile", "fp32", 1, 50.0, 1.0),
            _row("torch.compile", "bf16", 1, 25.0, 0.99),
        ]
    )
    text = ran.compiled_summary(1)
    assert "ran fp32 at 2.00x" in text and "ran bf16 at 4.00x" in text and "99.0%" in text
    why = "the smoke profile does not compile Inception v3"
    skipped = replace(
        _bench([_row("PyTorch eager", "fp32", 1, 100.0, 1.0)]),
        skipped={"torch.compile fp32": why, "torch.compile bf16": why},
    )
    assert skipped.compiled_summary(1) == f"torch.compile fp32 and bf16 did not run: {why}."
