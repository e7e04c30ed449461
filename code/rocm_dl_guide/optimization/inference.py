"""Inference with a compiled model: MIGraphX where it is importable, ONNX Runtime otherwise.

The optimisation chapter exports Inception v3 to ONNX
(:mod:`rocm_dl_guide.optimization.onnx_files`) and hands the file to a
*backend* that compiles it for the hardware (which backends this machine has,
and which one ``auto`` picks: :mod:`rocm_dl_guide.optimization.backends`):

- ``migraphx``: AMD's graph compiler. ``parse_onnx``, ``compile`` for the
  ``gpu`` target, ``run``; compiled programs are saved as ``.mxr`` files.
- ``onnxruntime``: ONNX Runtime on the same ONNX file, with its
  ``MIGraphXExecutionProvider`` when the installed build has one, else on the
  CPU. The provider reported is the one the session really uses
  (``session.get_providers()``), not the available list.

:func:`compile_model` returns a :class:`CompiledModel`
whose :meth:`~CompiledModel.run` takes and returns NumPy arrays, whatever the
backend. :func:`save_compiled` / :func:`load_compiled` store and reload a
compiled, tuned model (a MIGraphX ``.mxr``, or an ONNX Runtime optimised
model file). Errors the reader can cause (an unknown backend, a corrupt model
file, a wrong input shape) raise
:class:`~rocm_dl_guide.optimization.onnx_files.InferenceError` subclasses with
one clear line; the command line (``infer``, ``bench``, ``export``) prints that
line. Benchmarks live in :mod:`rocm_dl_guide.optimization.bench`.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rocm_dl_guide.core.files import atomic_path
from rocm_dl_guide.core.messages import count, one_line
from rocm_dl_guide.optimization import backends, onnx_files

MIGRAPHX_EP = "MIGraphXExecutionProvider"
CPU_EP = "CPUExecutionProvider"
CPU_TOLERANCE = 1e-4
"""Largest accepted relative error (see :func:`max_rel_error`) when PyTorch and the
compiled model both compute on the CPU in float32: the same arithmetic, summed in
a different order, agrees to about 1e-6 of the largest logit."""
GPU_TOLERANCE = 1e-3
"""The same bound when either side runs on a GPU: different kernels (MIOpen,
rocBLAS, generated code, MIGraphX's fast-math approximations) round differently."""


class InputShapeError(onnx_files.InferenceError):
    """An input whose shape the compiled model does not accept."""


# --------------------------------------------------------------------------- compiled models


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """CPU threads for inference: the cores this process may use, at most
    ``$OMP_NUM_THREADS`` where that is set. The book build sets it for a page
    that shares the machine (another page, or the test suite's other worker):
    two threads there, one of them waiting for a busy core, made a batch-1
    Inception v3 run seven times slower (1,779 ms against 267 ms, 2026-11-28)."""
    n = usable_cores()
    try:
        limit = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return n
    return max(1, min(n, limit))


def cpu_description() -> str:
    """The CPU in words, with the cores inference may use: ``CPU (NAME, N cores)``
    (``1 core`` for one, ``1 of 2 cores`` where it may not use them all)."""
    from rocm_dl_guide.core.device import cpu_name

    n, cores = default_threads(), usable_cores()
    used = f"{n} of {cores} cores" if n < cores else f"{n} core{'' if n == 1 else 's'}"
    return f"CPU ({cpu_name()}, {used})"


def gpu_description() -> str:
    from rocm_dl_guide.core import device

    info = device.describe()
    return str(info) if info.kind == "cuda" else "GPU"


@dataclass
class CompiledModel:
    """A model compiled by one backend, run with NumPy arrays."""

    backend: str
    """``"migraphx"`` or ``"onnxruntime"``."""
    provider: str
    """What really executes it: ``MIGraphX gpu target``, or the first entry of the
    ONNX Runtime session's ``get_providers()``."""
    device: str
    input_name: str
    input_shape: list
    output_name: str
    settings: str
    """How it was compiled, in words (optimisation level, tuning, threads)."""
    source: Path
    compile_seconds: float
    providers: list[str] = field(default_factory=list)
    """For ONNX Runtime: the session's ``get_providers()``."""
    handle: Any = field(default=None, repr=False)
    """The ``migraphx.program`` or ``onnxruntime.InferenceSession``."""

    @property
    def title(self) -> str:
        return backends.BACKEND_TITLES[self.backend]

    @property
    def on_gpu(self) -> bool:
        return self.provider != CPU_EP

    def check_input(self, x: np.ndarray) -> np.ndarray:
        """``x`` as a contiguous float32 array, or :class:`InputShapeError`."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        want = self.input_shape
        fits = x.ndim == len(want) and all(
            not isinstance(w, int) or w <= 0 or w == got
            for w, got in zip(want, x.shape, strict=True)
        )
        if not fits:
            shape = " x ".join(str(d) for d in want)
            raise InputShapeError(
                f"input of shape {' x '.join(map(str, x.shape))} does not fit the model's input "
                f"{self.input_name!r} ({shape})"
            )
        return x

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run one batch; returns the first output (the logits) as a NumPy array."""
        x = self.check_input(x)
        if self.backend == "migraphx":
            outputs = self.handle.run({self.input_name: x})
            return np.array(outputs[0], copy=True)
        return self.handle.run([self.output_name], {self.input_name: x})[0]

    def summary(self) -> str:
        shape = " x ".join(str(d) for d in self.input_shape)
        return (
            f"{self.title} ({self.provider}) on {self.device}; {self.settings}; "
            f"input {self.input_name!r} ({shape}); ready in {self.compile_seconds:.1f} s"
        )


def backend_note(compiled: CompiledModel) -> str:
    """One sentence for the page: which backend produced the outputs, and why."""
    if compiled.backend == "migraphx":
        return (
            f"These outputs come from MIGraphX ({compiled.provider}) on {compiled.device}: "
            f"{backends.migraphx_status().how}."
        )
    why = backends.migraphx_status().how
    where = (
        "its MIGraphX execution provider"
        if compiled.provider == MIGRAPHX_EP
        else f"the {compiled.provider} (CPU)"
    )
    return (
        f"These outputs come from ONNX Runtime {backends.onnxruntime_version()} with {where}, "
        f"not from MIGraphX: {why}. On a ROCm machine with MIGraphX the same cells run "
        "MIGraphX itself."
    )


def _ort_error(path: Path, exc: BaseException) -> onnx_files.InferenceError:
    name = type(exc).__name__
    text = one_line(exc)
    if "] :" in text:  # "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model ... failed:..."
        text = text.rsplit(" : ", 1)[-1]
    if name == "NoSuchFile":
        return onnx_files.ModelFileError(f"{path}: no such file")
    if name in ("InvalidProtobuf", "InvalidGraph", "Fail", "NotImplemented"):
        return onnx_files.ModelFileError(
            f"{path}: ONNX Runtime cannot load this model ({text[:160]})"
        )
    return onnx_files.InferenceError(f"{path}: {text[:200]}")


def _ort_providers(tuned: bool, cache_dir: Path | None = None) -> list:
    import onnxruntime as ort

    providers: list = []
    if MIGRAPHX_EP in ort.get_available_providers():
        options: dict[str, Any] = {"device_id": 0}
        if tuned:
            options["migraphx_exhaustive_tune"] = True
        if cache_dir is not None:
            options["migraphx_model_cache_dir"] = str(cache_dir)
        providers.append((MIGRAPHX_EP, options))
    providers.append(CPU_EP)
    return providers


def _ort_session(
    path: Path,
    optimize: bool,
    tuned: bool,
    threads: int | None,
    save_to: Path | None = None,
):
    import onnxruntime as ort

    level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimize
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    opts = ort.SessionOptions()
    opts.graph_optimization_level = level
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    # Errors only: the warnings it would print (e.g. that an optimised model saved
    # with layout transformations is specific to this kind of CPU) are explained
    # on the pages instead.
    opts.log_severity_level = 3
    if save_to is not None:
        opts.optimized_model_filepath = str(save_to)
    cache = save_to.parent if save_to is not None else None
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "provider not available" fallback
            session = ort.InferenceSession(str(path), opts, providers=_ort_providers(tuned, cache))
    except Exception as exc:  # onnxruntime's own exception types (InvalidProtobuf, ...)
        raise _ort_error(path, exc) from None
    return session, time.perf_counter() - start, level.name


def _compile_ort(
    path: Path, optimize: bool, tuned: bool, threads: int | None, save_to: Path | None = None
) -> CompiledModel:
    session, seconds, level = _ort_session(path, optimize, tuned, threads, save_to)
    used = list(session.get_providers())
    provider = used[0]
    inp, out = session.get_inputs()[0], session.get_outputs()[0]
    n_threads = threads or default_threads()
    return CompiledModel(
        backend="onnxruntime",
        provider=provider,
        device=cpu_description() if provider == CPU_EP else gpu_description(),
        input_name=inp.name,
        input_shape=[d if isinstance(d, int) else str(d) for d in inp.shape],
        output_name=out.name,
        settings=f"graph optimisations {level}, {count(n_threads, 'intra-op thread')}",
        source=path,
        compile_seconds=seconds,
        providers=used,
        handle=session,
    )


def migraphx_inputs(prog) -> tuple[str, list]:
    shapes = prog.get_parameter_shapes()
    names = [n for n in prog.get_parameter_names() if not n.startswith("main:#output")]
    if not names:
        raise onnx_files.ModelFileError("the MIGraphX program has no input parameter")
    name = names[0]
    return name, list(shapes[name].lens())


def compile_migraphx(path: Path, batch_size: int, tuned: bool) -> CompiledModel:
    mgx = backends.migraphx_status().module
    start = time.perf_counter()
    try:
        # The exported batch axis is symbolic; MIGraphX compiles for fixed shapes,
        # so the symbolic dimension gets the batch size we want.
        prog = mgx.parse_onnx(str(path), default_dim_value=batch_size)
    except RuntimeError as exc:
        raise onnx_files.ModelFileError(
            f"{path}: MIGraphX cannot parse it ({one_line(exc)[:160]})"
        ) from None
    name, shape = migraphx_inputs(prog)
    prog.compile(mgx.get_target("gpu"), offload_copy=True, exhaustive_tune=tuned)
    seconds = time.perf_counter() - start
    return CompiledModel(
        backend="migraphx",
        provider="MIGraphX gpu target",
        device=gpu_description(),
        input_name=name,
        input_shape=shape,
        output_name="output 0",
        settings=(
            f"batch {batch_size}, offload_copy=True, exhaustive_tune={'True' if tuned else 'False'}"
        ),
        source=path,
        compile_seconds=seconds,
        handle=prog,
    )


def compile_model(
    path: str | os.PathLike,
    backend: str | None = None,
    batch_size: int = 1,
    optimize: bool = True,
    tuned: bool = False,
    threads: int | None = None,
) -> CompiledModel:
    """Compile the ONNX file at ``path`` with ``backend`` (default: auto).

    MIGraphX compiles for ``batch_size`` (its programs have fixed shapes) and
    always optimises the graph; ``tuned=True`` adds its exhaustive kernel search.
    ONNX Runtime keeps the dynamic batch axis; ``optimize=False`` switches its
    graph optimisations off (``ORT_DISABLE_ALL``; the default is
    ``ORT_ENABLE_ALL``), and ``threads`` sets its intra-op thread count.
    """
    path = Path(path)
    onnx_files.read_onnx(path)  # one clear error for a missing, truncated or corrupt file
    name = backends.select_backend(backend)
    if name == "migraphx":
        return compile_migraphx(path, batch_size, tuned)
    return _compile_ort(path, optimize, tuned, threads)


# --------------------------------------------------------------------------- saved models


@dataclass
class SavedModel:
    """What :func:`save_compiled` wrote."""

    path: Path
    backend: str
    size_bytes: int
    seconds: float
    """Time to compile (and tune) and write the file."""
    compiled: CompiledModel
    """The model that was saved, ready to run."""

    def summary(self) -> str:
        return (
            f"{backends.BACKEND_TITLES[self.backend]} wrote {self.path.name} "
            f"({self.size_bytes / 1e6:.1f} MB) in {self.seconds:.1f} s"
        )


def saved_suffix(backend: str) -> str:
    return ".mxr" if backend == "migraphx" else ".opt.onnx"


def save_compiled(
    onnx_path: str | os.PathLike,
    out: str | os.PathLike | None = None,
    backend: str | None = None,
    batch_size: int = 1,
    tuned: bool = True,
    threads: int | None = None,
) -> SavedModel:
    """Compile ``onnx_path`` (tuned by default) and save the result for reuse.

    MIGraphX: ``migraphx.save(program, "model.mxr")`` (msgpack), the program with
    its compiled kernels and tuning results. ONNX Runtime: the session's
    ``optimized_model_filepath``, an ONNX file holding the graph after all
    optimisations (fused, with this CPU's blocked memory layout), which loads
    without optimising again. Written to a temporary name and renamed.
    """
    onnx_path = Path(onnx_path)
    onnx_files.read_onnx(onnx_path)
    name = backends.select_backend(backend)
    if out is None:
        out = onnx_path.with_name(onnx_path.name.removesuffix(".onnx") + saved_suffix(name))
    out = Path(out)
    start = time.perf_counter()
    with atomic_path(out) as tmp:
        if name == "migraphx":
            compiled = compile_migraphx(onnx_path, batch_size, tuned)
            backends.migraphx_status().module.save(compiled.handle, str(tmp), format="msgpack")
        else:
            compiled = _compile_ort(onnx_path, True, tuned, threads, save_to=tmp)
    seconds = time.perf_counter() - start
    return SavedModel(out, name, out.stat().st_size, seconds, compiled)


def load_compiled(
    path: str | os.PathLike, backend: str | None = None, threads: int | None = None
) -> CompiledModel:
    """Load a model saved by :func:`save_compiled`, ready to run without compiling.

    A ``.mxr`` file needs MIGraphX (``migraphx.load``); any other file is given to
    ONNX Runtime with graph optimisations off, since they were applied before
    saving.
    """
    path = Path(path)
    if not path.is_file():
        raise onnx_files.ModelFileError(f"{path}: no such file")
    if path.suffix == ".mxr":
        mgx = backends.migraphx_status()
        if not mgx.available:
            raise backends.BackendError(
                f"{path} is a MIGraphX compiled program and loading it needs MIGraphX: {mgx.how}"
            )
        if backend not in (None, "auto", "migraphx"):
            raise backends.BackendError(
                f"{path} is a MIGraphX compiled program: use the migraphx backend"
            )
        start = time.perf_counter()
        try:
            prog = mgx.module.load(str(path), format="msgpack")
        except RuntimeError as exc:
            raise onnx_files.ModelFileError(
                f"{path}: not a readable MIGraphX program ({one_line(exc)[:160]})"
            ) from None
        name, shape = migraphx_inputs(prog)
        return CompiledModel(
            backend="migraphx",
            provider="MIGraphX gpu target",
            device=gpu_description(),
            input_name=name,
            input_shape=shape,
            output_name="output 0",
            settings="loaded from a saved .mxr (compiled and tuned before saving)",
            source=path,
            compile_seconds=time.perf_counter() - start,
            handle=prog,
        )
    onnx_files.read_onnx(path)
    if backends.select_backend(backend) == "migraphx":
        return compile_migraphx(path, 1, False)
    compiled = _compile_ort(path, optimize=False, tuned=False, threads=threads)
    compiled.settings = (
        f"loaded a saved optimised model, no optimisation at load, "
        f"{count(threads or default_threads(), 'intra-op thread')}"
    )
    return compiled


# --------------------------------------------------------------------------- comparing


def max_rel_error(output: np.ndarray, reference: np.ndarray) -> float:
    """Largest absolute difference divided by the largest reference magnitude.

    Relative to the largest logit rather than element by element, so that
    logits near zero (whose elementwise relative error means nothing) do not
    dominate.
    """
    output = np.asarray(output, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if output.shape != reference.shape:
        raise InputShapeError(f"outputs differ in shape: {output.shape} vs {reference.shape}")
    scale = float(np.max(np.abs(reference))) or 1.0
    return float(np.max(np.abs(output - reference)) / scale)


def tolerance_for(compiled: CompiledModel, reference_device: str = "cpu") -> float:
    """:data:`CPU_TOLERANCE` when both sides ran on the CPU, else :data:`GPU_TOLERANCE`."""
    both_cpu = not compiled.on_gpu and str(reference_device).startswith("cpu")
    return CPU_TOLERANCE if both_cpu else GPU_TOLERANCE


def torch_logits(model, x: np.ndarray, device=None) -> np.ndarray:
    """PyTorch eager logits for the batch ``x`` (NumPy in, NumPy out)."""
    import torch

    dev = torch.device(device) if device is not None else next(model.parameters()).device
    model = model.eval()
    with torch.inference_mode():
        out = model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(dev))
    return out.float().cpu().numpy()


def image_batch(path: str | os.PathLike | None = None, batch_size: int = 1, size: int = 299):
    """A batch of ``batch_size`` copies of one preprocessed photo (default: the
    sample photo), as a float32 NumPy array N x 3 x size x size."""
    from rocm_dl_guide.casestudies import inception_pretrained

    photo = inception_pretrained.open_image(
        path if path is not None else inception_pretrained.sample_photo()
    )
    x = inception_pretrained.preprocess(photo, size=size).numpy()
    return np.ascontiguousarray(np.repeat(x[None], batch_size, axis=0), dtype=np.float32)


def top_classes(logits: np.ndarray, categories: list[str] | None = None, top: int = 5):
    """Top-``top`` classes of one row of logits as a DataFrame (softmax probabilities)."""
    import pandas as pd

    row = np.asarray(logits, dtype=np.float64).reshape(-1)
    probs = np.exp(row - row.max())
    probs /= probs.sum()
    order = np.argsort(-probs)[:top]
    names = [
        categories[i] if categories and len(categories) == len(row) else f"class {i}" for i in order
    ]
    return pd.DataFrame(
        {
            "rank": range(1, len(order) + 1),
            "category": names,
            "index": order.tolist(),
            "probability": probs[order].tolist(),
        }
    )


@dataclass
class Agreement:
    """A compiled model's output next to PyTorch's on the same input."""

    max_rel_error: float
    tolerance: float
    same_top1: bool
    reference_device: str

    @property
    def ok(self) -> bool:
        return self.max_rel_error <= self.tolerance and self.same_top1

    def summary(self) -> str:
        verdict = "within" if self.max_rel_error <= self.tolerance else "OUTSIDE"
        top = "same" if self.same_top1 else "DIFFERENT"
        return (
            f"max relative error {self.max_rel_error:.1e} ({verdict} the tolerance "
            f"{self.tolerance:.0e}); {top} top-1 class as PyTorch on {self.reference_device}"
        )


def agreement(compiled: CompiledModel, model, x: np.ndarray, device=None) -> Agreement:
    """Run ``x`` through ``compiled`` and through PyTorch, and compare."""
    import torch

    dev = torch.device(device) if device is not None else next(model.parameters()).device
    ours = compiled.run(x)
    ref = torch_logits(model, x, dev)
    return Agreement(
        max_rel_error=max_rel_error(ours, ref),
        tolerance=tolerance_for(compiled, str(dev)),
        same_top1=bool(np.array_equal(ours.argmax(axis=1), ref.argmax(axis=1))),
        reference_device=str(dev),
    )


# --------------------------------------------------------------------------- one image


def classify(
    model: str | os.PathLike,
    image: str | os.PathLike | None,
    backend: str | None = None,
    top: int = 5,
    size: int | None = None,
    threads: int | None = None,
):
    """Compile the ONNX file ``model`` (or load a saved ``.mxr``) and classify one image.

    ``size`` defaults to the model's input size (299 if that is symbolic).
    Returns ``(compiled, table)``: the :class:`CompiledModel` and the top
    ``top`` classes as :func:`top_classes` gives them. Raises
    :class:`~rocm_dl_guide.optimization.onnx_files.InferenceError`,
    :class:`rocm_dl_guide.casestudies.inception_pretrained.ImageError`, :class:`OSError` or
    :class:`RuntimeError`.
    """
    from rocm_dl_guide.casestudies import inception_pretrained

    path = Path(model)
    if path.suffix == ".mxr":
        compiled = load_compiled(path, backend)
    else:
        compiled = compile_model(path, backend, threads=threads)
    if size is None:
        dims = compiled.input_shape
        size = dims[-1] if dims and isinstance(dims[-1], int) and dims[-1] > 0 else 299
    x = image_batch(image, 1, size)
    logits = compiled.run(x)
    return compiled, top_classes(logits[0], inception_pretrained.categories(), top)
