"""Weight quantization of the chapter's language model with torchao.

Each precision is a copy of the pretrained model (:func:`rocm_dl_guide.lm.lora.base_model`)
whose linear layers ``torchao.quantization.quantize_`` converted; the embedding
table stays in floating point. The configurations (:func:`config`):

- ``int8-weight-only`` (``Int8WeightOnlyConfig``): int8 weights, one scale per
  output row; activations stay in floating point, so every call multiplies
  floating-point activations with the int8 weights cast back to floating point.
- ``int8-dynamic`` (``Int8DynamicActivationInt8WeightConfig``): int8 weights,
  and each call quantizes the activations too (one scale per token, chosen at
  run time: *dynamic*), so the product is an integer matrix multiplication,
  rescaled afterwards.
- ``int4-weight-only``: int4 weights in groups of :data:`INT4_GROUP_SIZE`
  values, each with its scale and zero point. The layout follows the kernel:
  on a GPU ``Int4WeightOnlyConfig`` with the tile-packed layout of the
  *tinygemm* kernel (``torch.ops.aten._weight_int4pack_mm``; tiles of 16 on
  ROCm, 8 on CUDA); on a CPU torchao's prototype ``PrototypeInt4WeightOnlyConfig``,
  packed for PyTorch's CPU kernel ``_weight_int4pack_mm_for_cpu``. (torchao's
  default int4 layout needs the ``mslk`` kernels, a GPU library.)
- ``fp8`` (``Float8DynamicActivationFloat8WeightConfig``, one scale per row):
  FP8 weights and activations and an FP8 matrix multiplication
  (``torch._scaled_mm``), which needs FP8 matrix hardware: an AMD Instinct
  MI300 or MI350 (gfx942, gfx950) or an NVIDIA GPU of compute capability 8.9
  or more. On the MI300 torchao picks the ``float8_e4m3fnuz`` variant.

``fp32`` is the reference, ``bf16`` the plain half-size copy. On a GPU the
quantized copies start from bfloat16 (what torchao's GPU kernels expect), on a
CPU from float32 (:func:`base_dtype`).

:func:`table` measures every precision in one run: tokens per second of greedy
generation (the models timed side by side, :mod:`rocm_dl_guide.core.timing`), the
size of the serialized weights (``torch.save`` of the state dict, torchao's
tensor subclasses included), and the held-out perplexity on the same blocks of
text, against float32's. Precisions that cannot run on the device get a row
that says why (:func:`supported`, which tries the configuration on one small
layer).
"""

from __future__ import annotations

import copy
import io
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from rocm_dl_guide.core import profiles, timing

PRECISIONS = ("fp32", "bf16", "int8-weight-only", "int8-dynamic", "int4-weight-only", "fp8")
"""The precisions compared, in the table's order (``fp32`` is the reference)."""
INT4_GROUP_SIZE = 64
"""Values per int4 scale and zero point: divides the widths of tiny-lm (192,
384, 512, ...) and SmolLM2-135M (576, 1536); torchao's default, 128, does not,
and a layer it does not divide stays unquantized."""
FP8_ARCHS = ("gfx940", "gfx941", "gfx942", "gfx950")
"""AMD GPUs with FP8 matrix cores: the Instinct MI300 series and the MI350."""
NEW_TOKENS = {"smoke": 8, "gpu": 32}
"""New tokens per timed generation, per profile (``full`` takes ``gpu``'s): on a
GPU, eager decoding of a small model is bound by per-token overheads (of
``generate`` and of torchao's tensor subclasses), so more tokens add time, not
information."""
ITERATIONS = {"smoke": 5, "gpu": 5}
"""Timed generations per precision, after one warm-up."""
EVAL_BLOCKS = {"smoke": 4, "gpu": 256}
"""Held-out blocks (of the model's context length) the perplexity is measured on."""


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: one of {', '.join(PRECISIONS)}")


def base_dtype(precision: str, device: torch.device | str) -> torch.dtype:
    """The floating-point type a precision's copy starts from: its own for
    ``fp32`` and ``bf16``; for the quantized ones bfloat16 on a GPU and
    float32 on a CPU."""
    check_precision(precision)
    if precision in ("fp32", "bf16"):
        return torch.float32 if precision == "fp32" else torch.bfloat16
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def config(precision: str, device: torch.device | str) -> Any:
    """torchao's configuration of ``precision`` on ``device`` (``None`` for
    ``fp32`` and ``bf16``, which are casts)."""
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Int4WeightOnlyConfig,
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        PerRow,
    )
    from torchao.quantization.quantize_.workflows import Int4PackingFormat

    check_precision(precision)
    gpu = torch.device(device).type == "cuda"
    # set_inductor_config=False: leave torch.compile's process-wide settings alone
    if precision == "int8-weight-only":
        return Int8WeightOnlyConfig(set_inductor_config=False)
    if precision == "int8-dynamic":
        return Int8DynamicActivationInt8WeightConfig(set_inductor_config=False)
    if precision == "int4-weight-only" and gpu:
        return Int4WeightOnlyConfig(
            group_size=INT4_GROUP_SIZE,
            int4_packing_format=Int4PackingFormat.TILE_PACKED_TO_4D,
            int4_tile_packed_ntile=16 if torch.version.hip else 8,
            set_inductor_config=False,
        )
    if precision == "int4-weight-only":
        from torchao.prototype.quantization.int4 import PrototypeInt4WeightOnlyConfig

        return PrototypeInt4WeightOnlyConfig(group_size=INT4_GROUP_SIZE, set_inductor_config=False)
    if precision == "fp8":
        return Float8DynamicActivationFloat8WeightConfig(
            granularity=PerRow(), set_inductor_config=False
        )
    return None


