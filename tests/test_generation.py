"""Generation: the KV cache changes the cost, not the answer; ``generate`` and
``bench llm`` on the command line."""

from __future__ import annotations

import json
import time

import pytest
import torch

from rocm_dl_guide.cli import main
from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import benchmark, corpus, generation, lora, pretrain

SMOKE = profiles.current("smoke")

STEPS = 24


@pytest.fixture(scope="module")
def trained(tiny_lm_weights):
    """tiny-lm pretrained for one epoch: its greedy choices are not near-ties."""
    lm, tokenizer, _ = lora.base_model(SMOKE, tiny_lm_weights)
    hf = lm.model.eval()
    prompt = torch.tensor([tokenizer.encode(corpus.PROMPT).ids])
    return hf, prompt


@pytest.fixture(scope="module")
def weights(tiny_lm_weights):
    """The fixture's weights as `train tiny-lm` saves them."""
    return tiny_lm_weights


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


def test_timed_takes_prefill_and_the_whole_from_the_same_generations(trained, monkeypatch):
    hf, prompt = trained
    runs = iter([[0.1, 0.5, 0.9], [0.3, 0.4, 0.6], [0.2, 0.3, 2.0]])
    calls = []

    def fake(model, prompt, n, cache, compiled):
        calls.append((n, cache, compiled))
        return next(runs)

    monkeypatch.setattr(generation, "token_times", fake)
    monkeypatch.setattr(generation, "generate", lambda *a, **k: calls.append(("warm-up", a[2])))
    row = generation.timed(hf, prompt, 3, "static", iterations=3, warmup=1)
    assert calls == [("warm-up", 3)] + [(3, "static", False)] * 3  # no separate prefill run
    assert (row.prefill_ms, row.ms) == pytest.approx((200.0, 900.0))  # medians of first and last
    assert row.tokens_per_s == pytest.approx(3 / 0.9)


def test_the_cache_holds_a_key_and_a_value_per_layer_and_head(trained):
    hf, _ = trained
    c = hf.config
    per_token = generation.cache_bytes_per_token(c)
    assert per_token == 2 * c.num_hidden_layers * c.hidden_size * 4  # heads x head size = width
    assert generation.cache_bytes_per_token(c, torch.bfloat16) == per_token // 2


def test_the_curve_times_every_length_with_every_cache_and_gives_the_speedup(trained):
    hf, prompt = trained
    rows = generation.curve(hf, prompt, (8, 4, 8), ("none", "dynamic"))
    assert [(r.new_tokens, r.cache) for r in rows] == [
        (4, "none"),
        (4, "dynamic"),
        (8, "none"),
        (8, "dynamic"),
    ]
    by = {(r.cache, r.new_tokens): r for r in rows}
    assert generation.speedup(rows, 8) == pytest.approx(by[("none", 8)].ms / by[("dynamic", 8)].ms)
    for cache in ("none", "dynamic"):
        short, long = by[(cache, 4)], by[(cache, 8)]
        # both lengths come from one generation of 8: the same first token, later ends
        assert short.prefill_ms == long.prefill_ms < short.ms < long.ms
        assert long.tokens_per_s == pytest.approx(8 / (long.ms / 1e3))


def test_token_times_follow_each_token_of_one_generation(trained):
    hf, prompt = trained
    times = generation.token_times(hf, prompt, 12, "none")
    assert len(times) == 12 and times == sorted(set(times)) and times[0] > 0
    # the streamer changes nothing in what is generated
    clock = generation.TokenClock()
    streamed = generation.generate(hf, prompt, 12, streamer=clock)
    assert torch.equal(streamed, generation.generate(hf, prompt, 12)) and len(clock.times) == 12
    # a batch streams each step's tokens at once: one time per step
    assert len(generation.token_times(hf, prompt.repeat(2, 1), 4)) == 4


