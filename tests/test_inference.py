"""The optimisation chapter: backend selection (MIGraphX, else ONNX Runtime, and
the provider a session really uses), agreement with PyTorch, saved compiled
models, benchmarks, the C++ example's sources, and the command line's handling
of bad input (one line on stderr, no traceback).

MIGraphX cannot be installed here; its code path runs against a stand-in module
with MIGraphX's Python API (``parse_onnx``, ``program.compile/run``,
``save``/``load``) that computes with ONNX Runtime underneath."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from conftest import guide_cli  # noqa: E402
from rocm_dl_guide.casestudies import inception_pretrained  # noqa: E402
from rocm_dl_guide.core import profiles  # noqa: E402
from rocm_dl_guide.optimization import (  # noqa: E402
    backends,
    bench,
    cpp_example,
    inference,
    onnx_files,
)
from rocm_dl_guide.optimization.graph_views import graph_views  # noqa: E402

SMOKE = profiles.current("smoke")
GPU = profiles.current("gpu")

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "book" / "optimization"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Inception v3 (smoke profile: random weights) and its ONNX export, once."""
    path = tmp_path_factory.mktemp("models") / "inception_v3.onnx"
    return onnx_files.export_inception(SMOKE, path)


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return inference.image_batch()


@pytest.fixture
def no_migraphx(monkeypatch):
    monkeypatch.setattr(
        backends,
        "_MIGRAPHX",
        backends.MigraphxStatus(None, "MIGraphX is not importable here (test)"),
    )


# --------------------------------------------------------------------------- a MIGraphX stand-in


class _Shape:
    def __init__(self, lens):
        self._lens = list(lens)

    def lens(self):
        return list(self._lens)


class _Program:
    """What the tests need of ``migraphx.program``, computed by ONNX Runtime."""

    def __init__(self, path: str, batch: int):
        self.path, self.batch = path, batch
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        inp = self.session.get_inputs()[0]
        self.name = inp.name
        self.shape = [batch if not isinstance(d, int) else d for d in inp.shape]
        self.compiled_with: dict | None = None

    def get_parameter_names(self):
        return ["main:#output_0", self.name]

    def get_parameter_shapes(self):
        return {self.name: _Shape(self.shape), "main:#output_0": _Shape([self.batch, 1000])}

    def compile(self, target, offload_copy=True, fast_math=True, exhaustive_tune=False):
        assert target == "gpu-target"
        self.compiled_with = {"offload_copy": offload_copy, "exhaustive_tune": exhaustive_tune}

    def run(self, params):
        assert self.compiled_with is not None, "run before compile"
        (name, value), *rest = params.items()
        assert not rest and name == self.name
        assert list(value.shape) == self.shape, "MIGraphX programs have fixed shapes"
        return [self.session.run(None, {name: value})[0]]


def _fake_migraphx(saved: dict) -> types.ModuleType:
    mod = types.ModuleType("migraphx")
    mod.__version__ = "0.0-test"

    def parse_onnx(filename, default_dim_value=0, **kwargs):
        data = Path(filename).read_bytes()
        if not data.startswith(b"\x08"):  # an ONNX ModelProto starts with ir_version
            raise RuntimeError("parse_onnx: bad file")
        return _Program(filename, default_dim_value or 1)

    def save(prog, filename, format="msgpack"):
        assert format == "msgpack"
        Path(filename).write_bytes(b"MXR")
        saved[str(Path(filename))] = prog

    def load(filename, format="msgpack"):
        if Path(filename).read_bytes() != b"MXR" or not saved:
            raise RuntimeError("load: not a program")
        return list(saved.values())[-1]

    mod.parse_onnx = parse_onnx
    mod.get_target = lambda name: "gpu-target" if name == "gpu" else name
    mod.save = save
    mod.load = load
    return mod


@pytest.fixture
def fake_migraphx(monkeypatch):
    saved: dict = {}
    status = backends.MigraphxStatus(_fake_migraphx(saved), "a stand-in module (test)")
    monkeypatch.setattr(backends, "_MIGRAPHX", status)
    return status


# --------------------------------------------------------------------------- backend selection


def test_unknown_backend_name_is_one_clear_error():
    with pytest.raises(backends.BackendError, match="unknown backend 'tensorrt'") as info:
        backends.select_backend("tensorrt")
    assert "auto, migraphx, onnxruntime" in str(info.value)
    assert "\n" not in str(info.value)


