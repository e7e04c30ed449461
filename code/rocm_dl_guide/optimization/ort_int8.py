"""ONNX Runtime's static int8 for the CPU: its settings, calibration, the
quantization itself, and the record of which setting is fastest on which CPU.

:class:`Int8Config` is one setting of ``onnxruntime.quantization.quantize_static``
(QDQ format): unsigned or signed activations, per-channel weights, 7-bit
weights (``reduce_range``) and the calibration method. :func:`int8_configs`
lists the ones ONNX Runtime's guidance makes worth measuring on a CPU with
given flags; :class:`CalibrationReader` feeds the calibration images;
:func:`quantize_onnx_int8` writes the quantized model atomically. ``bench
precision`` (:mod:`rocm_dl_guide.optimization.precision`) times each setting and records
the fastest per CPU (:func:`record_choice`); :func:`chosen_int8` reads it back,
and ``export --int8`` (:func:`export_int8`) uses it.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import tempfile
from collections.abc import Collection, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from rocm_dl_guide.core import device, profiles
from rocm_dl_guide.core.files import atomic_path, atomic_write
from rocm_dl_guide.optimization import onnx_files

CPU_FLAGS = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
"""The CPU flags (``/proc/cpuinfo``) that decide how fast int8 and bf16 run."""

QUANTIZABLE_OPS = ("Conv", "MatMul", "Gemm")
"""Operators whose weights static int8 quantization converts; a model without
any has nothing to quantize."""


@dataclass(frozen=True)
class Int8Config:
    """One static int8 setting of ONNX Runtime's ``quantize_static`` (QDQ format)."""

    activation: str = "uint8"
    """``uint8`` (asymmetric, with a zero point) or ``int8`` (symmetric)."""
    weight: str = "int8"
    per_channel: bool = True
    reduce_range: bool = False
    """Weights in 7 bits, so that AVX2's 16-bit sums of products cannot saturate."""
    calibration: str = "MinMax"
    """``MinMax``, ``Entropy`` or ``Percentile`` (ONNX Runtime's CalibrationMethod)."""

    @property
    def name(self) -> str:
        """Short name: ``U8S8`` (uint8 activations, int8 weights) or ``S8S8``, and options."""
        parts = [("U8" if self.activation == "uint8" else "S8") + "S8"]
        parts.append("per-channel" if self.per_channel else "per-tensor")
        if self.reduce_range:
            parts.append("reduce_range")
        parts.append(self.calibration)
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"format": "QDQ", **asdict(self), "name": self.name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Int8Config:
        """The setting :meth:`to_dict` wrote (``PrecisionError`` for anything else)."""
        try:
            config = cls(**{k: data[k] for k in _INT8_FIELDS})
        except (KeyError, TypeError) as exc:
            raise PrecisionError(f"not an int8 setting: {data!r}") from exc
        if config.activation not in ("uint8", "int8") or config.weight not in ("uint8", "int8"):
            raise PrecisionError(f"not an int8 setting: {data!r}")
        return config


_INT8_FIELDS = ("activation", "weight", "per_channel", "reduce_range", "calibration")

U8S8 = Int8Config()
"""ONNX Runtime's recommendation for x86 CPUs with VNNI."""
S8S8 = Int8Config(activation="int8")
"""Signed, symmetric activations: ONNX Runtime's recommendation for ARM and GPUs."""


DEFAULT_INT8 = S8S8
"""The setting where none was measured: ONNX Runtime's own default types
(``quantize_static``'s ``activation_type`` and ``weight_type`` are both
``QInt8``, in QDQ format), per channel."""
CHOICE_FILE = "int8-choice.json"
"""Where ``bench precision`` records, per CPU, the int8 setting it found best
(in the ``precision`` runs folder, :func:`choice_file`)."""


def choice_file() -> Path:
    """The record of the int8 settings ``bench precision`` chose, one per CPU."""
    from rocm_dl_guide.core.runs import runs_dir

    return runs_dir("precision") / CHOICE_FILE


def machine_key(flags: Collection[str] | None = None) -> str:
    """This CPU as the choice record names it: its model and the flags that
    decide int8 speed (:data:`CPU_FLAGS`)."""
    flags = device.cpu_flags() if flags is None else flags
    return f"{device.cpu_name()} [{' '.join(f for f in CPU_FLAGS if f in flags) or 'no flags'}]"