def quantize(model: nn.Module, precision: str, device: torch.device | str | None = None):
    """A copy of ``model`` in ``precision`` (the original is left as it is), on
    ``device`` (by default the model's). Every ``nn.Linear`` is quantized, the
    output layer included (which unties it from the embedding table, which
    stays in floating point)."""
    from torchao.quantization import quantize_

    check_precision(precision)
    if device is None:
        device = next(model.parameters()).device
    copied = copy.deepcopy(model).to(device=device, dtype=base_dtype(precision, device))
    cfg = config(precision, device)
    if cfg is not None:
        quantize_(copied, cfg)
    return copied.eval()


def fp8_hardware(device: torch.device | str) -> str | None:
    """Why ``device`` has no FP8 matrix multiplication; ``None`` when it has one."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return (
            f"FP8 matrix multiplication needs an AMD Instinct MI300/MI350 "
            f"({', '.join(FP8_ARCHS[2:])}) or an NVIDIA GPU of compute capability 8.9 "
            f"or more; this is a {device.type.upper()}"
        )
    if torch.version.hip:
        arch = torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
        if arch not in FP8_ARCHS:
            return f"{arch} has no FP8 matrix cores (needs {', '.join(FP8_ARCHS[2:])})"
        return None
    cc = torch.cuda.get_device_capability(device)
    if cc < (8, 9):
        return f"compute capability {cc[0]}.{cc[1]} has no FP8 matrix multiplication (needs 8.9)"
    return None


def supported(precision: str, device: torch.device | str) -> str | None:
    """``None`` when ``precision`` runs on ``device``, else why not. The quantized
    precisions are tried on one small linear layer: quantized, then run."""
    check_precision(precision)
    device = torch.device(device)
    if precision == "fp8" and (why := fp8_hardware(device)):
        return why
    if precision in ("fp32", "bf16"):
        return None
    layer = nn.Sequential(nn.Linear(256, 256, bias=False))
    try:
        small = quantize(layer, precision, device)
        with torch.no_grad():
            small(torch.randn(4, 256, device=device, dtype=base_dtype(precision, device)))
    except Exception as exc:  # noqa: BLE001 - torchao and its kernels raise many kinds
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        return f"{precision} does not run on {device.type} here ({first[:200]})"
    return None


def size_mb(model: nn.Module) -> float:
    """MB (2**20 bytes) of the model's serialized state dict (``torch.save`` into
    memory): quantized data, scales and zero points, and what stays in floating
    point. Tied weights are stored once."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell() / 2**20


