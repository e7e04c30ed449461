"""The names of the training step's variants, for ``bench training`` and its
sweep (:mod:`rocm_dl_guide.training.training_speed`). No PyTorch here: the
command line reads these to build its help without importing it."""

from __future__ import annotations

from dataclasses import dataclass

PRECISIONS = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}
FLAGS = ("cl", "compile", "graphs", "fused")
"""Variant names are a precision and flags joined by ``+``: ``fp32``, ``bf16``
or ``fp16`` (autocast; fp16 with a gradient scaler), then ``cl`` (channels-last),
``compile`` (``torch.compile``) or ``graphs`` (``torch.compile`` in its
``reduce-overhead`` mode: CUDA/HIP graphs), and ``fused`` (the optimizer's fused
kernel instead of its default ``foreach`` one). Example: ``bf16+cl+compile+fused``."""

GPU_VARIANTS = (
    "fp32",
    "fp32+cl",
    "bf16",
    "bf16+cl",
    "fp16+cl",
    "bf16+cl+compile",
    "bf16+cl+compile+fused",
)
CPU_VARIANTS = ("fp32", "fp32+cl", "bf16", "fp16", "bf16+cl", "fp32+compile", "fp32+fused")
"""The default variants of :func:`sweep` where the workload has an image layout;
a token workload drops the ``cl`` ones."""


@dataclass(frozen=True)
class Variant:
    """One way of running the training step (see :data:`FLAGS` for the names)."""

    precision: str = "fp32"
    channels_last: bool = False
    compile: str | None = None
    """``None`` (eager), ``"default"`` or ``"reduce-overhead"`` (graphs)."""
    fused: bool = False

    @property
    def name(self) -> str:
        parts = [self.precision]
        parts += ["cl"] if self.channels_last else []
        parts += {"default": ["compile"], "reduce-overhead": ["graphs"]}.get(self.compile, [])
        parts += ["fused"] if self.fused else []
        return "+".join(parts)

    @property
    def words(self) -> str:
        """The variant in words, for a reader: ``bf16+cl`` -> "bf16 autocast with
        channels-last"."""
        base = "float32" if self.precision == "fp32" else f"{self.precision} autocast"
        extra = ["channels-last"] if self.channels_last else []
        extra += {"default": ["torch.compile"], "reduce-overhead": ["CUDA/HIP graphs"]}.get(
            self.compile, []
        )
        extra += ["the fused optimizer"] if self.fused else []
        if not extra:
            return base
        return f"{base} with " + (", ".join(extra[:-1]) + " and " if extra[1:] else "") + extra[-1]

    @property
    def amp_dtype(self) -> str | None:
        return PRECISIONS[self.precision]

    @classmethod
    def parse(cls, name: str) -> Variant:
        """``"bf16+cl+compile"`` -> ``Variant("bf16", True, "default")``; ``ValueError``
        naming the grammar for anything else."""
        precision, *flags = [part.strip() for part in name.strip().lower().split("+")]
        bad = [f for f in flags if f not in FLAGS]
        bad += [] if precision in PRECISIONS else [precision]
        if bad or len(set(flags)) != len(flags) or {"compile", "graphs"} <= set(flags):
            raise ValueError(
                f"unknown training variant {name!r}: a precision ({', '.join(PRECISIONS)}) then "
                f"any of +cl, +compile or +graphs, +fused (for example bf16+cl+compile)"
            )
        mode = "reduce-overhead" if "graphs" in flags else "default" if "compile" in flags else None
        return cls(precision, "cl" in flags, mode, "fused" in flags)