def test_migraphx_absent_gives_onnxruntime_and_says_so(no_migraphx, prepared):
    assert backends.select_backend() == "onnxruntime"
    assert backends.select_backend("auto") == "onnxruntime"
    assert backends.select_backend("ONNX-Runtime") == "onnxruntime"
    with pytest.raises(backends.BackendError, match="not importable"):
        backends.select_backend("migraphx")
    compiled = inference.compile_model(prepared.onnx.path, threads=1)
    assert compiled.backend == "onnxruntime"
    note = inference.backend_note(compiled)
    assert "ONNX Runtime" in note and "not from MIGraphX" in note and "not importable" in note
    table = backends.backend_table()
    assert table.auto == "ONNX Runtime"
    assert list(table.frame["available"]) == ["no", "yes"]


def _built_text(page: str) -> str:
    """The text of a built page of the chapter, tags removed, whitespace collapsed."""
    import html
    import re

    raw = (ROOT / "_build" / "html" / "book" / "optimization" / f"{page}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw)).replace("\u2019", "'")
    return " ".join(text.split())


@pytest.mark.book
def test_every_executed_page_says_which_backend_ran(build):
    """The built pages say which backend produced their outputs (inference.backend_note),
    and the chapter's index lists the backends found and the one the pages ran on."""
    assert build.code == 0, "the book did not build"
    ran = backends.backend_table().auto  # what the build's kernels found too
    for page in ("migraphx-python", "tuning", "benchmark"):
        assert f"Backend. These outputs come from {ran}" in _built_text(page), page
    index = _built_text("index")
    assert "Inference backends found by this build" in index
    assert f"therefore ran on {ran}" in index


def test_this_machine_really_lacks_migraphx():
    """The book's default build must take the ONNX Runtime path here."""
    status = backends.migraphx_status(refresh=True)
    if status.available:  # pragma: no cover - a ROCm machine
        pytest.skip(f"MIGraphX is installed here: {status.how}")
    assert backends.select_backend() == "onnxruntime"


def test_reported_provider_is_the_one_the_session_uses(no_migraphx, prepared, monkeypatch):
    # Pretend this ONNX Runtime build offers the MIGraphX provider (as
    # onnxruntime-migraphx does without ROCm): the session is asked for it,
    # falls back to the CPU, and the CPU is what gets reported.
    real = ort.get_available_providers()
    if inference.MIGRAPHX_EP in real:  # pragma: no cover - onnxruntime with a working MIGraphX EP
        pytest.skip("this ONNX Runtime really has the MIGraphX provider")
    monkeypatch.setattr(ort, "get_available_providers", lambda: [inference.MIGRAPHX_EP, *real])
    compiled = inference.compile_model(prepared.onnx.path, threads=1)
    session_providers = compiled.handle.get_providers()
    assert compiled.providers == session_providers
    assert compiled.provider == session_providers[0] == inference.CPU_EP
    assert "CPUExecutionProvider" in inference.backend_note(compiled)
    assert inference.tolerance_for(compiled, "cpu") == inference.CPU_TOLERANCE


def test_migraphx_module_is_found_in_rocm_lib(tmp_path, monkeypatch):
    if backends._try_import_migraphx()[0] is not None:  # pragma: no cover - a ROCm machine
        pytest.skip("a real MIGraphX is importable here")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "migraphx.py").write_text("__version__ = '9.9'\ndef parse_onnx(*a, **k):\n    pass\n")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(lib)])
    monkeypatch.delitem(sys.modules, "migraphx", raising=False)
    monkeypatch.setattr(backends, "_MIGRAPHX", None)
    try:
        status = backends.migraphx_status()
        assert status.available and status.module.__version__ == "9.9"
        assert str(lib) in status.how and "PYTHONPATH" in status.how
        assert backends.select_backend() == "migraphx"
    finally:
        sys.modules.pop("migraphx", None)


