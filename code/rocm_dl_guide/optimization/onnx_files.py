"""ONNX files: the export of a PyTorch model, and what is read back from a file.

The optimisation chapter's runtimes (:mod:`rocm_dl_guide.optimization.inference`)
all start from an ONNX file. This module writes it (:func:`export_onnx`, with a
dynamic batch axis; :func:`export_once` exports again only when the weights,
input size, opset or PyTorch changed; :func:`export_inception` for the
chapter's Inception v3), keeps generated files out of the git tree
(:func:`models_dir`) and reads a file's inputs, outputs, opset and operators
back (:func:`read_onnx`, :func:`op_counts`) rather than assuming them.

:class:`InferenceError` is the base of the chapter's errors the reader can
fix, each one clear line that the command line prints; a missing, truncated or
corrupt model file raises its subclass :class:`ModelFileError`.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.core import datasets, profiles
from rocm_dl_guide.core.files import atomic_path, atomic_write
from rocm_dl_guide.core.messages import one_line

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from rocm_dl_guide.casestudies.inception_pretrained import LoadedModel

OPSET = 17
"""ONNX opset of the exported model (supported by MIGraphX and ONNX Runtime alike)."""
MODEL_FILE = "inception_v3.onnx"


class InferenceError(ValueError):
    """A problem the reader can fix; the message is one clear line."""


class ModelFileError(InferenceError):
    """A model file that is missing, truncated or not a model."""


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
    profile: profiles.Profile, path: str | os.PathLike | None = None
) -> ExportedInception:
    """Load Inception v3 as the profile says (pretrained weights, or random ones in
    ``smoke``; :attr:`LoadedModel.note` says which) and export it to ONNX, by
    default as ``<data cache>/models/inception_v3.onnx``.

    The file always holds the weights of the PyTorch model it is compared with:
    it is exported again whenever they differ (:func:`export_once`). Random
    weights are drawn from a fixed seed (PyTorch's own random state is left as
    it was), so every page and command gets the same ones and finds the export
    the first one wrote, instead of exporting 95 MB again each time.
    """
    import torch

    from rocm_dl_guide.casestudies import inception_pretrained

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        loaded = inception_pretrained.load_pretrained(profile)
    target = Path(path) if path is not None else models_dir() / MODEL_FILE
    onnx_model = export_once(loaded.model, target)
    onnx_model.weights_note = loaded.note
    return ExportedInception(loaded=loaded, onnx=onnx_model, profile=profile.name)
