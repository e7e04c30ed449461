"""Reduced-precision inference: one model in several number formats and engines,
timed side by side and checked against its own fp32 predictions.

The engines are the libraries' own tools, nothing home-made:

- PyTorch: eager fp32 (the reference), eager with ``torch.autocast`` to
  bfloat16 and to float16 (emulated, and timed in fewer runs, on a CPU without
  instructions for them: :data:`EMULATED_RUNS`), and ``torch.compile``
  (Inductor, PyTorch's own compiler);
- ONNX Runtime on the CPU: fp32, and int8 from
  ``onnxruntime.quantization.quantize_static`` (QDQ format, per-channel
  weights, calibrated on real or fixture images), in each of the settings
  ONNX Runtime documents for CPUs (unsigned or signed activations, 7-bit
  weights where the CPU lacks VNNI, two calibration methods), one row each
  (:mod:`rocm_dl_guide.optimization.ort_int8`), the fastest recorded per CPU;
- PyTorch's own int8 (:mod:`rocm_dl_guide.optimization.pt2e`), compiled by Inductor;
- MIGraphX, when it is importable: ``migraphx.quantize_fp16`` and
  ``migraphx.quantize_int8`` with the same calibration batches.

Speed and agreement are measured apart, on purpose. Speed is measured on
Inception v3, the optimisation chapter's model, whose weights may be random in
the ``smoke`` profile; random weights give near-tied logits, so agreement is
never measured on them. Agreement (top-1 against the fp32 model's own
predictions) and accuracy are measured on the CIFAR-10 network of the training
chapter after training it (on fixtures in ``smoke``, on the real data set
otherwise;
:attr:`~rocm_dl_guide.optimization.precision_results.PrecisionBench.agreement_note`
says which). The result's table is
:mod:`rocm_dl_guide.optimization.precision_results`; how agreement is measured,
:mod:`rocm_dl_guide.optimization.agreement`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rocm_dl_guide.core import device, profiles
from rocm_dl_guide.core.provenance import library_versions
from rocm_dl_guide.optimization import (
    agreement,
    backends,
    inference,
    onnx_files,
    precision_results,
)
from rocm_dl_guide.optimization.ort_int8 import (
    CPU_FLAGS,
    Int8Config,
    PrecisionError,
    calibration_batches,
    has_vnni,
    int8_configs,
    quantize_onnx_int8_all,
    record_choice,
)

ENGINES = (
    ("PyTorch eager", "fp32"),
    ("PyTorch eager", "bf16"),
    ("PyTorch eager", "fp16"),
    ("torch.compile", "fp32"),
    ("torch.compile", "bf16"),
    ("torch.compile", "int8"),
    ("ONNX Runtime", "fp32"),
    ("ONNX Runtime", "int8"),
    ("MIGraphX", "fp16"),
    ("MIGraphX", "int8"),
)
"""Every (backend, precision) the benchmark knows; MIGraphX rows only where it
imports. ``torch.compile int8`` is PyTorch's own CPU int8
(:mod:`rocm_dl_guide.optimization.pt2e`)."""

FORMAT_ENGINES = (
    precision_results.REFERENCE,
    ("PyTorch eager", "bf16"),
    ("PyTorch eager", "fp16"),
    ("torch.compile", "fp32"),
    ("torch.compile", "bf16"),
    ("ONNX Runtime", "fp32"),
    ("MIGraphX", "fp16"),
)
"""The floating-point engines, the precision page's table: fp32 and the 16-bit
formats, eager and compiled."""

INT8_ENGINES = (
    precision_results.REFERENCE,
    ("ONNX Runtime", "fp32"),
    ("ONNX Runtime", "int8"),
    ("torch.compile", "int8"),
    ("MIGraphX", "int8"),
)
"""The int8 engines beside the two fp32 ones they start from, the int8 page's
table. With :data:`FORMAT_ENGINES` they make :data:`ENGINES`, which
``bench precision`` runs in one process."""


def record_int8_choice(
    result: precision_results.PrecisionBench, path: str | os.PathLike | None = None
) -> Path:
    """Record ``result``'s best int8 setting at batch 1
    (:meth:`~rocm_dl_guide.optimization.precision_results.PrecisionBench.best_int8`)
    for this CPU, beside the other CPUs'
    (:func:`rocm_dl_guide.optimization.ort_int8.record_choice`)."""
    return record_choice(
        result.best_int8(1), result.cpu_flags, result.machine, result.versions, path
    )


def engine_key(backend: str, precision: str, config: Int8Config | None = None) -> str:
    """One engine's name in timings and agreements: ``backend precision [config]``."""
    return f"{backend} {precision}" + (f" {config.name}" if config else "")


