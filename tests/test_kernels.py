"""The kernels chapter: every Triton kernel against PyTorch, in the interpreter here.

Without a GPU, ``tests/conftest.py`` and :mod:`rocm_dl_guide.kernels.engine` run
the kernels in Triton's interpreter, on small shapes that include sizes that
are not multiples of the block, in float32 and in the 16-bit types where the
interpreter computes them (it has no bfloat16 ``tl.dot``). Also: the AMD knobs
reach the autotuner's configs only on ROCm; the ``torch.library`` operator
passes ``opcheck``, and ``torch.compile`` of a model calling it matches eager,
with gradients equal to autograd's on ``torch.softmax``; ``bench kernels`` and
the ``kernels:*`` selfcheck checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from rocm_dl_guide.core import profiles  # noqa: E402
from rocm_dl_guide.kernels import bench, engine, matmul, ops, softmax, vector_add  # noqa: E402
from rocm_dl_guide.selfcheck import record as records  # noqa: E402

DEV = engine.device()
BF16_ULP = 2.0**-7
"""One bfloat16 unit in the last place, relative: the interpreter rounds float32
to bfloat16 its own way, at most one unit from PyTorch's rounding."""


def test_the_engine_says_what_it_is():
    eng = engine.describe()
    assert eng.interpreted == (DEV.type == "cpu")
    if eng.interpreted:
        assert "interpreter on the CPU" in str(eng) and eng.to_dict()["engine"] == "interpreter"
        assert engine.peak_tflops(eng) is None
    else:
        assert "compiled for" in str(eng) and eng.to_dict()["engine"] == "compiled"


@pytest.mark.parametrize("n", [1, 1000, 4097])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_vector_add_matches_pytorch(n, dtype):
    x, y = vector_add.inputs(n, dtype, DEV)
    got, expected = vector_add.add(x, y).float(), vector_add.reference(x, y).float()
    if dtype == torch.bfloat16:
        torch.testing.assert_close(got, expected, rtol=BF16_ULP, atol=1e-6)
    else:
        assert torch.equal(got, expected)


def test_vector_add_launch_arithmetic():
    launch = vector_add.Launch(4097, 1024)
    assert launch.programs == 5 and launch.masked == 5 * 1024 - 4097
    assert launch.wavefronts_per_program == 16


