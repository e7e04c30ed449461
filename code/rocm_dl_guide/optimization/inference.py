"""Inference with a compiled model: MIGraphX where it is importable, ONNX Runtime otherwise.

The optimisation chapter exports Inception v3 to ONNX (:func:`export_onnx`) and
hands the file to a *backend* that compiles it for the hardware:

- ``migraphx``: AMD's graph compiler, used whenever ``import migraphx`` works
  (:func:`migraphx_status` also looks in ``$ROCM_PATH/lib``,
  ``/opt/rocm/core-N.N/lib`` and ``/opt/rocm/lib``, where the ROCm packages put
  the module). ``parse_onnx``, ``compile`` for the ``gpu`` target, ``run``;
  compiled programs are saved as ``.mxr`` files.
- ``onnxruntime``: ONNX Runtime on the same ONNX file, with its
  ``MIGraphXExecutionProvider`` when the installed build has one, else on the
  CPU. The provider reported is the one the session really uses
  (``session.get_providers()``), not the available list.

:func:`select_backend` turns a name (``auto``, ``migraphx``, ``onnxruntime``)
into one of the two; :func:`compile_model` returns a :class:`CompiledModel`
whose :meth:`~CompiledModel.run` takes and returns NumPy arrays, whatever the
backend. :func:`save_compiled` / :func:`load_compiled` store and reload a
compiled, tuned model (a MIGraphX ``.mxr``, or an ONNX Runtime optimised
model file). Errors the reader can cause (an unknown backend, a corrupt model
file, a wrong input shape) raise :class:`InferenceError` subclasses with one
clear line; the command line (``infer``, ``bench``, ``export``) prints that line.
Benchmarks live in :mod:`rocm_dl_guide.optimization.bench`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rocm_dl_guide.core import datasets, profiles
from rocm_dl_guide.core.files import atomic_path, atomic_write
from rocm_dl_guide.core.messages import one_line

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    from torch import nn

    from rocm_dl_guide.casestudies.inception_pretrained import LoadedModel

BACKENDS = ("migraphx", "onnxruntime")
BACKEND_CHOICES = ("auto", *BACKENDS)
BACKEND_TITLES = {"migraphx": "MIGraphX", "onnxruntime": "ONNX Runtime"}
OPSET = 17
"""ONNX opset of the exported model (supported by MIGraphX and ONNX Runtime alike)."""
MODEL_FILE = "inception_v3.onnx"
MIGRAPHX_EP = "MIGraphXExecutionProvider"
CPU_EP = "CPUExecutionProvider"
CPU_TOLERANCE = 1e-4
"""Largest accepted relative error (see :func:`max_rel_error`) when PyTorch and the
compiled model both compute on the CPU in float32: the same arithmetic, summed in
a different order, agrees to about 1e-6 of the largest logit."""
GPU_TOLERANCE = 1e-3
"""The same bound when either side runs on a GPU: different kernels (MIOpen,
rocBLAS, generated code, MIGraphX's fast-math approximations) round differently."""


class InferenceError(ValueError):
    """A problem the reader can fix; the message is one clear line."""


class BackendError(InferenceError):
    """An unknown backend name, or a backend that is not available here."""


class ModelFileError(InferenceError):
    """A model file that is missing, truncated or not a model."""


class InputShapeError(InferenceError):
    """An input whose shape the compiled model does not accept."""


# --------------------------------------------------------------------------- backends


@dataclass
class MigraphxStatus:
    """Whether MIGraphX's Python module can be used here, and how it was found."""

    module: Any
    """The imported ``migraphx`` module, or ``None``."""
    how: str
    """One sentence: where it was imported from, or why it could not be."""

    @property
    def available(self) -> bool:
        return self.module is not None


_MIGRAPHX: MigraphxStatus | None = None


def rocm_lib_dirs() -> list[Path]:
    """``lib`` of every ROCm tree to look in: ``$ROCM_PATH``, then the Core SDK's
    ``/opt/rocm/core-N.N`` (newest first) and ``/opt/rocm/core``, then the
    legacy ``/opt/rocm`` (see :func:`rocm_dl_guide.doctor.installed.rocm_roots`)."""
    from rocm_dl_guide.doctor import installed

    roots = installed.rocm_roots()
    if os.environ.get("ROCM_PATH"):
        roots += installed.rocm_roots(env={})
    dirs = []
    for root in roots:
        if root / "lib" not in dirs:
            dirs.append(root / "lib")
    return dirs


def _try_import_migraphx() -> tuple[Any, str]:
    try:
        import migraphx
    except ImportError as exc:
        return None, one_line(exc)
    except Exception as exc:  # a broken install (missing ROCm libraries) must not crash a page
        return None, f"import migraphx failed: {one_line(exc)}"
    if not hasattr(migraphx, "parse_onnx"):
        return None, (
            "the installed 'migraphx' module has no parse_onnx (the PyPI package of that "
            "name is an empty placeholder; MIGraphX comes with ROCm)"
        )
    return migraphx, f"import migraphx worked ({getattr(migraphx, '__file__', 'built in')})"


def migraphx_status(refresh: bool = False) -> MigraphxStatus:
    """Import MIGraphX's Python module if this machine has it.

    First a plain ``import migraphx`` (a pip-installed MIGraphX wheel is found
    this way); if that fails and ``$ROCM_PATH/lib``, a Core SDK's
    ``/opt/rocm/core-N.N/lib`` or ``/opt/rocm/core/lib``, or ``/opt/rocm/lib``
    holds the module, that directory is appended to
    ``sys.path``, as ``PYTHONPATH=/opt/rocm/lib`` would, and the import retried.
    The result is cached; ``refresh=True`` looks again.
    """
    global _MIGRAPHX
    if _MIGRAPHX is not None and not refresh:
        return _MIGRAPHX
    module, why = _try_import_migraphx()
    if module is not None:
        _MIGRAPHX = MigraphxStatus(module, why)
        return _MIGRAPHX
    for libdir in rocm_lib_dirs():
        # The ROCm package installs migraphx.cpython-3XX-<platform>.so there.
        if not any(libdir.glob("migraphx*")) or str(libdir) in sys.path:
            continue
        sys.path.append(str(libdir))
        module, again = _try_import_migraphx()
        if module is not None:
            _MIGRAPHX = MigraphxStatus(
                module, f"imported from {libdir} (added to sys.path, as PYTHONPATH={libdir} does)"
            )
            return _MIGRAPHX
        sys.path.remove(str(libdir))
        why = f"{libdir} has the module but importing it failed: {again}"
    _MIGRAPHX = MigraphxStatus(None, f"MIGraphX is not importable here ({why})")
    return _MIGRAPHX


def onnxruntime_version() -> str | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    return ort.__version__


def select_backend(name: str | None = None) -> str:
    """``"migraphx"`` or ``"onnxruntime"`` for ``name`` (``None`` means ``"auto"``).

    ``auto`` picks MIGraphX when it is importable and ONNX Runtime otherwise;
    naming a backend that is not available, or an unknown name, raises
    :class:`BackendError`.
    """
    key = (name or "auto").strip().lower().replace("-", "").replace("_", "")
    if key == "ort":
        key = "onnxruntime"
    if key not in BACKEND_CHOICES:
        raise BackendError(f"unknown backend {name!r}: choose one of {', '.join(BACKEND_CHOICES)}")
    mgx = migraphx_status()
    if key == "auto":
        if mgx.available:
            return "migraphx"
        key = "onnxruntime"
    if key == "migraphx" and not mgx.available:
        raise BackendError(f"{mgx.how}; use the onnxruntime backend (or auto) instead")
    if key == "onnxruntime" and onnxruntime_version() is None:
        raise BackendError("ONNX Runtime is not installed (pip install onnxruntime)")
    return key


@dataclass
class BackendTable:
    """What :func:`backend_table` returns."""

    frame: pandas.DataFrame
    """One row per backend: ``backend``, ``available``, ``version``, ``detail``."""
    auto: str
    """The title of the backend ``auto`` picks here."""


def backend_table() -> BackendTable:
    """One row per backend: available here or not, version; and what ``auto`` picks."""
    import pandas as pd

    mgx = migraphx_status()
    rows = [
        {
            "backend": "MIGraphX",
            "available": "yes" if mgx.available else "no",
            "version": getattr(mgx.module, "__version__", "") if mgx.available else "",
            "detail": mgx.how,
        }
    ]
    ver = onnxruntime_version()
    detail = "not installed"
    if ver:
        import onnxruntime as ort

        detail = "execution providers in this build: " + ", ".join(ort.get_available_providers())
    rows.append(
        {
            "backend": "ONNX Runtime",
            "available": "yes" if ver else "no",
            "version": ver or "",
            "detail": detail,
        }
    )
    return BackendTable(pd.DataFrame(rows), BACKEND_TITLES[select_backend("auto")])


# --------------------------------------------------------------------------- ONNX files


@dataclass
class OnnxModel:
    """An ONNX file and what was read from it (never assumed)."""

    path: Path
    input_name: str
    input_shape: list
    """Dimensions of the input; a symbolic dimension (the batch) is its name."""
    output_name: str
    output_shape: list
    opset: int
    nodes: int
    size_bytes: int
    producer: str = ""
    weights_note: str = ""

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each operator type the graph has, most frequent first."""
        return op_counts(self.path)

    def summary(self) -> str:
        shape = " x ".join(str(d) for d in self.input_shape)
        return (
            f"{self.path.name}: {self.size_bytes / 1e6:.1f} MB, opset {self.opset}, "
            f"{self.nodes} nodes; input {self.input_name!r} ({shape}), "
            f"output {self.output_name!r}"
        )


def _dims(value_info) -> list:
    dims = []
    for d in value_info.type.tensor_type.shape.dim:
        dims.append(d.dim_param if d.dim_param else int(d.dim_value))
    return dims


def _load_onnx(path: str | os.PathLike):
    import onnx
    from google.protobuf.message import DecodeError

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise ModelFileError(
            f"{path}: not a valid ONNX model, the file is truncated or corrupt "
            f"({one_line(exc)[:120]})"
        ) from None
    if not proto.graph.node or not proto.graph.output:
        raise ModelFileError(f"{path}: not a valid ONNX model (the graph is empty)")
    return proto


def read_onnx(path: str | os.PathLike) -> OnnxModel:
    """Read an ONNX file's input and output names and shapes, opset and size.

    Raises :class:`ModelFileError` for a missing, truncated or corrupt file.
    """
    path = Path(path)
    proto = _load_onnx(path)
    initializers = {t.name for t in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    if not inputs:
        raise ModelFileError(f"{path}: the model has no input")
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return OnnxModel(
        path=path,
        input_name=inputs[0].name,
        input_shape=_dims(inputs[0]),
        output_name=proto.graph.output[0].name,
        output_shape=_dims(proto.graph.output[0]),
        opset=opset,
        nodes=len(proto.graph.node),
        size_bytes=path.stat().st_size,
        producer=f"{proto.producer_name} {proto.producer_version}".strip(),
    )


def op_counts(path: str | os.PathLike) -> dict[str, int]:
    """Operator types in an ONNX file and how often each occurs (domain-qualified
    when not the standard one, e.g. ``com.microsoft.nchwc.Conv``)."""
    from collections import Counter

    proto = _load_onnx(path)
    counts = Counter(
        f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        for n in proto.graph.node
    )
    return dict(counts.most_common())


def models_dir() -> Path:
    """Where generated model files go: ``<data cache>/models`` (never the git tree)."""
    path = datasets.cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def export_onnx(
    model: nn.Module,
    path: str | os.PathLike,
    image_size: int = 299,
    opset: int = OPSET,
) -> OnnxModel:
    """Export an image classifier (in eval mode) to ONNX with a dynamic batch axis.

    Uses PyTorch's TorchScript-based exporter (``dynamo=False``), which needs no
    package beyond PyTorch; its deprecation warning is silenced here. The input
    and output are named ``image`` and ``logits``; code that loads the file
    reads the names back rather than assuming them. The file is written to a
    temporary name and renamed, so an interrupted export leaves no half file.
    """
    import torch

    path = Path(path)
    model = model.eval()
    device = next(model.parameters()).device
    example = torch.zeros(1, 3, image_size, image_size, device=device)
    with (
        atomic_path(path) as tmp,
        warnings.catch_warnings(),
        torch.inference_mode(False),
        torch.no_grad(),
    ):
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.onnx.export(
            model,
            (example,),
            str(tmp),
            dynamo=False,
            opset_version=opset,
            input_names=["image"],
            output_names=["logits"],
            dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
        )
    return read_onnx(path)


def weights_digest(model: nn.Module) -> str:
    """A digest of a model's class and of every parameter and buffer (name,
    dtype, shape and values): equal digests mean the same network and weights."""
    import hashlib

    import torch

    digest = hashlib.blake2b(digest_size=16)
    digest.update(type(model).__qualname__.encode())
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def export_once(
    model: nn.Module, path: str | os.PathLike, image_size: int = 299, opset: int = OPSET
) -> OnnxModel:
    """:func:`export_onnx`, unless ``path`` already holds this very export.

    Next to the file, ``<name>.export.json`` records what was exported (the
    :func:`weights_digest`, input size, opset, PyTorch version) and the file's
    size and modification time as written. When all of them still match, the
    file is read back instead of exported again (Inception v3 takes seconds to
    export, and several pages use the same model); any difference, a missing or
    unreadable record, or an unreadable file means a new export. Processes
    asking at once export it once: the others wait for the file's build lock
    (:func:`rocm_dl_guide.core.files.build_lock`) and read that export back.
    """
    import torch

    from rocm_dl_guide.core.files import build_lock

    path = Path(path)
    record_path = path.with_name(path.name + ".export.json")
    wanted = {
        "weights": weights_digest(model),
        "image_size": image_size,
        "opset": opset,
        "torch": torch.__version__,
    }

    def on_disk() -> dict[str, Any]:
        stat = path.stat()
        return {**wanted, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}

    def current() -> OnnxModel | None:
        """The file at ``path`` if its record says it is this very export, else None."""
        try:
            if json.loads(record_path.read_text()) != on_disk():
                return None
            return read_onnx(path)
        except (OSError, ValueError, ModelFileError):
            return None  # missing, unreadable or damaged since: export again

    found = current()
    if found is not None:
        return found
    with build_lock(path, what=f"the ONNX export {path.name}"):
        found = current()  # another process may have exported it meanwhile
        if found is not None:
            return found
        exported = export_onnx(model, path, image_size=image_size, opset=opset)
        with atomic_write(record_path, "w") as fh:
            json.dump(on_disk(), fh)
    return exported


@dataclass
class ExportedInception:
    """What every inference page starts from: the PyTorch model and its ONNX export."""

    loaded: LoadedModel
    onnx: OnnxModel
    profile: str

    @property
    def model(self):
        return self.loaded.model


def export_inception(
    profile: profiles.ProfileLike = None, path: str | os.PathLike | None = None
) -> ExportedInception:
    """Load Inception v3 as the profile says (pretrained weights, or random ones in
    ``smoke``; :attr:`LoadedModel.note` says which) and export it to ONNX, by
    default as ``<data cache>/models/inception_v3.onnx``.

    The file always holds the weights of the PyTorch model it is compared with:
    it is exported again whenever they differ (:func:`export_once`).
    """
    from rocm_dl_guide.casestudies import inception_pretrained

    prof = profiles.current(profile)
    loaded = inception_pretrained.load_pretrained(prof)
    target = Path(path) if path is not None else models_dir() / MODEL_FILE
    onnx_model = export_once(loaded.model, target)
    onnx_model.weights_note = loaded.note
    return ExportedInception(loaded=loaded, onnx=onnx_model, profile=prof.name)


# --------------------------------------------------------------------------- compiled models


def default_threads() -> int:
    """CPU threads for inference: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cpu_description() -> str:
    """The CPU in words, with the cores inference may use: ``CPU (NAME, N cores)``."""
    from rocm_dl_guide.core.device import cpu_name

    return f"CPU ({cpu_name()}, {default_threads()} cores)"


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
        return BACKEND_TITLES[self.backend]

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
            f"{migraphx_status().how}."
        )
    why = migraphx_status().how
    where = (
        "its MIGraphX execution provider"
        if compiled.provider == MIGRAPHX_EP
        else f"the {compiled.provider} (CPU)"
    )
    return (
        f"These outputs come from ONNX Runtime {onnxruntime_version()} with {where}, not from "
        f"MIGraphX: {why}. On a ROCm machine with MIGraphX the same cells run MIGraphX itself."
    )