# --------------------------------------------------------------------------- the CPU


def instructions(precision: str, flags: Collection[str]) -> str:
    """In words: which instructions a CPU ``precision`` can use, given ``flags``
    (the CPU's flags, :func:`rocm_dl_guide.core.device.cpu_flags`)."""
    if precision == "int8":
        if "amx_int8" in flags:
            return "int8 matrix tiles (AMX-INT8)"
        if ("avx512_vnni" in flags) or ("avx_vnni" in flags):
            return "int8 dot products (VNNI)"
        if "avx2" in flags:
            return "AVX2 integer multiply-add, no VNNI"
        return "no SIMD int8 instructions found"
    if precision == "bf16":
        if "amx_bf16" in flags:
            return "bf16 matrix tiles (AMX-BF16)"
        if "avx512_bf16" in flags:
            return "bf16 dot products (AVX512-BF16)"
        return "no bf16 instructions, converted to and from fp32 in software"
    if precision == "fp16":
        if "avx512_fp16" in flags:
            return "fp16 arithmetic (AVX512-FP16)"
        if "f16c" in flags:
            return "fp16 storage only (F16C conversions), fp32 arithmetic"
        return "no fp16 instructions"
    if "avx512f" in flags:
        return "fp32 (AVX-512)"
    return "fp32 (AVX2 and FMA)" if ("avx2" in flags) else "fp32"


MATRIX_SIZE = 512
"""The side of the square matrices :func:`matrix_speed` multiplies."""


def matrix_speed(size: int = MATRIX_SIZE, runs: tuple[int, int] = (5, 31)) -> dict[str, float]:
    """Each format's speed at one ``size`` x ``size`` matrix product in PyTorch,
    against fp32's (fp32 itself 1.0), timed side by side (``runs``: warm-up and
    timed): what this CPU's kernels make of a format's arithmetic, apart from
    the conversions and the other layers of a network."""
    import torch

    from rocm_dl_guide.optimization import bench

    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=gen) for _ in range(2))
    dtypes = {"fp32": torch.float32} | {p: getattr(torch, d) for p, d in AUTOCAST.items()}
    pairs = {p: (a.to(d), b.to(d)) for p, d in dtypes.items()}
    timings = bench.measure_side_by_side(
        {p: (lambda x=x, y=y: torch.mm(x, y)) for p, (x, y) in pairs.items()}, *runs
    )
    return {p: timings["fp32"].median_ms / t.median_ms for p, t in timings.items()}


# --------------------------------------------------------------------------- engines


@dataclass
class Engine:
    """One way of running the model: a function from an input batch to logits."""

    backend: str
    precision: str
    run: Callable[[np.ndarray], np.ndarray] = field(repr=False)
    device: str
    note: str = ""
    on_gpu: bool = False
    config: Int8Config | None = None
    """ONNX Runtime int8's quantization setting."""

    @property
    def key(self) -> str:
        return engine_key(self.backend, self.precision, self.config)


AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}
"""The 16-bit formats ``torch.autocast`` runs, by the dtype's name in ``torch``."""


def torch_engine(model, precision: str, compiled: bool = False) -> Engine:
    import torch

    from rocm_dl_guide.optimization.inductor import freezing

    model = model.eval()
    fn = torch.compile(model) if compiled else model
    dtype = getattr(torch, AUTOCAST[precision]) if precision in AUTOCAST else None

    def run(x: np.ndarray) -> np.ndarray:
        # Compiled with freezing on: without it, Inception v3 ran several times
        # slower compiled than eager here.
        with torch.no_grad(), freezing(compiled):
            ctx = torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()
            with ctx:
                y = fn(torch.from_numpy(x))
        return y.float().numpy()

    backend = "torch.compile" if compiled else "PyTorch eager"
    notes = ["Inductor, freezing on"] if compiled else []
    if dtype is not None:
        notes.append(f"torch.autocast to {AUTOCAST[precision]}")
    return Engine(backend, precision, run, inference.cpu_description(), ", ".join(notes))