@pytest.mark.parametrize("shape", [(1, 1), (3, 1000), (7, 781), (5, 2048)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_matches_torch_softmax(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x = (3 * torch.randn(*shape, generator=g)).to(DEV, dtype)
    expected = softmax.reference(x).float()
    for fn in (softmax.softmax, softmax.unfused):
        assert float((fn(x).float() - expected).abs().max()) <= softmax.TOLERANCE[dtype]


def test_softmax_bytes_and_bandwidth_arithmetic():
    assert softmax.bytes_moved(4, 10, torch.float32) == 2 * 4 * 10 * 4
    unfused = softmax.bytes_moved(4, 10, torch.float16, softmax.PASSES["unfused"])
    assert unfused == 4 * softmax.bytes_moved(4, 10, torch.float16)
    assert engine.gb_per_s(2e9, 1000.0) == pytest.approx(2.0)
    assert engine.tflops(matmul.flops(1000, 1000, 1000), 1.0) == pytest.approx(2.0)


def test_softmax_measure_agrees_and_times_every_version():
    rows = softmax.measure([(8, 100)], DEV, torch.float32, warmup=0, iterations=1)
    assert [r.version for r in rows] == list(softmax.VERSIONS)
    assert softmax.agree(rows, torch.float32) and all(r.ms > 0 and r.gb_per_s > 0 for r in rows)


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 17, 65), (100, 72, 136), (64, 64, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_matmul_matches_torch_matmul(shape, dtype):
    if DEV.type == "cpu" and dtype not in matmul.INTERPRETER_DTYPES:
        pytest.skip("the interpreter's tl.dot has no bfloat16 (a GPU runs this case)")
    a, b = matmul.inputs(*shape, dtype, DEV)
    got = matmul.matmul(a, b, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4)
    assert matmul.relative_error(got, a.float() @ b.float()) <= matmul.tolerance(dtype)


def test_float32_tolerance_follows_how_tl_dot_multiplies():
    # TF32 (NVIDIA's default for float32 tl.dot) keeps float16's 10 mantissa bits;
    # AMD's backend and the interpreter multiply in full float32.
    nvidia = engine.Engine(False, "cuda", "NVIDIA H200", False, "sm_90", "3.6.0")
    amd = engine.Engine(False, "cuda", "AMD Instinct MI300X", True, "gfx942", "3.6.0")
    cpu = engine.Engine(True, "cpu", "a CPU", False, None, "3.8.0")
    assert [matmul.fp32_dot(e) for e in (nvidia, amd, cpu)] == ["tf32", "ieee", "ieee"]
    assert matmul.tolerance(torch.float32, nvidia) == matmul.TOLERANCE[torch.float16]
    assert matmul.tolerance(torch.float32, amd) == matmul.TOLERANCE[torch.float32] == 1e-4


def test_matmul_autotunes_over_the_configs():
    a, b = matmul.inputs(72, 40, 96, torch.float16, DEV)
    got = matmul.matmul(a, b)
    assert matmul.relative_error(got, a.float() @ b.float()) <= matmul.TOLERANCE[torch.float16]
    table = matmul.tuning_table()
    assert len(table) == len(matmul.configs()) and table == sorted(table, key=lambda r: r["ms"])
    assert matmul.tuned_kernel.best_config.kwargs["BLOCK_M"] == table[0]["BLOCK_M"]


def _engine(**changes) -> engine.Engine:
    base = engine.Engine(False, "cuda", "AMD Instinct MI300X", True, "gfx942", "3.8.0")
    return replace(base, **changes)


def test_amd_knobs_only_where_torch_version_hip_is_set():
    knobs = {"waves_per_eu", "matrix_instr_nonkdim", "kpack"}
    mi300 = [set(c.kwargs) for c in matmul.configs(_engine())]
    assert any(knobs <= k for k in mi300)
    mi355 = [set(c.kwargs) for c in matmul.configs(_engine(arch="gfx950"))]
    assert any("matrix_instr_nonkdim" in k for k in mi355) and not any("kpack" in k for k in mi355)
    nvidia = matmul.configs(_engine(hip=False, arch="sm_90", name="NVIDIA H100 80GB HBM3"))
    radeon = matmul.configs(_engine(arch="gfx1100"))
    interpreter = matmul.configs(_engine(interpreted=True, device="cpu", arch=None))
    for plain in (nvidia, radeon, interpreter):
        assert not any(knobs & set(c.kwargs) for c in plain)
    assert all(c.num_stages == 2 for c in matmul.configs(_engine()))


def test_peak_comes_from_the_table():
    assert engine.peak_tflops(_engine()) == pytest.approx(
        (1307.4, "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html")
    )
    assert engine.peak_tflops(_engine(name="Radeon RX 7900 XTX", arch="gfx1100")) is None


def test_peak_bandwidth_comes_from_the_table():
    from rocm_dl_guide.core import device as devices

    mi300x = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
    assert engine.peak_bandwidth(_engine()) == (5300.0, mi300x)
    assert engine.peak_bandwidth(_engine(name="NVIDIA H200", hip=False, arch="sm_90"))[0] == 4800.0
    pcie = devices.peak_memory_bandwidth("NVIDIA H100 PCIe")
    assert pcie[0] == 2000.0 and pcie[1].startswith("https://docs.nvidia.com/")
    assert devices.peak_memory_bandwidth("NVIDIA H100 80GB HBM3")[0] == 3350.0
    assert engine.peak_bandwidth(_engine(name="Radeon RX 7900 XTX", arch="gfx1100")) is None
    assert engine.peak_bandwidth(_engine(interpreted=True)) is None
    table = json.loads(devices.PEAK_FILE.read_text(encoding="utf-8"))["devices"]
    for entry in table:  # a number from a vendor page, or null: never missing
        assert "memory_gb_per_s" in entry and entry["source"].startswith("https://")
        assert entry["memory_gb_per_s"] is None or entry["memory_gb_per_s"] > 0


def _record(tmp_path, figures: dict, name: str = "NVIDIA H200"):
    from rocm_dl_guide.selfcheck.report import REPORT_FORMAT

    path = tmp_path / "gpu-verification.json"
    record = {
        "format": REPORT_FORMAT,
        "date": "2026-01-02 03:04 UTC",
        "commit": "abc",
        "device": {"type": "cuda", "name": name},
        "versions": {},
        "figures": figures,
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


def test_recorded_figures_get_their_fractions_from_the_table(tmp_path):
    path = _record(tmp_path, {
        "kernels:matmul": {"tflops": 494.75, "matmul_vs_torch": 0.8},
        "kernels:softmax": {"softmax_vs_unfused": 4.2, "softmax_vs_torch": 1.6},
        "kernels:vector-add": {"gb_per_s": 2400.0},
    })  # fmt: skip
    mm = records.recorded("kernels:matmul", path)
    assert mm["fraction_of_peak"] == pytest.approx(0.5) and mm["device"] == "NVIDIA H200"
    vector_add_figures = records.recorded("kernels:vector-add", path)
    assert vector_add_figures["fraction_of_bandwidth"] == pytest.approx(0.5)
    old = records.recorded("kernels:softmax", path)  # a record from before gb_per_s was kept
    assert "gb_per_s" not in old and "fraction_of_bandwidth" not in old
    assert records.recorded("kernels:compile", path) is None
    assert records.recorded("kernels:softmax", str(tmp_path / "none.json")) is None
    text = matmul.recorded_reading(mm)
    assert "last GPU record, made on an NVIDIA H200 (no AMD GPU has been measured yet)" in text
    assert "50% of that GPU's 989.5" in text
    assert matmul.recorded_reading(None).startswith("No GPU record")
    unknown = records.recorded("kernels:vector-add", _record(tmp_path, {
        "kernels:vector-add": {"gb_per_s": 900.0}}, name="Radeon RX 7900 XTX"))  # fmt: skip
    assert unknown == {"gb_per_s": 900.0, "device": "Radeon RX 7900 XTX",
                       "date": "2026-01-02 03:04 UTC",
                       "where": "on a Radeon RX 7900 XTX"}  # fmt: skip


def test_softmax_bandwidth_reading_never_guesses(tmp_path):
    rows = [
        softmax.Row(v, 8192, 8192, "float32", 1.0, g, 0.0)
        for v, g in zip(softmax.VERSIONS, (500.0, 2000.0, 1900.0, 2650.0), strict=True)
    ]
    gpu = softmax.bandwidth_reading(rows, _engine(), None)
    assert "2,650 GB/s, 50% of the 5,300 GB/s peak of AMD Instinct MI300X" in gpu
    other = softmax.bandwidth_reading(rows, _engine(name="Radeon RX 7900 XTX"), None)
    assert "no memory bandwidth" in other and "%" not in other
    cpu = _engine(interpreted=True)
    assert "No GPU record" in softmax.bandwidth_reading(rows, cpu, None)
    old = records.recorded("kernels:softmax", _record(tmp_path, {
        "kernels:softmax": {"softmax_vs_unfused": 4.2, "softmax_vs_torch": 1.6}}))  # fmt: skip
    text = softmax.bandwidth_reading(rows, cpu, old)
    assert "holds only the two ratios" in text and "nan" not in text.lower() and "2,650" not in text
    new = records.recorded("kernels:softmax", _record(tmp_path, {
        "kernels:softmax": {"softmax_vs_unfused": 4.2, "gb_per_s": 3600.0,
                            "fraction_of_bandwidth": 0.75}}))  # fmt: skip
    text = softmax.bandwidth_reading(rows, cpu, new)
    assert (
        "last GPU record, made on an NVIDIA H200 (no AMD GPU has been measured yet)" in text
        and "3,600 GB/s, 75% of that GPU's 4,800" in text
    )


def test_tables_label_the_interpreter_and_keep_three_significant_digits():
    """GB/s and TFLOP/s read with three significant digits (4.00, 1.80, 0.00170); an
    interpreted kernel's row says its time is no speed, and the matmul's shows no
    TFLOP/s for it."""
    fmt = softmax.TABLE_FORMATS["GB/s"]
    assert [fmt.format(v) for v in (4.0, 1.8, 0.0017, 257.7, 3537.6)] == [
        "4.00", "1.80", "0.00170", "258", "3,538"]  # fmt: skip
    assert matmul.TABLE_FORMATS["TFLOP/s"].format(0.02) == "0.0200"
    rows = [softmax.Row(v, 8, 8, "float32", 1.0, 2.0, 0.0) for v in softmax.VERSIONS]
    shown = [r["version"] for r in softmax.table(rows, interpreted=True)]
    assert shown[-1] == softmax.INTERPRETED and "correctness only" in shown[-1]
    assert [r["version"] for r in softmax.table(rows)] == list(softmax.VERSIONS)
    mm = [matmul.Row(v, 8, 8, 8, "float16", 1.0, 0.5, None, 0.0, "")
          for v in ("Triton kernel", "torch.matmul")]  # fmt: skip
    interp = matmul.table(mm, interpreted=True)
    assert interp[0]["version"] == matmul.INTERPRETED and interp[0]["TFLOP/s"] is None
    assert interp[1]["TFLOP/s"] == 0.5 and matmul.table(mm)[0]["TFLOP/s"] == 0.5


def test_kernel_checks_record_bandwidth_and_its_fraction():
    from rocm_dl_guide.selfcheck import kernel_checks

    share, figures = kernel_checks.bandwidth_figures(2400.0, "NVIDIA H200")
    assert figures == {"gb_per_s": 2400.0, "fraction_of_bandwidth": 0.5} and "50%" in share
    assert kernel_checks.bandwidth_figures(900.0, "Radeon RX 7900 XTX") == ("", {"gb_per_s": 900.0})
    record = {
        "engine": {"name": "NVIDIA H200"},
        "softmax": [{"version": v, "rows": 8192, "cols": 8192, "gb_per_s": g}
                    for v, g in (("unfused PyTorch", 800.0), ("Triton kernel", 3600.0))],
    }  # fmt: skip
    targets = {"softmax_vs_unfused": 4.5, "softmax_vs_torch": 1.7, "met": {}}
    detail, figures = kernel_checks._describe("softmax", record, targets)
    assert figures["gb_per_s"] == 3600.0 and figures["fraction_of_bandwidth"] == 0.75
    assert "3600 GB/s (75% of the 4,800 GB/s peak)" in detail


def test_the_operator_passes_opcheck_and_its_backward_is_autograds():
    x = torch.randn(4, 3, 37, device=DEV, requires_grad=True)
    torch.library.opcheck(ops.softmax, (torch.randn(4, 10, device=DEV, requires_grad=True),))
    y = ops.softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=-1))
    grad = torch.randn_like(y)
    (ours,) = torch.autograd.grad(y, x, grad)
    (theirs,) = torch.autograd.grad(torch.softmax(x, dim=-1), x, grad)
    torch.testing.assert_close(ours, theirs)


def test_torch_compile_of_a_model_on_the_operator_matches_eager_and_autograd():
    diffs = ops.check_compiled(tokens=12, dim=16, dev=DEV)
    assert diffs["compiled_vs_eager"] <= 1e-5
    assert diffs["eager_vs_torch_softmax"] <= 1e-5
    assert diffs["grad_vs_autograd"] <= 1e-4


def test_bench_targets_are_read_off_the_record():
    record = {
        "engine": {"engine": "compiled"},
        "softmax": [
            {"version": v, "rows": 8, "cols": 8, "gb_per_s": g}
            for v, g in (("unfused PyTorch", 100), ("torch.softmax", 500), ("Triton kernel", 450))
        ],
        "matmul": [
            {"version": "Triton kernel", "M": 4, "N": 4, "K": 4, "tflops": 300},
            {"version": "torch.matmul", "M": 4, "N": 4, "K": 4, "tflops": 500},
        ],
    }
    got = bench.targets(record)
    assert got["softmax_vs_unfused"] == pytest.approx(4.5)
    assert got["softmax_vs_torch"] == pytest.approx(0.9)
    assert got["met"] == {
        "softmax_vs_unfused": True,
        "softmax_vs_torch": True,
        "matmul_vs_torch": False,
    }
    assert "met" not in bench.targets({**record, "engine": {"engine": "interpreter"}})


def test_bench_kernels_json_names_the_engine(capsys):
    from rocm_dl_guide import cli

    code = cli.main(["bench", "kernels", "--parts", "vector_add,softmax", "--iterations", "1",
                     "--warmup", "0", "--profile", "smoke", "--json"])  # fmt: skip
    out = capsys.readouterr().out.strip().splitlines()
    record = json.loads(out[-1])
    assert code == 0 and record["ok"] and record["iterations"] == 1 and record["warmup"] == 0
    assert record["engine"]["engine"] == ("interpreter" if DEV.type == "cpu" else "compiled")
    assert {r["n"] for r in record["vector_add"]} == set(vector_add.SIZES["smoke"])
    assert "matmul" not in record and record["targets"]["measured"] == (DEV.type == "cuda")


def test_bench_kernels_refuses_an_unknown_part(capsys):
    from rocm_dl_guide import cli

    assert cli.main(["bench", "kernels", "--parts", "conv"]) == 2
    assert "unknown part(s) conv" in capsys.readouterr().err


def test_kernel_checks_are_skipped_on_a_cpu(tmp_path):
    from rocm_dl_guide.selfcheck import kernel_checks, runner
    from rocm_dl_guide.selfcheck.checks import Setup

    assert set(kernel_checks.NAMES) <= set(runner.CHECK_NAMES)
    ctx = Setup(torch.device("cpu"), profiles.get("smoke"), tmp_path, 1, False)
    for name in kernel_checks.NAMES:
        outcome = kernel_checks.check_kernel(ctx, name)
        assert outcome.status == "skip" and "no GPU" in outcome.detail


@pytest.mark.skipif(DEV.type != "cpu", reason="the interpreter is chosen where there is no GPU")
def test_triton_imported_before_the_engine_is_a_clear_error():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = "import triton.language\nimport rocm_dl_guide.kernels\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert proc.returncode != 0
    assert "Triton was imported before its interpreter was chosen" in proc.stderr