def test_the_curve_is_the_median_of_its_runs_at_every_token(trained, monkeypatch):
    hf, prompt = trained
    runs = iter([[1.0, 2.0, 9.0], [0.5, 1.0, 2.0], [3.0, 4.0, 5.0], [0.1, 0.2, 0.3]])
    calls = []

    def fake(model, prompt, n, cache, cpu_times):
        calls.append(cache)
        wall = next(runs)
        cpu_times.extend(t / 2 for t in wall)  # the thread ran half the time
        return wall

    monkeypatch.setattr(generation, "token_times", fake)
    cpu = {}
    curves = generation.token_curves(hf, prompt, 3, ("none", "dynamic"), iterations=2, cpu=cpu)
    assert calls == ["none", "dynamic", "none", "dynamic"]  # the caches take turns
    assert curves == {"none": [2.0, 3.0, 7.0], "dynamic": [0.3, 0.6, 1.15]}
    assert cpu == {c: pytest.approx([t / 2 for t in curve]) for c, curve in curves.items()}
    rows = generation.rows_at(curves, (3,))
    assert [(r.cache, r.ms, r.prefill_ms) for r in rows] == [
        ("none", 7000.0, 2000.0),
        ("dynamic", 1150.0, 300.0),
    ]
    with pytest.raises(ValueError, match="no time for 4 new tokens: the curve has 3"):
        generation.rows_at(curves, (4,))


def test_only_the_static_cache_compiles(trained):
    hf, prompt = trained
    with pytest.raises(ValueError, match="only the static cache compiles"):
        generation.generate(hf, prompt, 4, "dynamic", compiled=True)


@pytest.mark.timeout(600)
def test_the_compiled_static_cache_writes_the_same_tokens(trained):
    """transformers' own compile path (CompileConfig), forced on the CPU."""
    hf, prompt = trained
    compiled = generation.generate(hf, prompt, 6, "static", compiled=True)
    assert torch.equal(compiled, generation.generate(hf, prompt, 6, "dynamic"))