def linear_mb(model: nn.Module) -> float:
    """MB of the serialized weights of the model's ``nn.Linear`` layers alone
    (the output layer included, the embedding table not)."""
    weights = {n: m.weight for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    return buffer.tell() / 2**20


class _Float32Logits(nn.Module):
    """The model with float32 logits, so that the loss of a bfloat16 model is
    computed in float32 (a bfloat16 cross-entropy alone moves perplexity by
    percents)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids).float()


def perplexity(model: nn.Module, loader, device: torch.device | str) -> float:
    """Held-out perplexity (:func:`rocm_dl_guide.lm.pretrain.perplexity`) from
    float32 logits, whatever the model's precision."""
    from rocm_dl_guide.lm import pretrain

    return pretrain.perplexity(_Float32Logits(model), loader, torch.device(device))


def held_out(profile: profiles.Profile, tokenizer: Any, blocks: int | None = None):
    """A loader of the first ``blocks`` held-out blocks of ``profile``'s corpus,
    tokenized with ``tokenizer`` (the model's own: tiny-lm's, or SmolLM2's)."""
    from torch.utils.data import DataLoader

    from rocm_dl_guide.lm import corpus as corpora
    from rocm_dl_guide.lm import model as models
    from rocm_dl_guide.lm import pretrain

    block = models.SIZES.get(profile.name, models.SIZES["smoke"]).context
    tokens = corpora.encode_documents(tokenizer, corpora.for_profile(profile).held_out)
    if blocks is not None:
        tokens = tokens[: blocks * block + 1]
    return DataLoader(pretrain.TokenBlocks(tokens, block), batch_size=8)


@dataclass
class QuantRow:
    """One precision of the model."""

    precision: str
    tokens_per_s: float | None
    """New tokens per second of greedy generation (one sequence, KV cache)."""
    size_mb: float | None
    """The whole serialized state dict (:func:`size_mb`)."""
    perplexity: float | None
    perplexity_change: float | None
    """Percent change of the held-out perplexity against ``fp32``'s."""
    skipped: str | None = None
    """Why the precision did not run here; ``None`` when it ran."""
    linear_mb: float | None = None
    """The linear layers' weights alone (:func:`linear_mb`)."""
    same_tokens: float | None = None
    """Fraction of the greedy new tokens equal to ``fp32``'s, position by position."""
    method: str = ""
    """torchao's configuration, or the cast."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TABLE_COLUMNS = {
    "precision": "precision",
    "tokens_per_s": "tokens/s",
    "size_mb": "model (MB)",
    "linear_mb": "linear layers (MB)",
    "perplexity": "perplexity",
    "perplexity_change": "perplexity vs fp32 (%)",
    "same_tokens": "tokens as fp32's (%)",
}
""":class:`QuantRow`'s measured fields as the page's table heads them, with units."""
TABLE_FORMATS = {
    "tokens/s": "{:,.1f}",
    "model (MB)": "{:.2f}",
    "linear layers (MB)": "{:.2f}",
    "perplexity": "{:.2f}",
    "perplexity vs fp32 (%)": "{:+.3f}",
    "tokens as fp32's (%)": "{:.0f}",
}
"""How the page's table prints each figure column (:func:`rocm_dl_guide.core.tables.show`)."""


def results(rows: list[QuantRow]) -> list[dict[str, Any]]:
    """The precisions that ran, as the page shows them: under :data:`TABLE_COLUMNS`'
    heads, the share of fp32's tokens in percent. A skipped precision has no
    figures (:func:`supported` says why)."""
    shown = []
    for r in rows:
        if r.skipped is not None:
            continue
        values = r.to_dict()
        values["same_tokens"] = 100 * values["same_tokens"]
        shown.append({head: values[k] for k, head in TABLE_COLUMNS.items()})
    return shown


def method(precision: str, device: torch.device | str) -> str:
    """What makes ``precision``: torchao's configuration's name, or the cast."""
    cfg = config(precision, device)
    return type(cfg).__name__ if cfg is not None else f"model.to({base_dtype(precision, device)})"


def measure(
    model: nn.Module,
    prompt: torch.Tensor,
    loader,
    device: torch.device | str = "cpu",
    precisions: tuple[str, ...] = PRECISIONS,
    new_tokens: int = 8,
    iterations: int = 5,
) -> list[QuantRow]:
    """Every precision of ``model`` (a :class:`rocm_dl_guide.lm.model.CausalLM`)
    on the same terms: the same ``prompt`` (token ids), the same held-out
    ``loader``; generations timed side by side. ``fp32`` is always measured,
    as the reference; precisions that cannot run get a row that says why."""
    from rocm_dl_guide.lm import generation

    device = torch.device(device)
    for p in precisions:
        check_precision(p)
    skipped = {p: why for p in precisions if (why := supported(p, device))}
    copies = {p: quantize(model, p, device) for p in ("fp32", *precisions) if p not in skipped}
    prompt = prompt.to(device)
    outputs: dict[str, torch.Tensor] = {}

    def runner(name: str, lm: nn.Module):
        def run() -> None:
            outputs[name] = generation.generate(lm.model, prompt, new_tokens)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return run

    runs = {p: runner(p, lm) for p, lm in copies.items()}
    times = timing.measure_side_by_side(runs, warmup=1, iterations=iterations, rounds=2)
    ppl = {p: perplexity(lm, loader, device) for p, lm in copies.items()}
    reference = outputs["fp32"][0, prompt.shape[1] :]
    rows = []
    for p in precisions:
        if p in skipped:
            rows.append(QuantRow(p, None, None, None, None, skipped[p], method=method(p, device)))
            continue
        new = outputs[p][0, prompt.shape[1] :]
        rows.append(
            QuantRow(
                precision=p,
                tokens_per_s=new_tokens / (times[p].median_ms / 1e3),
                size_mb=size_mb(copies[p]),
                perplexity=ppl[p],
                perplexity_change=100 * (ppl[p] / ppl["fp32"] - 1),
                linear_mb=linear_mb(copies[p]),
                same_tokens=(new == reference).float().mean().item(),
                method=method(p, device),
            )
        )
    return rows


def table(
    profile: profiles.Profile,
    new_tokens: int | None = None,
    iterations: int | None = None,
    blocks: int | None = None,
    precisions: tuple[str, ...] = PRECISIONS,
) -> list[QuantRow]:
    """:func:`measure` on ``profile``'s pretrained model (tiny-lm offline,
    SmolLM2-135M on real data), on the device :func:`rocm_dl_guide.core.device.pick`
    gives, with the profile's sizes unless given."""
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.lm import corpus, lora

    name = profile.name if profile.name in NEW_TOKENS else "gpu"
    dev = devices.pick()
    lm, tokenizer, _ = lora.base_model(profile)
    prompt = torch.tensor([tokenizer.encode(corpus.PROMPT).ids])
    loader = held_out(profile, tokenizer, blocks or EVAL_BLOCKS[name])
    return measure(
        lm.eval(),
        prompt,
        loader,
        dev,
        precisions,
        new_tokens or NEW_TOKENS[name],
        iterations or ITERATIONS[name],
    )