def test_pypi_placeholder_migraphx_is_not_mistaken_for_the_real_one(tmp_path, monkeypatch):
    (tmp_path / "migraphx.py").write_text("# placeholder\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "migraphx", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    monkeypatch.setattr(backends, "_MIGRAPHX", None)
    try:
        status = backends.migraphx_status()
        assert not status.available and "placeholder" in status.how
    finally:
        sys.modules.pop("migraphx", None)


# --------------------------------------------------------------------------- export and agreement


def test_export_reads_names_and_dynamic_batch_from_the_file(prepared):
    onnx_model = prepared.onnx
    assert onnx_model.path.is_file() and onnx_model.size_bytes > 50e6
    again = onnx_files.read_onnx(onnx_model.path)
    assert again.input_name == onnx_model.input_name
    assert again.input_shape[1:] == [3, 299, 299]
    assert isinstance(again.input_shape[0], str)  # symbolic batch axis
    assert again.output_shape[1:] == [1000]
    assert onnx_model.opset == onnx_files.OPSET
    assert onnx_model.weights_note.startswith("random weights")
    counts = onnx_model.op_counts()
    assert counts["Conv"] == 94
    assert not list(onnx_model.path.parent.glob(".*.tmp"))


def test_outputs_agree_with_pytorch_within_tolerance(no_migraphx, prepared, photo):
    compiled = inference.compile_model(prepared.onnx.path, threads=1)
    result = inference.agreement(compiled, prepared.model, photo, "cpu")
    assert result.tolerance == inference.CPU_TOLERANCE == 1e-4
    assert result.max_rel_error <= result.tolerance, result.summary()
    assert result.same_top1 and result.ok
    assert "within the tolerance" in result.summary()


def test_batches_of_eight_work_through_the_dynamic_axis(no_migraphx, prepared):
    compiled = inference.compile_model(prepared.onnx.path, threads=1)
    x = inference.image_batch(batch_size=8)
    out = compiled.run(x)
    assert out.shape == (8, 1000)
    np.testing.assert_allclose(
        out, np.repeat(out[:1], 8, axis=0), rtol=0, atol=1e-3 * abs(out).max()
    )


def test_cpu_description_counts_cores_in_words(monkeypatch):
    monkeypatch.setattr(inference, "default_threads", lambda: 1)
    monkeypatch.setattr(inference, "usable_cores", lambda: 1)
    assert inference.cpu_description().endswith(", 1 core)")
    monkeypatch.setattr(inference, "default_threads", lambda: 2)
    monkeypatch.setattr(inference, "usable_cores", lambda: 2)
    assert inference.cpu_description().endswith(", 2 cores)")
    monkeypatch.setattr(inference, "default_threads", lambda: 1)
    assert inference.cpu_description().endswith(", 1 of 2 cores)")


def test_inference_takes_no_more_threads_than_the_build_gives_it(monkeypatch):
    monkeypatch.setattr(inference, "usable_cores", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert inference.default_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert inference.default_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # never more than the cores
    assert inference.default_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    assert inference.default_threads() == 2


def test_max_rel_error_is_relative_to_the_largest_logit():
    ref = np.array([[10.0, 0.001, -5.0]])
    assert inference.max_rel_error(ref, ref) == 0
    assert inference.max_rel_error(ref + [[0, 0.01, 0]], ref) == pytest.approx(0.001)
    with pytest.raises(inference.InputShapeError):
        inference.max_rel_error(ref, ref[:, :2])


def test_optimisations_off_and_on_give_the_same_answer(no_migraphx, prepared, photo):
    off = inference.compile_model(prepared.onnx.path, optimize=False, threads=1)
    on = inference.compile_model(prepared.onnx.path, optimize=True, threads=1)
    assert "ORT_DISABLE_ALL" in off.settings and "ORT_ENABLE_ALL" in on.settings
    assert inference.max_rel_error(off.run(photo), on.run(photo)) <= inference.CPU_TOLERANCE


def test_saved_and_reloaded_model_gives_the_same_outputs(no_migraphx, prepared, photo, tmp_path):
    saved = inference.save_compiled(prepared.onnx.path, tmp_path / "m.opt.onnx", threads=1)
    assert saved.path.is_file() and saved.backend == "onnxruntime"
    assert not list(tmp_path.glob(".*.tmp"))
    before = saved.compiled.run(photo)
    loaded = inference.load_compiled(saved.path, threads=1)
    assert "no optimisation at load" in loaded.settings
    after = loaded.run(photo)
    np.testing.assert_array_equal(before, after)
    # The saved graph is the optimised one: fewer nodes, fused blocked-layout convolutions.
    counts = onnx_files.op_counts(saved.path)
    assert sum(counts.values()) < prepared.onnx.nodes
    assert "Conv" not in counts


def test_default_saved_name_sits_next_to_the_model(no_migraphx, prepared):
    saved = inference.save_compiled(prepared.onnx.path, threads=1)
    try:
        assert saved.path == prepared.onnx.path.with_name("inception_v3.opt.onnx")
    finally:
        saved.path.unlink()


# --------------------------------------------------------------------------- the MIGraphX path


def test_migraphx_path_reads_the_input_name_and_compiles_for_the_batch(
    fake_migraphx, prepared, photo
):
    compiled = inference.compile_model(prepared.onnx.path, batch_size=1, tuned=True)
    assert compiled.backend == "migraphx" and compiled.provider == "MIGraphX gpu target"
    assert compiled.input_name == prepared.onnx.input_name  # read, not assumed; outputs skipped
    assert compiled.input_shape == [1, 3, 299, 299]
    assert compiled.handle.compiled_with == {"offload_copy": True, "exhaustive_tune": True}
    assert compiled.on_gpu and inference.tolerance_for(compiled) == inference.GPU_TOLERANCE
    result = inference.agreement(compiled, prepared.model, photo, "cpu")
    assert result.ok, result.summary()
    assert "from MIGraphX" in inference.backend_note(compiled)
    with pytest.raises(inference.InputShapeError, match="1 x 3 x 299 x 299"):
        compiled.run(inference.image_batch(batch_size=2))
    eight = inference.compile_model(prepared.onnx.path, batch_size=8)
    assert eight.input_shape[0] == 8


def test_migraphx_path_saves_and_loads_mxr(fake_migraphx, prepared, photo, tmp_path):
    saved = inference.save_compiled(prepared.onnx.path, tmp_path / "inception_v3.mxr")
    assert saved.backend == "migraphx" and saved.path.suffix == ".mxr"
    loaded = inference.load_compiled(saved.path)
    np.testing.assert_array_equal(saved.compiled.run(photo), loaded.run(photo))


def test_an_mxr_file_without_migraphx_is_one_clear_error(no_migraphx, tmp_path):
    mxr = tmp_path / "m.mxr"
    mxr.write_bytes(b"MXR")
    with pytest.raises(backends.BackendError, match="needs MIGraphX"):
        inference.load_compiled(mxr)


# --------------------------------------------------------------------------- bad input


def test_wrong_input_shape_is_one_clear_error(no_migraphx, prepared):
    compiled = inference.compile_model(prepared.onnx.path, threads=1)
    with pytest.raises(inference.InputShapeError, match=r"1 x 3 x 224 x 224 does not fit"):
        compiled.run(np.zeros((1, 3, 224, 224), np.float32))
    with pytest.raises(inference.InputShapeError, match="batch x 3 x 299 x 299"):
        compiled.run(np.zeros((3, 299, 299), np.float32))


@pytest.mark.parametrize("kind", ["truncated", "garbage", "empty", "missing"])
def test_bad_model_files_are_one_clear_error(kind, prepared, tmp_path):
    path = tmp_path / "model.onnx"
    data = prepared.onnx.path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":
        path.write_bytes(os.urandom(4096))
    elif kind == "empty":
        path.write_bytes(b"")
    with pytest.raises(onnx_files.ModelFileError) as info:
        inference.compile_model(path, "onnxruntime", threads=1)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    expected = "no such file" if kind == "missing" else "not a valid ONNX model"
    assert expected in message


# --------------------------------------------------------------------------- benchmarks


def test_measure_takes_the_median_after_warm_up(monkeypatch):
    # A fake clock: each call takes the next of these seconds (two slow warm-ups).
    clock, durations, calls = [0.0], iter([0.5, 0.5, 0.005, 0.001, 0.003, 0.002, 0.004]), []

    def call():
        calls.append(1)
        clock[0] += next(durations)

    from rocm_dl_guide.core import timing as timing_module

    fake = types.SimpleNamespace(perf_counter=lambda: clock[0])
    monkeypatch.setattr(timing_module, "time", fake)
    timing = bench.measure(call, warmup=2, iterations=5)
    assert len(calls) == 7 and timing.iterations == 5 and timing.warmup == 2
    assert timing.times_ms == pytest.approx([5, 1, 3, 2, 4])  # warm-ups not timed
    assert timing.median_ms == pytest.approx(3)
    with pytest.raises(ValueError):
        bench.measure(lambda: None, 0, 0)


def test_side_by_side_timing_alternates_blocks():
    order: list[str] = []
    timings = bench.measure_side_by_side(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")},
        warmup=1,
        iterations=4,
        rounds=2,
    )
    assert order == ["a", "b", "a", "a", "b", "b", "b", "b", "a", "a"]
    assert timings["a"].iterations == timings["b"].iterations == 4
    assert timings["a"].warmup == 1


def test_smoke_profile_uses_fewer_runs_at_large_batches():
    assert bench.iterations_for(1, SMOKE) == (2, 10)
    assert bench.iterations_for(32, SMOKE) == (1, 3)
    assert bench.iterations_for(32, GPU) == (10, 100)
    assert bench.batch_sizes(GPU) == (1, 8, 32)
    assert bench.batch_sizes(SMOKE) == (1, 2, 4)


def test_bench_run_reports_side_by_side_medians(no_migraphx, prepared):
    result = bench.run(
        SMOKE, batch=1, iterations=2, warmup=1, threads=1, prepared=prepared, tuning=True
    )
    data = result.to_dict()
    for key in ("backend", "device", "eager_ms", "compiled_ms", "speedup", "max_rel_error"):
        assert key in data
    assert data["backend"] == "onnxruntime" and data["provider"] == inference.CPU_EP
    assert data["eager_ms"] > 0 and data["compiled_ms"] > 0
    assert data["speedup"] == pytest.approx(data["eager_ms"] / data["compiled_ms"])
    assert data["within_tolerance"] and data["max_rel_error"] <= data["tolerance"]
    assert data["untuned_ms"] > 0 and data["tuned_ms"] > 0
    assert "ORT_DISABLE_ALL" in data["tuning_method"]
    assert json.loads(json.dumps(data)) == data
    assert "batch 1" in result.summary()


def test_tuning_labels_say_graph_optimisations_where_nothing_is_tuned():
    timing = bench.Timing([2.0, 3.0], 1)
    result = bench.TuningResult("onnxruntime", inference.CPU_EP, "CPU", "m", timing, timing,
                                "off", "on", 1, 2, 0.1, 0.2)  # fmt: skip
    assert result.labels == (
        "ONNX Runtime graph optimisations off (CPU)",
        "ONNX Runtime graph optimisations on (CPU)",
    )
    assert "tuned" not in " ".join(result.frame()["variant"]) and "(CPU)" in result.title
    mgx = bench.TuningResult("migraphx", "gpu", "GPU", "m", timing, timing, "a", "b", 1, 2, 1, 1)
    assert mgx.labels[1] == "MIGraphX exhaustive_tune=True" and "tuning" in mgx.title


def test_sweep_gives_latency_and_throughput_per_batch(no_migraphx, prepared):
    result = bench.sweep(SMOKE, (1, 2), prepared=prepared, threads=1, runs=(0, 1))
    frame = result.frame
    assert list(frame["batch"]) == [1, 1, 2, 2]
    assert frame["runtime"].iloc[0] == "PyTorch eager"
    assert (frame["images/s"] > 0).all()
    row = frame.iloc[2]
    assert row["images/s"] == pytest.approx(2e3 / row["latency (ms)"])
    assert result.max_rel_error <= inference.CPU_TOLERANCE
    assert result.row(2)["latency (ms)"] == frame.iloc[3]["latency (ms)"]
    assert result.row(1, eager=True)["runtime"] == "PyTorch eager"
    # the sweep keeps what bench.run measured at each batch: the same numbers as the table
    assert sorted(result.runs) == [1, 2]
    assert result.runs[2].compiled_ms == result.row(2)["latency (ms)"]
    assert result.runs[1].eager_ms == result.row(1, eager=True)["latency (ms)"]
    assert result.runs[1].warmup == 0 and result.runs[1].iterations == 1
    fig = result.plot()
    assert len(fig.axes) == 2
    assert len(fig.axes[1].patches) == 4  # a bar per (batch, runtime)
    assert fig.axes[1].patches[3].get_height() == pytest.approx(frame.iloc[3]["images/s"])
    import matplotlib.pyplot as plt

    plt.close(fig)


# --------------------------------------------------------------------------- the C++ example

# Signatures of the MIGraphX C++ API (migraphx/migraphx.hpp) that the example
# uses, for a compile-only check where MIGraphX is not installed.
_MIGRAPHX_HPP = """
#include <cstddef>
#include <vector>
typedef enum { migraphx_shape_float_type, migraphx_shape_half_type } migraphx_shape_datatype_t;
namespace migraphx {
struct shape { shape(); std::vector<std::size_t> lengths() const;
  migraphx_shape_datatype_t type() const; };
struct argument { argument(shape, void*); shape get_shape() const; char* data() const; };
struct arguments { template <class H, class L> arguments(H*, L); std::size_t size() const;
  argument operator[](std::size_t) const; };
struct target { target(const char*); };
struct program_parameter_shapes { std::size_t size() const;
  shape operator[](const char*) const; std::vector<const char*> names() const; };
struct program_parameters { program_parameters();
  void add(const char*, const argument&) const; };
struct compile_options { compile_options(); void set_offload_copy(bool value = true);
  void set_exhaustive_tune_flag(bool value = true); };
struct program { program(); void compile(const target&, const compile_options&) const;
  program_parameter_shapes get_parameter_shapes() const;
  arguments eval(const program_parameters&) const; };
struct file_options { file_options(); void set_file_format(const char*); };
program load(const char*, const file_options&);
void save(const program&, const char*, const file_options&);
struct onnx_options { onnx_options(); void set_default_dim_value(unsigned int); };
program parse_onnx(const char*, const onnx_options&);
}
"""


def test_cpp_example_sources_and_page():
    cpp = (ROOT / "code" / "cpp" / "inception_inference.cpp").read_text()
    cmake = (ROOT / "code" / "cpp" / "CMakeLists.txt").read_text()
    assert "#include <migraphx/migraphx.hpp>" in cpp
    assert "get_parameter_shapes()" in cpp and "names()" in cpp
    assert '"x.1"' not in cpp  # the input name is read from the program
    assert "find_package(migraphx REQUIRED)" in cmake and "migraphx::c" in cmake
    page = (PAGES / "cpp.md").read_text()
    assert "../../code/cpp/inception_inference.cpp" in page
    assert "../../code/cpp/CMakeLists.txt" in page


def test_cpp_example_is_not_built_without_migraphx_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    monkeypatch.setattr(backends, "rocm_lib_dirs", lambda: [tmp_path / "no-rocm" / "lib"])
    files = {k: tmp_path / k for k in ("model", "input", "expected")}
    result = cpp_example.run_cpp_example(files, tmp_path / "build")
    assert not result.ran and result.returncode is None
    assert result.output.startswith("Not built here:") and "development files" in result.output
    assert not (tmp_path / "build").exists()


def test_cpp_style_output_prints_what_the_program_prints(no_migraphx, prepared, photo, tmp_path):
    files = {"model": prepared.onnx.path, "input": tmp_path / "input.bin"}
    files["expected"] = tmp_path / "expected.bin"
    photo.astype("<f4").tofile(files["input"])
    expected = inference.torch_logits(prepared.model, photo, "cpu")
    expected.astype("<f4").tofile(files["expected"])
    lines = cpp_example.cpp_style_output(files).splitlines()
    assert lines[0] == f"Input parameter '{prepared.onnx.input_name}': 1 x 3 x 299 x 299"
    assert lines[1] == "Output: 1 x 1000; top classes:"
    assert lines[2].startswith(f"  1. class {int(expected.argmax()):4d}  p = ")
    assert [line[:5] for line in lines[2:7]] == [f"  {r}. " for r in range(1, 6)]
    assert lines[7].startswith("Max relative error against the reference: ")
    assert float(lines[7].split(": ")[1].split()[0]) <= cpp_example.CPP_TOLERANCE
    cpp = (ROOT / "code" / "cpp" / "inception_inference.cpp").read_text()
    declared = cpp.split("constexpr double tolerance = ", 1)[1].split(";", 1)[0]
    assert float(declared) == cpp_example.CPP_TOLERANCE


@pytest.mark.skipif(shutil.which("g++") is None, reason="no C++ compiler")
def test_cpp_example_compiles_against_the_api_signatures(tmp_path):
    include = tmp_path / "include" / "migraphx"
    include.mkdir(parents=True)
    (include / "migraphx.hpp").write_text(_MIGRAPHX_HPP)
    source = ROOT / "code" / "cpp" / "inception_inference.cpp"
    proc = subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            f"-I{tmp_path / 'include'}",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- command line


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return guide_cli(*args, timeout=timeout)


def _assert_one_line_error(proc: subprocess.CompletedProcess, command: str, text: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"{command}: ") and text in lines[0], lines[0]


def test_cli_infer_classifies_the_photo(prepared):
    proc = _cli(
        "infer",
        "--model",
        str(prepared.onnx.path),
        "--image",
        str(inception_pretrained.sample_photo()),
        "--backend",
        "onnxruntime",
        "--json",
        "--threads",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["backend"] == "onnxruntime"
    assert data["provider"] in (inference.CPU_EP, inference.MIGRAPHX_EP)
    assert len(data["top"]) == 5 and data["top"][0]["rank"] == 1


def test_cli_bench_prints_one_json_object():
    proc = _cli(
        "bench",
        "inference",
        "--batch",
        "1",
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--threads",
        "1",
        "--json",
        "--tuning",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in (
        "backend",
        "device",
        "eager_ms",
        "compiled_ms",
        "speedup",
        "max_rel_error",
        "untuned_ms",
        "tuned_ms",
    ):
        assert key in data, key
    assert data["iterations"] == 2 and data["batch"] == 1


def test_cli_export_writes_what_the_cpp_example_reads(tmp_path):
    proc = _cli("export", "--output", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    x = np.fromfile(tmp_path / "input.bin", dtype="<f4")
    expected = np.fromfile(tmp_path / "expected.bin", dtype="<f4")
    assert x.size == 3 * 299 * 299 and expected.size == 1000
    compiled = inference.compile_model(tmp_path / "inception_v3.onnx", "onnxruntime", threads=1)
    out = compiled.run(x.reshape(1, 3, 299, 299))
    assert inference.max_rel_error(out, expected.reshape(1, 1000)) <= inference.CPU_TOLERANCE


@pytest.mark.parametrize(
    "case", ["truncated-model", "corrupt-model", "not-an-image", "wrong-shape", "unknown-backend"]
)
def test_cli_bad_input_is_one_line_without_traceback(case, prepared, tmp_path):
    model = str(prepared.onnx.path)
    image = str(inception_pretrained.sample_photo())
    extra: list[str] = []
    if case == "truncated-model":
        model = str(tmp_path / "truncated.onnx")
        Path(model).write_bytes(prepared.onnx.path.read_bytes()[:3_000_000])
        expect = "not a valid ONNX model"
    elif case == "corrupt-model":
        model = str(tmp_path / "corrupt.onnx")
        Path(model).write_bytes(os.urandom(10_000))
        expect = "not a valid ONNX model"
    elif case == "not-an-image":
        image = str(tmp_path / "photo.jpg")
        Path(image).write_text("this is not a JPEG")
        expect = "not a readable image"
    elif case == "wrong-shape":
        extra = ["--size", "224"]
        expect = "does not fit the model's input"
    else:
        extra = ["--backend", "tensorrt"]
        expect = "unknown backend 'tensorrt'"
    proc = _cli("infer", "--model", model, "--image", image, "--threads", "1", *extra)
    _assert_one_line_error(proc, "infer", expect)


def test_cli_bench_unknown_backend_and_missing_migraphx():
    proc = _cli("bench", "inference", "--backend", "tensorrt", "--json")
    _assert_one_line_error(proc, "bench", "unknown backend")
    assert proc.returncode == 2
    if not backends.migraphx_status().available:
        proc = _cli("bench", "inference", "--backend", "migraphx", "--json")
        _assert_one_line_error(proc, "bench", "MIGraphX is not importable here")


def test_graph_views_show_what_onnx_runtimes_passes_did(no_migraphx, prepared, tmp_path):
    views = graph_views(prepared, workdir=tmp_path)
    assert "ONNX Runtime counterpart" in views.label and views.before_text == ""
    counts = views.table.set_index("operator")
    assert counts.loc["Conv", "before"] > 0 and counts.loc["Conv", "after"] == 0  # all rewritten
    assert counts.loc["Relu", "after"] == 0  # fused into the convolutions
    assert any(op.startswith("com.microsoft.nchwc.") for op in counts.index[counts["after"] > 0])
    assert views.nodes_after < views.nodes_before
    import onnx

    graph = onnx.load(str(prepared.onnx.path), load_external_data=False).graph
    assert counts["before"].sum() == len(graph.node)


def test_an_unchanged_export_is_reused_and_any_change_exports_again(tmp_path):
    from rocm_dl_guide.casestudies import cifar10

    torch.manual_seed(0)
    model = cifar10.Net().eval()
    path = tmp_path / "net.onnx"
    first = onnx_files.export_once(model, path, image_size=32)
    record = json.loads((tmp_path / "net.onnx.export.json").read_text())
    assert record["weights"] == onnx_files.weights_digest(model)
    assert record["size"] == path.stat().st_size == first.size_bytes
    stamp = path.stat().st_mtime_ns

    again = onnx_files.export_once(model, path, image_size=32)  # same weights: read back
    assert path.stat().st_mtime_ns == stamp and again == first

    with torch.no_grad():
        model.fc3.bias += 1.0  # new weights: a new export that holds them
    assert onnx_files.weights_digest(model) != record["weights"]
    onnx_files.export_once(model, path, image_size=32)
    assert path.stat().st_mtime_ns != stamp
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((2, 3, 32, 32), dtype=np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(session.run(None, {"image": x})[0], expected, atol=1e-4)

    # a file changed behind the record's back, or a damaged record: export again
    for damage in (
        lambda: path.write_bytes(path.read_bytes()[:100]),
        lambda: (tmp_path / "net.onnx.export.json").write_text("{not json"),
    ):
        damage()
        restored = onnx_files.export_once(model, path, image_size=32)
        assert restored.size_bytes == path.stat().st_size > 100
        assert json.loads((tmp_path / "net.onnx.export.json").read_text())["size"] == (
            path.stat().st_size
        )
    stamp = path.stat().st_mtime_ns
    older = onnx_files.export_once(model, path, image_size=32, opset=onnx_files.OPSET - 1)
    assert older.opset == onnx_files.OPSET - 1 and path.stat().st_mtime_ns != stamp


def test_the_sweep_plot_labels_its_log_axis_in_plain_milliseconds():
    """Latency spans orders of magnitude, so its axis is logarithmic, labelled at
    1-2-5 steps as plain numbers (not 10^n beside 2x10^n)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    frame = pd.DataFrame(
        {
            "runtime": ["PyTorch", "ONNX Runtime"] * 3,
            "batch": [1, 1, 8, 8, 32, 32],
            "latency (ms)": [12.0, 9.0, 60.0, 41.0, 230.0, 170.0],
            "images/s": [83.0, 111.0, 133.0, 195.0, 139.0, 188.0],
        }
    )
    fig = bench.plot_sweep(frame, "a CPU")
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    labels = [t.get_text() for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
    plt.close(fig)
    assert set(labels) >= {"10", "20", "50", "100", "200"}, labels
    assert not any("^" in s or "times" in s for s in labels), labels
    assert not [t for t in ax.yaxis.get_minorticklabels() if t.get_text()]


def test_the_sweep_table_shows_its_figures_rounded_and_the_speedup_as_a_factor():
    import pandas as pd

    from rocm_dl_guide.core import tables

    frame = pd.DataFrame(
        {"runtime": ["ONNX Runtime"], "batch": [8], "latency (ms)": [41.234],
         "ms per image": [5.154], "images/s": [194.02], "speedup": [1.4567]}
    )  # fmt: skip
    html = tables.show(frame, formats=bench.SWEEP_FORMATS).to_html()
    for text in (">41.2<", ">5.2<", ">194.0<", ">1.46x<", ">8<"):
        assert text in html, text


def test_rounded_shortens_floats_for_reading_and_keeps_the_rest():
    record = {
        "eager_ms": 205.92814799965709,
        "max_rel_error": 5.278789679102376e-07,
        "within_tolerance": True,
        "batch": 1,
        "versions": {"PyTorch": "2.14.1"},
        "runs": [2.0063096193512866],
    }
    shown = bench.rounded(record)
    assert shown == {
        "eager_ms": 205.9,
        "max_rel_error": 5.279e-07,
        "within_tolerance": True,
        "batch": 1,
        "versions": {"PyTorch": "2.14.1"},
        "runs": [2.006],
    }
    assert record["eager_ms"] == 205.92814799965709  # the record itself is untouched