def pt2e_engine(model, batches: list[np.ndarray], flags: Collection[str] | None = None) -> Engine:
    """PyTorch's own int8: ``model`` quantized by the PT2E flow, calibrated on
    ``batches``, with 7-bit activations on a CPU without VNNI (``flags``: this
    CPU's by default), compiled by Inductor."""
    from rocm_dl_guide.optimization import pt2e

    flags = device.cpu_flags() if flags is None else flags
    reduce_range = not has_vnni(flags)
    quantized = pt2e.quantize(model, batches, reduce_range=reduce_range)
    note = "PT2E, X86InductorQuantizer" + (", reduce_range" if reduce_range else "")
    return Engine(
        "torch.compile", "int8", pt2e.compiled(quantized), inference.cpu_description(), note
    )


def _ort_engine(
    path: Path, precision: str, threads: int, config: Int8Config | None = None
) -> Engine:
    compiled = inference.compile_model(path, "onnxruntime", threads=threads)
    note = f"quantize_static, QDQ, {config.name}" if config else ""
    return Engine(
        "ONNX Runtime", precision, compiled.run, compiled.device, note, compiled.on_gpu, config
    )


def migraphx_engine(path: Path, precision: str, batch: int, batches: list[np.ndarray]) -> Engine:
    mgx = backends.migraphx_status().module
    prog = mgx.parse_onnx(str(path), default_dim_value=batch)
    target = mgx.get_target("gpu")
    name = prog.get_parameter_names()[0]
    if precision == "fp16":
        mgx.quantize_fp16(prog)
    elif precision == "int8":
        # The program's batch is fixed: regroup the calibration images to it.
        pool = np.concatenate(batches)
        calibration = [
            {name: mgx.argument(np.ascontiguousarray(pool[i : i + batch]))}
            for i in range(0, len(pool) - batch + 1, batch)
        ]
        if not calibration:
            raise PrecisionError(f"{len(pool)} calibration images do not fill a batch of {batch}")
        mgx.quantize_int8(prog, target, calibration)
    prog.compile(target, offload_copy=True)

    def run(x: np.ndarray) -> np.ndarray:
        return np.array(prog.run({name: mgx.argument(np.ascontiguousarray(x))})[0])

    return Engine(
        "MIGraphX", precision, run, inference.gpu_description(), f"quantize_{precision}", True
    )


def native(precision: str, flags: Collection[str]) -> bool:
    """Whether this CPU has instructions for ``precision`` (fp32 and int8 always run)."""
    if precision == "bf16":
        return bool(("avx512_bf16" in flags) or ("amx_bf16" in flags))
    if precision == "fp16":
        return bool("avx512_fp16" in flags)
    return True


def skipped(
    include: Iterable[tuple[str, str]], flags: Collection[str], emulated: bool = False
) -> dict[str, str]:
    """``"backend precision"`` -> why it is not run here: MIGraphX where it does
    not import; PyTorch's int8 where torchao's PT2E flow does not; a CPU
    precision without instructions on this CPU (it would run in software, many
    times slower than fp32) unless ``emulated``."""
    from rocm_dl_guide.optimization import pt2e

    out = {}
    include = list(include)
    has_mgx = backends.migraphx_status().available
    # Asked only where PyTorch's int8 is wanted: torchao's PT2E modules take seconds to import.
    no_pt2e = pt2e.unavailable() if ("torch.compile", "int8") in include else None
    for backend, precision in include:
        if backend == "MIGraphX":
            if not has_mgx:
                out[f"{backend} {precision}"] = "MIGraphX is not importable here"
        elif (backend, precision) == ("torch.compile", "int8"):
            if no_pt2e:
                out[f"{backend} {precision}"] = no_pt2e
        elif not emulated and not native(precision, flags):
            out[f"{backend} {precision}"] = (
                f"this CPU has no {precision} instructions "
                "(bench precision --emulated runs it in software)"
            )
    return out