def _ort_error(path: Path, exc: BaseException) -> InferenceError:
    name = type(exc).__name__
    text = one_line(exc)
    if "] :" in text:  # "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model ... failed:..."
        text = text.rsplit(" : ", 1)[-1]
    if name == "NoSuchFile":
        return ModelFileError(f"{path}: no such file")
    if name in ("InvalidProtobuf", "InvalidGraph", "Fail", "NotImplemented"):
        return ModelFileError(f"{path}: ONNX Runtime cannot load this model ({text[:160]})")
    return InferenceError(f"{path}: {text[:200]}")


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
        settings=f"graph optimisations {level}, {n_threads} intra-op thread(s)",
        source=path,
        compile_seconds=seconds,
        providers=used,
        handle=session,
    )


def _migraphx_inputs(prog) -> tuple[str, list]:
    shapes = prog.get_parameter_shapes()
    names = [n for n in prog.get_parameter_names() if not n.startswith("main:#output")]
    if not names:
        raise ModelFileError("the MIGraphX program has no input parameter")
    name = names[0]
    return name, list(shapes[name].lens())


def compile_migraphx(path: Path, batch_size: int, tuned: bool) -> CompiledModel:
    mgx = migraphx_status().module
    start = time.perf_counter()
    try:
        # The exported batch axis is symbolic; MIGraphX compiles for fixed shapes,
        # so the symbolic dimension gets the batch size we want.
        prog = mgx.parse_onnx(str(path), default_dim_value=batch_size)
    except RuntimeError as exc:
        raise ModelFileError(f"{path}: MIGraphX cannot parse it ({one_line(exc)[:160]})") from None
    name, shape = _migraphx_inputs(prog)
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
    read_onnx(path)  # one clear error for a missing, truncated or corrupt file
    name = select_backend(backend)
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
            f"{BACKEND_TITLES[self.backend]} wrote {self.path.name} "
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
    read_onnx(onnx_path)
    name = select_backend(backend)
    if out is None:
        out = onnx_path.with_name(onnx_path.name.removesuffix(".onnx") + saved_suffix(name))
    out = Path(out)
    start = time.perf_counter()
    with atomic_path(out) as tmp:
        if name == "migraphx":
            compiled = compile_migraphx(onnx_path, batch_size, tuned)
            migraphx_status().module.save(compiled.handle, str(tmp), format="msgpack")
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
        raise ModelFileError(f"{path}: no such file")
    if path.suffix == ".mxr":
        mgx = migraphx_status()
        if not mgx.available:
            raise BackendError(
                f"{path} is a MIGraphX compiled program and loading it needs MIGraphX: {mgx.how}"
            )
        if backend not in (None, "auto", "migraphx"):
            raise BackendError(f"{path} is a MIGraphX compiled program: use the migraphx backend")
        start = time.perf_counter()
        try:
            prog = mgx.module.load(str(path), format="msgpack")
        except RuntimeError as exc:
            raise ModelFileError(
                f"{path}: not a readable MIGraphX program ({one_line(exc)[:160]})"
            ) from None
        name, shape = _migraphx_inputs(prog)
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
    read_onnx(path)
    if select_backend(backend) == "migraphx":
        return compile_migraphx(path, 1, False)
    compiled = _compile_ort(path, optimize=False, tuned=False, threads=threads)
    compiled.settings = (
        f"loaded a saved optimised model, no optimisation at load, "
        f"{threads or default_threads()} intra-op thread(s)"
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
    :class:`InferenceError`, :class:`rocm_dl_guide.casestudies.inception_pretrained.ImageError`,
    :class:`OSError` or :class:`RuntimeError`.
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