def read_choices(path: Path) -> dict[str, Any]:
    """The int8 choices recorded at ``path``, by machine (``{}`` where there is no
    file yet); :class:`PrecisionError` for a file that is not a JSON object."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PrecisionError(
            f"{path}: not a readable int8 choice record ({exc}); delete it and run "
            "`python -m rocm_dl_guide bench precision` again"
        ) from None
    if not isinstance(data, dict):
        raise PrecisionError(f"{path}: not an int8 choice record (expected a JSON object)")
    return data


def record_choice(
    best: dict[str, Any],
    cpu_flags: Collection[str],
    machine: str,
    versions: dict[str, str],
    path: str | os.PathLike | None = None,
) -> Path:
    """Record ``best``, a benchmark row of the fastest int8 setting at batch 1,
    for the CPU with ``cpu_flags`` (:func:`machine_key`), beside the other CPUs'
    (atomically); returns the file."""
    path = Path(path) if path else choice_file()
    choices = read_choices(path)
    choices[machine_key(cpu_flags)] = {
        "config": best["config"],
        "ms": best["ms"],
        "speedup_vs_eager_fp32": best["speedup_vs_eager_fp32"],
        "top1_agreement": best["top1_agreement"],
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine,
        "versions": versions,
    }
    with atomic_write(path, "w") as f:
        json.dump(choices, f, indent=1)
        f.write("\n")
    return path


def chosen_int8(path: str | os.PathLike | None = None) -> tuple[Int8Config, str]:
    """The int8 setting for this CPU and why: the one ``bench precision``
    measured best here, if it recorded one, else :data:`DEFAULT_INT8`."""
    path = Path(path) if path else choice_file()
    entry = read_choices(path).get(machine_key())
    if entry is None:
        return DEFAULT_INT8, (
            f"{DEFAULT_INT8.name}: ONNX Runtime's default types (no int8 setting measured on "
            "this CPU yet; `python -m rocm_dl_guide bench precision` measures and records one)"
        )
    config = Int8Config.from_dict(entry.get("config") or {})
    agreement = entry.get("top1_agreement")
    agreed = f", {agreement:.1%} top-1 agreement" if isinstance(agreement, float) else ""
    return config, (
        f"{config.name}: the fastest int8 setting `bench precision` measured on this CPU "
        f"({entry.get('date')}: {entry.get('ms', float('nan')):.1f} ms at batch 1{agreed})"
    )


def export_int8(
    path: str | os.PathLike, profile: profiles.Profile, calibration: int = 16
) -> tuple[Path, Int8Config, str]:
    """Inception v3's ONNX model at ``path`` in int8 with this CPU's setting
    (:func:`chosen_int8`), calibrated on ``calibration`` batches of the profile's
    tiny-imagenet-200 at 299 pixels; writes ``<stem>.int8.onnx`` beside it and
    returns ``(file, setting, why)``."""
    from rocm_dl_guide.casestudies import tiny_imagenet

    config, why = chosen_int8()
    tiny = tiny_imagenet.tiny_imagenet_loaders(profile, image_size=299, batch_size=8)
    path = Path(path)
    out = path.with_name(f"{path.stem}.int8.onnx")
    quantize_onnx_int8(path, out, calibration_batches(tiny.val_loader, calibration), config=config)
    return out, config, why


def has_vnni(flags: Collection[str]) -> bool:
    """Whether the CPU has int8 dot-product instructions (VNNI or AMX-INT8)."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(flags))


def int8_configs(flags: Collection[str]) -> list[Int8Config]:
    """The int8 settings worth measuring on a CPU with ``flags``, from ONNX
    Runtime's guidance for CPU inference: U8S8 and S8S8 (per-channel, MinMax);
    on a CPU without VNNI also U8S8 with ``reduce_range`` (its remedy for
    saturating 16-bit sums); and U8S8 with Percentile calibration, which clips
    outlying activations instead of stretching the scale to them."""
    configs = [U8S8, S8S8]
    if not has_vnni(flags):
        configs.append(replace(U8S8, reduce_range=True))
    configs.append(replace(U8S8, calibration="Percentile"))
    return configs


