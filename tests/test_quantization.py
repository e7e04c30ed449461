"""Weight quantization (torchao): int8 weight-only keeps the model's perplexity and
its greedy choices, takes under half the linear layers' bytes, and what cannot
run here says why."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import corpus, generation, lora, pretrain
from rocm_dl_guide.lm import quantization as quant

SMOKE = profiles.current("smoke")

CPU = torch.device("cpu")
BLOCKS = 16
"""Held-out blocks of 128 tokens the perplexities are compared on."""
STEPS = 16
LOGIT_TOLERANCE = 0.05
"""Largest difference of int8 weight-only's next-token logits from float32's,
relative to the spread (max - min) of float32's logits at that position."""


@pytest.fixture(scope="module")
def trained(tiny_lm_weights):
    """tiny-lm pretrained for one epoch, its held-out blocks and a prompt."""
    lm, tokenizer, _ = lora.base_model(SMOKE, tiny_lm_weights)
    data = pretrain.load(SMOKE)
    val = DataLoader(Subset(data.val_loader.dataset, range(BLOCKS)), batch_size=8)
    prompt = torch.tensor([tokenizer.encode(corpus.PROMPT).ids])
    return lm.eval(), val, prompt


@pytest.fixture(scope="module")
def int8(trained):
    lm, _, _ = trained
    return quant.quantize(lm, "int8-weight-only")


def test_int8_weight_only_keeps_perplexity_within_2_percent(trained, int8):
    lm, val, _ = trained
    reference = quant.perplexity(lm, val, CPU)
    quantized = quant.perplexity(int8, val, CPU)
    assert abs(quantized / reference - 1) < 0.02, (reference, quantized)
    # the original is left as it was: a copy was quantized
    assert type(lm.model.lm_head.weight) is nn.Parameter
    assert lm.model.lm_head.weight.dtype == torch.float32


def test_int8_weight_only_keeps_the_logits_and_the_greedy_choices(trained, int8):
    lm, _, prompt = trained
    cached, _, _ = generation.step_logits(lm.model, prompt, 4)
    q_cached, _, _ = generation.step_logits(int8.model, prompt, 4)
    for step, (a, b) in enumerate(zip(cached, q_cached, strict=True)):
        spread = (a.max() - a.min()).item()
        assert (a - b).abs().max().item() <= LOGIT_TOLERANCE * spread, step
    ours = generation.generate(lm.model, prompt, STEPS)[0, prompt.shape[1] :]
    theirs = generation.generate(int8.model, prompt, STEPS)[0, prompt.shape[1] :]
    assert (ours == theirs).float().mean().item() >= 0.75, (ours, theirs)


def test_int8_linear_weights_take_under_half_the_bytes(trained, int8):
    lm, _, _ = trained
    assert quant.linear_mb(int8) < 0.5 * quant.linear_mb(lm)  # about 0.26: 1 byte + scales
    assert quant.size_mb(int8) < quant.size_mb(lm)
    # the embedding table stays float32; the output layer is no longer tied to it
    embedding = int8.model.model.embed_tokens.weight
    assert type(embedding) is nn.Parameter and embedding.dtype == torch.float32
    assert type(int8.model.lm_head.weight.data).__name__ == "Int8Tensor"
    assert int8.model.lm_head.weight.data_ptr() != embedding.data_ptr()


def test_every_precision_gets_a_row_and_the_skipped_ones_say_why(trained):
    lm, val, prompt = trained
    short = DataLoader(Subset(val.dataset, range(2)), batch_size=2)
    asked = ("fp32", "int8-dynamic", "int4-weight-only", "fp8")
    rows = quant.measure(lm, prompt, short, CPU, asked, new_tokens=4, iterations=1)
    by = {r.precision: r for r in rows}
    assert list(by) == list(asked)
    assert by["fp32"].perplexity_change == 0 and by["fp32"].same_tokens == 1
    for name in ("int8-dynamic", "int4-weight-only"):  # both have a CPU kernel
        row = by[name]
        assert row.skipped is None and row.tokens_per_s > 0, row
        assert abs(row.perplexity_change) < 5, row
        assert row.linear_mb < 0.5 * by["fp32"].linear_mb, row
    fp8 = by["fp8"]  # FP8 matrix multiplication needs a GPU with FP8 matrix cores
    assert fp8.skipped.startswith("FP8 matrix multiplication needs an AMD Instinct MI300")
    assert fp8.skipped == quant.supported("fp8", CPU)
    assert (fp8.tokens_per_s, fp8.size_mb, fp8.perplexity, fp8.perplexity_change) == (None,) * 4
    assert set(rows[0].to_dict()) >= {"precision", "tokens_per_s", "size_mb", "skipped"}


def test_a_precision_that_fails_on_the_device_is_reported_not_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this device\nsecond line")

    monkeypatch.setattr(quant, "quantize", broken)
    why = quant.supported("int8-dynamic", CPU)
    assert why == "int8-dynamic does not run on cpu here (no kernel for this device)"
    assert quant.supported("fp32", CPU) is None


def test_an_unknown_precision_is_one_clear_error(trained):
    lm, _, _ = trained
    message = "unknown precision 'int3': one of fp32, bf16, int8-weight-only"
    for call in (
        lambda: quant.quantize(lm, "int3"),
        lambda: quant.supported("int3", CPU),
        lambda: quant.config("int3", CPU),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_the_results_table_heads_its_columns_in_words_with_units():
    """The page's table: the precisions that ran, under heads a reader can read
    (perplexity's change in percent, the share of fp32's tokens in percent)."""
    ran = quant.QuantRow("int8-weight-only", 30.0, 5.1, 158.1, 0.05, None, 2.1, 0.875)
    skipped = quant.QuantRow("fp8", None, None, None, None, "no FP8 matrix cores")
    shown = quant.results([ran, skipped])
    assert len(shown) == 1 and list(shown[0]) == list(quant.TABLE_COLUMNS.values())
    heads = list(shown[0])
    assert not any("_" in h for h in heads)
    assert "perplexity vs fp32 (%)" in heads and "model (MB)" in heads
    assert shown[0]["tokens as fp32's (%)"] == 87.5
    assert shown[0]["perplexity vs fp32 (%)"] == 0.05
    assert set(quant.TABLE_FORMATS) <= set(heads)