def engines(
    model,
    onnx_path: Path,
    int8_paths: dict[Int8Config, Path],
    batches: list[np.ndarray],
    batch: int,
    threads: int,
    include: Iterable[tuple[str, str]] = ENGINES,
) -> list[Engine]:
    """The engines of ``include`` that this machine can run, in that order
    (MIGraphX rows only where MIGraphX imports); ONNX Runtime int8 once per
    quantized model of ``int8_paths``."""
    wanted = list(include)
    found = []
    has_mgx = backends.migraphx_status().available
    for backend, precision in wanted:
        if backend == "PyTorch eager":
            found.append(torch_engine(model, precision))
        elif (backend, precision) == ("torch.compile", "int8"):
            found.append(pt2e_engine(model, batches))
        elif backend == "torch.compile":
            found.append(torch_engine(model, precision, compiled=True))
        elif backend == "ONNX Runtime" and precision == "int8":
            found += [_ort_engine(p, precision, threads, c) for c, p in int8_paths.items()]
        elif backend == "ONNX Runtime":
            found.append(_ort_engine(onnx_path, precision, threads))
        elif backend == "MIGraphX" and has_mgx:
            found.append(migraphx_engine(onnx_path, precision, batch, batches))
    return found


# --------------------------------------------------------------------------- the benchmark


def _steps(total: int, show: bool):
    from tqdm.auto import tqdm

    from rocm_dl_guide.core import progress

    return tqdm(total=total, desc="bench precision", disable=not progress.enabled(show))


def _agreements(prof, include, threads, calibration, test_images, epochs, configs):
    """Train the CIFAR-10 network, quantize it, and compare every engine with its
    fp32 predictions: ``({(backend, precision): PredictionAgreement}, note)``."""
    model, data, note = agreement.trained_cifar10(prof, epochs)
    work = onnx_files.models_dir()
    small = work / "cifar10_net.onnx"
    onnx_files.export_once(model, small, image_size=32)  # once for both pages
    calib = calibration_batches(data.train_loader, calibration)
    small_int8 = quantize_all(small, "cifar10_net", calib, configs, include)
    xs, ys = agreement.test_arrays(data, test_images)
    found = engines(model, small, small_int8, calib, min(100, len(xs)), threads, include)
    return {a.key: a for a in agreement.prediction_agreement(found, xs, ys)}, note


def quantize_all(
    path: Path,
    stem: str,
    batches: list[np.ndarray],
    configs: list[Int8Config],
    include: Iterable[tuple[str, str]],
) -> dict[Int8Config, Path]:
    """``path`` quantized in each of ``configs`` into the models folder, where
    ``include`` has ONNX Runtime int8 (else nothing): pre-processed once and
    calibrated once per calibration method (:func:`~.ort_int8.quantize_onnx_int8_all`)."""
    if ("ONNX Runtime", "int8") not in list(include):
        return {}
    out = onnx_files.models_dir()
    slug = {c: c.name.lower().replace(" ", "-").replace("_", "") for c in configs}
    return quantize_onnx_int8_all(
        path, {c: out / f"{stem}.{slug[c]}.onnx" for c in configs}, batches
    )


EMULATED_RUNS = (0, 1)
"""At most this many warm-up and timed runs for a format the CPU has no
instructions for (:func:`native`): converted in software (PyTorch's slow
convolution, for want of oneDNN kernels), one run of Inception v3 took twenty
to forty times as long as in fp32 under an AVX2 cap (4 to 6 s against 0.12 to
0.23 s), and one run shows that; the first run of an eager model was within a
tenth of the next ones."""


def emulated(engine: Engine, flags: Collection[str]) -> bool:
    """Whether ``engine`` runs a format this CPU has no instructions for."""
    return not engine.on_gpu and not native(engine.precision, flags)