def int8_reason(flags: Collection[str]) -> str:
    """What this CPU's int8 instructions mean for the settings of :func:`int8_configs`,
    in words (from ONNX Runtime's guidance for CPU inference)."""
    if "amx_int8" in flags or has_vnni(flags):
        what = "AMX-INT8 tiles" if "amx_int8" in flags else "VNNI dot products"
        return (
            f"This CPU has {what}: they multiply unsigned 8-bit activations by signed "
            "8-bit weights and add the products into 32-bit sums in one instruction, "
            "which is what U8S8 asks for, with no risk of overflow, so reduce_range "
            "is not needed."
        )
    if "avx2" in flags:
        return (
            "This CPU has AVX2 but no VNNI: its int8 products go through VPMADDUBSW, "
            "which multiplies unsigned 8-bit activations by signed 8-bit weights and "
            "adds pairs into 16-bit sums that saturate; reduce_range (7-bit weights) is "
            "ONNX Runtime's remedy, at some cost in precision, and the integer kernels "
            "have less of an edge over a well-optimised fp32 graph."
        )
    return "This CPU has no SIMD int8 instructions that ONNX Runtime's kernels use."


def uncapped_note(cpuinfo: str | None = None, cpuid_masked: bool | None = None) -> str:
    """Where an instruction-set cap hides flags this CPU has
    (:func:`rocm_dl_guide.core.device.capability_cap`), a sentence saying that ONNX
    Runtime does not follow it: its kernels (MLAS) pick their instructions from
    the processor itself, and no switch caps them, so its rows are faster than
    on a CPU without those instructions. ``""`` where nothing is hidden, or where
    the CPUID instruction itself hides them (``cpuid_masked``; by default
    :func:`rocm_dl_guide.core.device.cpuid_hides_avx512`), since ONNX Runtime then
    follows the cap too. ``cpuinfo``: /proc/cpuinfo's text (read when not given)."""
    if device.capability_cap() is None:
        return ""
    if device.cpuid_hides_avx512() if cpuid_masked is None else cpuid_masked:
        return ""
    if cpuinfo is None:
        cpuinfo = device.cpuinfo_text()
    hidden = [
        f for f in CPU_FLAGS if f in device.cpu_flags(cpuinfo) and f not in device.cpu_flags()
    ]
    if not hidden:
        return ""
    capped = ["PyTorch"] + (["oneDNN"] if os.environ.get("ONEDNN_MAX_CPU_ISA") else [])
    return (
        f"The cap hides {', '.join(hidden)} from {' and '.join(capped)} and from this "
        "guide, but not from ONNX Runtime: its kernels (MLAS) pick their instructions "
        "from the processor itself and no switch caps them, so its rows here can be "
        "faster than on a CPU without those instructions"
        + (" (its int8 kernels use VNNI)." if has_vnni(hidden) else ".")
    )


class PrecisionError(ValueError):
    """A model that cannot be quantized, or calibration data that cannot be used."""


# --------------------------------------------------------------------------- calibration


def calibration_batches(loader: Iterable, batches: int) -> list[np.ndarray]:
    """The first ``batches`` input batches of a data loader (``(images, labels)``
    pairs) as float32 NumPy arrays, for calibration."""
    if batches < 1:
        raise PrecisionError(f"calibration needs at least one batch, got {batches}")
    out = []
    for item in loader:
        images = item[0] if isinstance(item, (tuple, list)) else item
        out.append(np.ascontiguousarray(np.asarray(images, dtype=np.float32)))
        if len(out) == batches:
            break
    if not out:
        raise PrecisionError("the calibration loader produced no batches")
    return out


def calibration_reader_base():
    from onnxruntime.quantization import CalibrationDataReader

    return CalibrationDataReader


class CalibrationReader(calibration_reader_base()):  # type: ignore[misc]
    """ONNX Runtime's ``CalibrationDataReader`` over a list of input batches.

    ``get_next`` hands out ``{input_name: batch}`` once per batch, then
    ``None``; ``rewind`` starts over (the calibrator may read the data twice).
    Every batch must be float32 with the same trailing shape.
    """

    def __init__(self, input_name: str, batches: list[np.ndarray]) -> None:
        if not batches:
            raise PrecisionError("calibration needs at least one batch")
        shapes = {tuple(b.shape[1:]) for b in batches}
        if len(shapes) != 1:
            raise PrecisionError(f"calibration batches of different shapes: {sorted(shapes)}")
        bad = [str(b.dtype) for b in batches if b.dtype != np.float32]
        if bad:
            raise PrecisionError(f"calibration batches must be float32, got {bad[0]}")
        self.input_name = input_name
        self.batches = batches
        self._it: Iterator[np.ndarray] = iter(batches)
        self.served = 0

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._it, None)
        if batch is None:
            return None
        self.served += 1
        return {self.input_name: batch}

    def rewind(self) -> None:
        self._it = iter(self.batches)


