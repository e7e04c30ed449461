"""Generation: the KV cache changes the cost, not the answer."""

from __future__ import annotations

import pytest
import torch

from rocm_dl_guide.lm import generation, pretrain

STEPS = 24


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """tiny-lm pretrained for one epoch: its greedy choices are not near-ties."""
    folder = tmp_path_factory.mktemp("tiny-lm")
    run = pretrain.train("smoke", epochs=1, checkpoint_dir=folder, progress=False, samples=False)
    hf = run.model.model.eval()
    prompt = torch.tensor([run.data.tokenizer.encode("An exception is raised when").ids])
    return hf, prompt


def test_cached_and_recomputed_logits_agree_at_every_step(trained):
    hf, prompt = trained
    cached, full, chosen = generation.step_logits(hf, prompt, STEPS)
    assert len(cached) == len(full) == STEPS
    for step, (a, b) in enumerate(zip(cached, full, strict=True)):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), (step, (a - b).abs().max())
    # the cached path's greedy choices are the recomputing path's
    assert [int(t) for t in chosen] == [int(f.argmax()) for f in full]


def test_greedy_output_is_the_same_with_every_cache_and_in_a_batch(trained):
    hf, prompt = trained
    outputs = {c: generation.generate(hf, prompt, STEPS, c) for c in generation.CACHES}
    assert outputs["dynamic"].shape == (1, prompt.shape[1] + STEPS)
    assert torch.equal(outputs["dynamic"], outputs["none"])
    assert torch.equal(outputs["dynamic"], outputs["static"])
    batch = generation.generate(hf, prompt.repeat(3, 1), STEPS, "dynamic")
    assert all(torch.equal(row, outputs["dynamic"][0]) for row in batch)


def test_timed_generation_reports_its_figures(trained):
    hf, prompt = trained
    row = generation.timed(hf, prompt.repeat(2, 1), 8, "dynamic", iterations=1)
    assert (row.kv_cache, row.batch, row.new_tokens) == (True, 2, 8)
    assert 0 < row.prefill_ms < row.ms
    assert row.tokens_per_s == pytest.approx(2 * 8 / (row.ms / 1e3))
    with pytest.raises(ValueError, match="unknown cache 'paged'"):
        generation.timed(hf, prompt, 8, "paged")


def test_the_cache_holds_a_key_and_a_value_per_layer_and_head(trained):
    hf, _ = trained
    c = hf.config
    per_token = generation.cache_bytes_per_token(c)
    assert per_token == 2 * c.num_hidden_layers * c.hidden_size * 4  # heads x head size = width
    assert generation.cache_bytes_per_token(c, torch.bfloat16) == per_token // 2