def _speed_rows(found, batch, warmup, iterations, agreements, flags) -> list[dict[str, Any]]:
    """Time every engine side by side on Inception v3 at ``batch``: one row each.
    Engines in a format without instructions here (:func:`emulated`) are timed
    side by side among themselves, with at most :data:`EMULATED_RUNS`."""
    from rocm_dl_guide.optimization import bench

    x = inference.image_batch(batch_size=batch)
    slow = [e for e in found if emulated(e, flags)]
    slow_keys = {e.key for e in slow}
    runs = {e.key: (warmup, iterations) for e in found}
    timings = bench.measure_side_by_side(
        {e.key: (lambda e=e: e.run(x)) for e in found if e.key not in slow_keys},
        warmup,
        iterations,
    )
    if slow:
        short = (min(warmup, EMULATED_RUNS[0]), min(iterations, EMULATED_RUNS[1]))
        runs.update({e.key: short for e in slow})
        timings |= bench.measure_side_by_side({e.key: (lambda e=e: e.run(x)) for e in slow}, *short)
    ref_ms = timings[engine_key(*precision_results.REFERENCE)].median_ms
    rows = []
    for e in found:
        key = e.key
        a = agreements.get(key)
        rows.append(
            {
                "backend": e.backend,
                "precision": e.precision,
                "batch": batch,
                "ms": timings[key].median_ms,
                "speedup_vs_eager_fp32": ref_ms / timings[key].median_ms,
                "top1_agreement": a.top1_agreement if a else None,
                "agreement_interval": list(a.interval) if a else None,
                "least_sure_agreement": a.boundary_agreement if a else None,
                "least_sure_images": a.boundary_images if a else None,
                "logit_change": a.logit_change if a else None,
                "test_images": a.images if a else None,
                "accuracy": a.accuracy if a else None,
                "device": e.device,
                "instructions": "GPU" if e.on_gpu else instructions(e.precision, flags),
                "emulated": key in slow_keys,
                "runs": list(runs[key]),
                "note": e.note,
                "config": e.config.to_dict() if e.config else None,
            }
        )
    return rows


def _speed_models(profile, calibration, configs, include):
    """Inception v3 and its ONNX export (:func:`~.onnx_files.export_inception`, shared
    with the other pages), its calibration images of tiny-imagenet-200 at 299
    pixels, and its int8 models: ``(prepared, batches, {setting: file})``."""
    from rocm_dl_guide.casestudies import tiny_imagenet

    prepared = onnx_files.export_inception(profile)
    tiny = tiny_imagenet.tiny_imagenet_loaders(profile, image_size=299, batch_size=8)
    if any(b == "MIGraphX" for b, _ in include):
        # MIGraphX regroups the images into its program's batch size: all of them.
        batches = calibration_batches(
            tiny.val_loader, calibration if prepared.loaded.pretrained else 1
        )
    else:
        # Inception v3's int8 models are timed, never judged by their answers (the
        # agreement is the CIFAR-10 network's): two images give them scales, and
        # scales change no operator, so no speed. Sixteen batches of eight cost
        # seconds per setting on two cores, for nothing a reader sees.
        batches = [calibration_batches(tiny.val_loader, 1)[0][:2]]
    int8 = quantize_all(prepared.onnx.path, "inception_v3", batches, configs, include)
    return prepared, batches, int8


COMPILE_COST = "20 to 50 s of CPU time on two cores"
"""What one compile of Inception v3 by Inductor cost under an AVX2 cap (a Xeon's
two cores, Inductor's caches warm and cold), fp32 and PT2E int8 alike, PT2E's
export, calibration and conversion (about 17 s more) aside. Inductor's graph
cache skips the frozen fp32 graph ("mkldnn tensors unpickleable": its weights
are prepacked for oneDNN), so every process pays the compile. On the 2-core
AVX2-only EPYC that builds the published book, where a page has 60 s, the
precision page took 114 s with it."""