# --------------------------------------------------------------------------- quantization


def quantize_onnx_int8(
    path: str | os.PathLike,
    out: str | os.PathLike,
    batches: list[np.ndarray],
    per_channel: bool = True,
    config: Int8Config | None = None,
) -> Path:
    """Static int8 quantization of the ONNX model at ``path`` with ONNX Runtime's
    ``quantize_static`` (QDQ format; ``config``'s types, range and calibration,
    default :data:`S8S8` with ``per_channel``), calibrated on ``batches``;
    writes ``out`` atomically and returns it (:func:`quantize_onnx_int8_all`
    with one setting).

    Raises :class:`PrecisionError` for a model that has nothing to quantize
    (no Conv, MatMul or Gemm) or is quantized already, and
    :class:`~rocm_dl_guide.optimization.onnx_files.ModelFileError` for a file that
    is not a readable ONNX model.
    """
    config = config or replace(S8S8, per_channel=per_channel)
    return quantize_onnx_int8_all(path, {config: Path(out)}, batches)[config]


def quantize_onnx_int8_all(
    path: str | os.PathLike, outs: dict[Int8Config, Path], batches: list[np.ndarray]
) -> dict[Int8Config, Path]:
    """The model at ``path`` quantized in each setting of ``outs`` to its file
    (each written atomically), calibrated on ``batches``: ONNX Runtime's
    pre-processing runs once, and the calibration once per calibration method,
    its tensor ranges shared through ``quantize_static``'s own
    ``calibration_cache_path`` (the settings differ in how they quantize those
    ranges, not in the ranges). Refuses what :func:`quantize_onnx_int8` refuses."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    path = Path(path)
    model = onnx_files.read_onnx(path)  # a clear error for a missing or corrupt file
    ops = onnx_files.op_counts(path)
    if any(op in ops for op in ("QuantizeLinear", "DequantizeLinear", "QLinearConv")):
        raise PrecisionError(f"{path}: already quantized (has {_quant_ops(ops)})")
    if not any(op in ops for op in QUANTIZABLE_OPS):
        found = ", ".join(sorted(ops)) or "no operators"
        raise PrecisionError(
            f"{path}: nothing to quantize: no {'/'.join(QUANTIZABLE_OPS)} operators ({found})"
        )
    reader = CalibrationReader(model.input_name, batches)
    first = next(iter(outs.values()), None)
    if first is None:
        return {}
    first.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=first.parent) as scratch:
        pre = Path(scratch) / "preprocessed.onnx"
        # ONNX Runtime's recommended first step: shape inference and graph
        # optimisation, so that quantization sees the fused graph.
        quant_pre_process(str(path), str(pre))
        for config, out in outs.items():
            ranges = Path(scratch) / f"ranges-{config.calibration}.json"
            reader.rewind()
            _quantize_static(pre, Path(out), reader, config, ranges)
    return {config: Path(out) for config, out in outs.items()}


def _quantize_static(
    pre: Path, out: Path, reader: CalibrationReader, config: Int8Config, ranges: Path
) -> None:
    """One ``quantize_static`` call: ``pre`` in ``config`` to ``out`` (atomically),
    calibrated on ``reader``'s batches unless ``ranges`` holds them already."""
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    types = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}
    # The calibration cache is ONNX Runtime 1.31's; older releases calibrate every time.
    shared = "calibration_cache_path" in inspect.signature(quantize_static).parameters
    ranges_option = {"calibration_cache_path": str(ranges)} if shared else {}
    out.parent.mkdir(parents=True, exist_ok=True)
    # Percentile calibration prints its progress with print(); keep it off
    # the caller's output.
    with atomic_path(out) as tmp, contextlib.redirect_stdout(io.StringIO()):
        quantize_static(
            str(pre),
            str(tmp),
            reader,
            quant_format=QuantFormat.QDQ,
            activation_type=types[config.activation],
            weight_type=types[config.weight],
            per_channel=config.per_channel,
            reduce_range=config.reduce_range,
            calibrate_method=CalibrationMethod[config.calibration],
            extra_options={"ActivationSymmetric": config.activation == "int8"},
            **ranges_option,
        )


def _quant_ops(ops: dict[str, int]) -> str:
    return ", ".join(op for op in sorted(ops) if "Quant" in op or op.startswith("QLinear"))