def test_generate_continues_the_prompt_with_the_given_weights(weights, trained, capsys):
    hf, prompt = trained
    argv = ["generate", "--prompt", corpus.PROMPT, "--max-new-tokens", "12"]
    assert main([*argv, "--model", str(weights), "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["new_tokens"] == 12 and record["temperature"] == 0.0
    assert record["source"] == str(weights) and record["tokens_per_s"] > 0
    # greedy: the very continuation generate() writes on the same weights
    expected = generation.generate(hf, prompt, 12)[0, prompt.shape[1] :]
    tokenizer = pretrain.load(SMOKE).tokenizer
    assert record["text"] == tokenizer.decode(expected.tolist())
    assert main([*argv, "--model", str(weights), "--temperature", "1.5", "--seed", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(corpus.PROMPT) and "sampled at temperature 1.5" in err


def test_generate_refuses_bad_input_in_one_line(weights, tmp_path, capsys):
    assert main(["generate", "--prompt", "", "--model", str(weights)]) == 1
    assert (
        capsys.readouterr().err.strip().endswith("the prompt is empty: give some text to continue")
    )
    assert main(["generate", "--prompt", "x", "--model", str(tmp_path / "missing.pt")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("generate: no pretrained model at") and len(err.splitlines()) == 1
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    assert main(["generate", "--prompt", "x", "--model", str(tmp_path / "bad.pt")]) == 1
    assert "bad.pt" in capsys.readouterr().err


def test_bench_llm_prints_one_record_with_the_machine(monkeypatch, capsys):
    """The record's shape, on a real attention measurement at two short lengths."""
    from rocm_dl_guide.lm import attention

    monkeypatch.setitem(attention.SEQ_LENS, "smoke", (64, 128))
    assert main(["bench", "llm", "--parts", "attention", "--profile", "smoke", "--json"]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out.strip().splitlines()[-1])
    assert "measuring attention" in err
    assert set(record) == {"profile", "machine", "attention"}
    assert record["machine"]["versions"]["transformers"]
    assert set(record["machine"]["cpu_flags"]) <= set(benchmark.FLAGS)
    rows = record["attention"]
    assert {r["seq_len"] for r in rows if r["ms"] is not None} == {64, 128}
    assert {"backend", "seq_len", "ms", "peak_mb", "max_abs_diff"} <= set(rows[0])
    math = [r for r in rows if r["backend"] == "math" and r["ms"] is not None]
    assert len(math) == 2 and all(r["max_abs_diff"] == 0 for r in math)
    assert main(["bench", "llm", "--parts", "attention,speed", "--json"]) == 1
    assert "unknown part 'speed'" in capsys.readouterr().err


def test_bench_llm_generation_rows_cover_the_curve_the_static_cache_and_batches(
    trained, monkeypatch
):
    """The record's generation list on the smoke profile: the page's lengths, twice
    the longest, the batch length; the static cache eager and compiled; batches.
    (Compiling is tested above: here it is switched off to keep the test short.)"""
    hf, prompt = trained
    monkeypatch.setitem(generation.NEW_TOKENS, "smoke", (4, 8))
    monkeypatch.setattr(generation, "BATCH_TOKENS", 2)
    monkeypatch.setattr(generation, "_compile_kwargs", lambda compiled: {"disable_compile": True})
    tokenizer = pretrain.load(SMOKE).tokenizer
    rows = benchmark.generation_rows(profiles.current("smoke"), hf, tokenizer)
    curve = [(r["new_tokens"], r["cache"]) for r in rows if r["batch"] == 1 and not r["compiled"]]
    assert curve[:8] == [(n, c) for n in (2, 4, 8, 16) for c in ("none", "dynamic")]
    assert [(r["cache"], r["compiled"], r["new_tokens"]) for r in rows[8:10]] == [
        ("static", False, 8),
        ("static", True, 8),
    ]
    assert [(r["batch"], r["new_tokens"]) for r in rows[10:]] == [(4, 2), (16, 2)]
    assert all(r["tokens_per_s"] > 0 and r["prefill_ms"] > 0 for r in rows)


def test_the_cpu_curves_come_from_the_same_generations_and_ignore_time_off_the_core(trained):
    """token_curves(cpu=...) fills the generating thread's CPU time to each token
    from the same runs: CPU time never runs ahead of wall time, and a spell in
    which the thread does not run (here a sleep in the streamer, as when another
    process holds the core) lengthens the wall curve only."""
    hf, prompt = trained
    cpu = {}
    wall = generation.token_curves(hf, prompt, 6, ("none", "dynamic"), cpu=cpu)
    assert set(cpu) == set(wall) and all(len(cpu[c]) == len(wall[c]) == 6 for c in wall)
    for c in wall:
        assert all(0 <= t <= w + 1e-3 for t, w in zip(cpu[c], wall[c], strict=True))
    clock = generation.TokenClock()
    put = clock.put

    def slow_put(value):
        time.sleep(0.05)
        put(value)

    clock.put = slow_put
    generation.generate(hf, prompt, 4, streamer=clock)
    steps = [b - a for a, b in zip(clock.times, clock.times[1:], strict=False)]
    cpu_steps = [b - a for a, b in zip(clock.cpu_times, clock.cpu_times[1:], strict=False)]
    assert min(steps) >= 0.05 and max(cpu_steps) < 0.04


def test_generation_tables_show_readable_headers_with_units():
    row = generation.GenRow(
        kv_cache=True, cache="dynamic", compiled=False, batch=4, new_tokens=64,
        tokens_per_s=1234.5, prefill_ms=3.21, ms=51.8,
    )  # fmt: skip
    fields = ["batch", "new_tokens", "tokens_per_s", "prefill_ms", "ms"]
    shown = generation.table([row], fields)
    assert list(shown.columns) == ["batch (sequences)", "new tokens", "tokens/s",
                                   "first token (ms)", "whole generation (ms)"]  # fmt: skip
    assert set(generation.TABLE_FORMATS) <= set(shown.columns)
    assert shown.iloc[0]["tokens/s"] == 1234.5
    assert not any("_" in c for c in generation.COLUMNS.values())