def page_settings(profile: profiles.Profile, include: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The keyword arguments of :func:`run` for a page that shows ``include``: every
    format, emulated where the CPU has no instructions for it. In a profile with
    short benchmarks (two CPU cores, a page under a minute), batch 1 only, and no
    engine that compiles Inception v3 (:data:`COMPILE_COST`): each is a table row
    saying so, and ``bench precision`` runs them."""
    include = list(include)
    settings: dict[str, Any] = {"include": include, "emulated": True}
    if profile.short_benchmarks:
        settings["batches"] = (1,)
        compiled = [e for e in include if e[0] == "torch.compile"]
        settings["include"] = [e for e in include if e not in compiled]
        what = {"int8": "quantize Inception v3 with PT2E and compile it"}
        settings["not_run"] = {
            engine_key(*e): f"the {profile.name} profile does not "
            f"{what.get(e[1], 'compile Inception v3')} (a compile alone takes "
            f"{COMPILE_COST}); bench precision does"
            for e in compiled
        }
    return settings


def run(
    profile: profiles.Profile,
    batches: tuple[int, ...] = (1, 8, 32),
    threads: int | None = None,
    include: Iterable[tuple[str, str]] = ENGINES,
    calibration: int = 16,
    test_images: int | None = None,
    agreement_epochs: int | None = None,
    runs: tuple[int, int] | None = None,
    show_progress: bool = True,
    emulated: bool = False,
    configs: list[Int8Config] | None = None,
    not_run: dict[str, str] | None = None,
) -> precision_results.PrecisionBench:
    """The precision benchmark: agreement and accuracy of every engine on the
    trained CIFAR-10 network, then the median latency of every engine on
    Inception v3 at each of ``batches``, timed side by side (same warm-up, same
    threads, alternating blocks; :func:`rocm_dl_guide.optimization.bench.measure_side_by_side`).

    ``calibration`` batches calibrate int8 (the CIFAR-10 training loader for the
    agreement model; tiny-imagenet-200 at 299 pixels for Inception v3 on MIGraphX,
    two of its images on the CPU, where Inception v3 is only timed);
    agreement is measured on the first ``test_images`` of the CIFAR-10 test
    set (all of it by default: the fixture's 2,000 or the real 10,000), by a network
    trained for ``agreement_epochs`` (default: :func:`~.agreement.trained_cifar10`'s);
    ``runs`` is ``(warm-up, timed)`` for every batch size (default:
    :func:`rocm_dl_guide.optimization.bench.iterations_for`); int8 in each of ``configs``
    (default: :func:`~rocm_dl_guide.optimization.ort_int8.int8_configs`). What is not
    run, and why, is in :attr:`~.precision_results.PrecisionBench.skipped`, with the
    caller's own ``not_run`` reasons (``emulated`` runs bf16 and fp16 on a CPU without
    instructions for them too, timed with fewer runs: :data:`EMULATED_RUNS`)."""
    from rocm_dl_guide.optimization import bench

    threads = threads or inference.default_threads()
    flags = device.cpu_flags()
    not_run = (not_run or {}) | skipped(include, flags, emulated)
    # The reference first: agreement and speed-ups are against it.
    include = [precision_results.REFERENCE] + [
        e for e in include if e != precision_results.REFERENCE and f"{e[0]} {e[1]}" not in not_run
    ]
    configs = int8_configs(flags) if configs is None else list(configs)
    bar = _steps(2 + len(batches), show_progress)
    with bench.torch_threads(threads), bar:
        agreements, agreement_note = _agreements(
            profile, include, threads, calibration, test_images, agreement_epochs, configs
        )
        bar.update(1)
        prepared, big_calib, big_int8 = _speed_models(profile, calibration, configs, include)
        bar.update(1)
        rows, warmups, iterations = [], {}, {}
        args = (prepared.model, prepared.onnx.path, big_int8, big_calib)
        # CPU engines once (torch.compile then reuses its graphs across batch
        # sizes); MIGraphX compiles a program per batch size.
        on_cpu = engines(*args, 1, threads, [e for e in include if e[0] != "MIGraphX"])
        for batch in batches:
            w, n = runs or bench.iterations_for(batch, profile)
            warmups[batch], iterations[batch] = w, n
            gpu = engines(*args, batch, threads, [e for e in include if e[0] == "MIGraphX"])
            rows += _speed_rows(on_cpu + gpu, batch, w, n, agreements, flags)
            bar.update(1)
        matrix = matrix_speed()
    return precision_results.PrecisionBench(
        rows=rows,
        machine=inference.cpu_description(),
        threads=threads,
        cpu_flags=[f for f in CPU_FLAGS if f in flags],
        versions=library_versions(("PyTorch", "ONNX Runtime", "MIGraphX")),
        profile=profile.name,
        speed_model=f"Inception v3 ({prepared.loaded.note})",
        agreement_model="CIFAR-10 network (training chapter)",
        agreement_note=agreement_note,
        warmup=warmups,
        iterations=iterations,
        skipped=not_run,
        matrix_speed=matrix,
        matrix_size=MATRIX_SIZE,
    )
