"""The language-model chapter's corpus, tokenizer, model wrapper and command."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import TINY_LM_RECORD
from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import corpus, model, pretrain

SMOKE = profiles.current("smoke")
GPU = profiles.current("gpu")
FULL = profiles.current("full")


@pytest.fixture(scope="module")
def docs() -> corpus.Corpus:
    return corpus.python_docs()


@pytest.fixture(scope="module")
def tok(docs):
    return corpus.tokenizer(docs, 1024)  # in the session's data cache


def test_the_corpus_is_real_english_split_by_topic(docs):
    assert len(docs.documents) > 50 and docs.words > 50_000
    assert "list comprehension" in " ".join(docs.train).lower()
    assert set(docs.train).isdisjoint(docs.held_out) and len(docs.held_out) >= 5


@pytest.mark.parametrize(
    "text",
    ["A list comprehension builds a new list.", "def f(x):\n    return x ** 2  # π ≈ 3.14 😀", ""],
)
def test_the_tokenizer_round_trips_text(tok, text):
    ids = tok.encode(text).ids
    assert tok.decode(ids) == text


def test_the_tokenizer_is_cached_and_a_corrupt_one_is_named(docs, tok, monkeypatch, tmp_path):
    path = corpus.tokenizer_path(docs, 1024)
    assert path.is_file()
    assert corpus.tokenizer(docs, 1024).to_str() == tok.to_str()  # read, not retrained
    monkeypatch.setenv("ROCM_DL_GUIDE_DATA", str(tmp_path))
    bad = corpus.tokenizer_path(docs, 1024)
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable tokenizer.*delete it"):
        corpus.tokenizer(docs, 1024)


def test_blocks_are_inputs_and_the_next_tokens():
    blocks = pretrain.TokenBlocks(torch.arange(21), 5)
    assert len(blocks) == 4
    x, y = blocks[1]
    assert x.tolist() == [5, 6, 7, 8, 9] and y.tolist() == [6, 7, 8, 9, 10]
    with pytest.raises(ValueError, match="too few"):
        pretrain.TokenBlocks(torch.arange(5), 5)


def test_unigram_perplexity_of_uniform_text_is_the_vocabulary_size():
    tokens = torch.arange(8).repeat(100)
    assert pretrain.unigram_perplexity(tokens, tokens, 8) == pytest.approx(8.0, rel=1e-3)


def test_the_wrapper_gives_the_loss_transformers_computes(tok):
    shape = model.ModelSize(layers=2, width=64, heads=2, ffn=128, context=16)
    lm = model.build(shape, tok.get_vocab_size(), 0, seed=0).eval()
    tokens = torch.randint(
        0, tok.get_vocab_size(), (2, 17), generator=torch.Generator().manual_seed(0)
    )
    x, y = tokens[:, :-1], tokens[:, 1:]
    logits = lm(x)
    assert logits.shape == (2, tok.get_vocab_size(), 16)  # class-first, as the loop expects
    ours = torch.nn.functional.cross_entropy(logits[:, :, :-1], y[:, :-1])
    theirs = lm.model(input_ids=x, labels=x).loss  # transformers shifts the labels itself
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert len(lm.fsdp_units()) == 2  # FSDP shards per transformer block


def test_next_token_loss_is_cross_entropy_on_the_class_first_logits():
    from rocm_dl_guide.training.metrics import IGNORE_INDEX

    gen = torch.Generator().manual_seed(0)
    # (batch, vocab, time) as a view of (batch, time, vocab), as CausalLM returns it
    logits = torch.randn(3, 7, 50, generator=gen).transpose(1, 2).requires_grad_()
    targets = torch.randint(0, 50, (3, 7), generator=gen)
    targets[0, :4] = IGNORE_INDEX  # prompt positions without a label, as in LoRA's task
    ours = model.next_token_loss(logits, targets)
    reference = torch.nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)(logits, targets)
    assert torch.allclose(ours, reference, atol=1e-6)
    (g_ours,) = torch.autograd.grad(ours, logits)
    (g_ref,) = torch.autograd.grad(reference, logits)
    assert torch.allclose(g_ours, g_ref, atol=1e-7)


@pytest.mark.timeout(300)  # the shared run takes about 30 s, 60 s beside a busy worker
def test_train_tiny_lm_records_perplexities_and_beats_the_untrained_model(tiny_lm_run):
    """`train tiny-lm --epochs 1 --json` (the shared run every tiny-lm test reads)."""
    tmp_path = tiny_lm_run
    record = json.loads((tmp_path / TINY_LM_RECORD).read_text())
    for key in (
        "tokens_per_s",
        "final_loss",
        "perplexity_before",
        "perplexity_unigram",
        "perplexity",
    ):
        assert math.isfinite(record[key]) and record[key] > 0, key
    # Seeds 1 and 2 (pretrain.train(seed=...)): 4280 -> 429 and 4225 -> 358, 10-12x.
    assert record["perplexity"] < record["perplexity_before"] / 4
    assert record["perplexity_before"] > 0.5 * 4096  # untrained: close to uniform
    weights = tmp_path / pretrain.WEIGHTS_NAME
    assert weights.is_file()
    # next to the weights, the same model as a transformers folder, marked current
    from transformers import AutoModelForCausalLM

    from rocm_dl_guide.training import checkpoints

    assert pretrain.folder_for(weights) == tmp_path / pretrain.MODEL_FOLDER
    assert pretrain.folder_is_current(weights)
    data = pretrain.load(SMOKE)
    lm = model.build(model.SIZES["smoke"], data.vocab_size, data.eos_id, seed=1)
    checkpoints.load_weights(lm, weights)
    folder = AutoModelForCausalLM.from_pretrained(tmp_path / pretrain.MODEL_FOLDER)
    ids = torch.tensor([data.tokenizer.encode("The ").ids])
    with torch.no_grad():
        torch.testing.assert_close(folder(ids).logits, lm.decoder()(ids).logits)


def test_tiny_lm_epochs_come_from_the_recipe_capped_by_the_registry():
    from rocm_dl_guide.core import casestudies

    caps = casestudies.get("tiny-lm").epoch_caps
    assert pretrain.settings(SMOKE)["epochs"] == caps["smoke"]
    assert pretrain.settings(GPU)["epochs"] == caps["gpu"]
    assert pretrain.settings(FULL)["epochs"] == pretrain.RECIPE["epochs"]


FSDP_TIMEOUT = 180
"""A limit against a hung torchrun job: each of the two FSDP tests below takes
about 35 s alone on two cores (one epoch of tiny-lm under FSDP2)."""


@pytest.fixture(scope="module")
def fsdp_epoch(tmp_path_factory):
    """``train tiny-lm --nproc 2 --fsdp --epochs 1``: FSDP2 over two processes
    (gloo on the CPU), once for both tests: its folder and its run."""
    from rocm_dl_guide.distributed import scaling

    folder = tmp_path_factory.mktemp("fsdp-tiny-lm")
    run = scaling.train_cli(
        "tiny-lm", folder, nproc=2, extra=("--fsdp", "--epochs", "1"), timeout=FSDP_TIMEOUT
    )
    return folder, run


@pytest.mark.timeout(FSDP_TIMEOUT)
def test_tiny_lm_under_fsdp_on_two_ranks_shards_each_block(fsdp_epoch):
    """Each transformer block sharded across both ranks: the run trains, its DCP
    checkpoint holds half of each block's weights per rank, and the whole model
    is gathered into the weights file."""
    from rocm_dl_guide.training import checkpoints, sharded

    folder, first = fsdp_epoch
    assert first.returncode == 0, first.log[-3000:]
    assert first.lines("fully sharded (FSDP2): 2 processes")
    record = first.record
    assert record["world_size"] == 2
    assert record["perplexity"] < record["perplexity_before"] / 4
    layout = sharded.layout(folder / f"{checkpoints.SHARDED_PREFIX}1")
    block = layout[layout["tensor"].str.contains(r"layers\.0\..*q_proj\.weight")]
    assert len(block) == 2 and set(block["file"]) == {"__0_0.distcp", "__1_0.distcp"}
    rows = block["shape"].iloc[0][0]
    assert sorted(block["offsets"]) == [(0, 0), (rows // 2, 0)]  # one half per rank
    assert (folder / pretrain.WEIGHTS_NAME).is_file()  # the whole model, gathered


@pytest.mark.timeout(FSDP_TIMEOUT)
def test_tiny_lm_under_fsdp_resumes_from_its_sharded_checkpoint(fsdp_epoch):
    """Resumed under FSDP from epoch 1's sharded checkpoint, the run goes on from
    that step with the trained model: stopped by SIGTERM a few steps into epoch 2
    (as a scheduler would stop it), it has continued the step count, its running
    loss is below epoch 1's, and it saved the step it reached as a sharded
    checkpoint. (That a resumed FSDP run ends exactly like an uninterrupted one
    is test_preemption's; here it is tiny-lm's model, scheduler and checkpoint.
    Until issue 42 this test trained all of epoch 2, 30-40 s more.)"""
    from rocm_dl_guide.core import preemption
    from rocm_dl_guide.distributed import scaling
    from rocm_dl_guide.training import checkpoints

    folder, first = fsdp_epoch
    assert first.returncode == 0, first.log[-3000:]
    done = checkpoints.read_checkpoint(folder / checkpoints.CHECKPOINT_NAME)["step"]
    again = scaling.train_cli(
        "tiny-lm",
        folder,
        nproc=2,
        extra=("--fsdp", "--resume", "--epochs", "2", "--checkpoint-every", "2"),
        sigterm_after_step=done + 2,
        timeout=FSDP_TIMEOUT,
    )
    assert again.returncode == preemption.EXIT_PREEMPTED, again.log[-3000:]
    assert again.lines("resuming from")
    ckpt = checkpoints.read_checkpoint(folder / checkpoints.CHECKPOINT_NAME)
    where = ckpt["in_epoch"]
    assert done + 2 <= ckpt["step"] < 2 * done and where["epoch"] == 2, (done, ckpt["step"])
    assert ckpt["sharded"] == f"{checkpoints.SHARDED_STEP_PREFIX}{ckpt['step']}"
    assert (folder / ckpt["sharded"]).is_dir()
    tallies = [rank["tally"] for rank in where["ranks"]]
    running = sum(t["loss_sum"] for t in tallies) / sum(t["samples"] for t in tallies)
    # An untrained model's loss is about ln(4096) = 8.3, far above epoch 1's mean.
    assert running < first.record["final_loss"], (running, first.record["final_loss"])


def test_the_size_table_has_readable_headers_for_every_column():
    """Every column of the size facts and the settings has a header in words, with
    its unit, and a format under that header (never a snake_case key on the page)."""
    shape = model.SIZES["smoke"]
    with torch.device("meta"):
        m = model.build(shape, pretrain.VOCAB_SIZE, 0)
    facts = model.size_facts(m, shape) | pretrain.settings(profiles.get("smoke"))
    assert set(pretrain.SIZE_COLUMNS) <= set(facts)
    headers = list(pretrain.SIZE_COLUMNS.values())
    assert not any("_" in h for h in headers)
    assert "weights (MiB)" in headers and "training state (MiB)" in headers
    assert set(pretrain.SIZE_FORMATS) <= set(headers)
    assert pretrain.SIZE_FORMATS["weights (MiB)"].format(facts["weights_mib"]) == "8.1"


def test_the_size_table_reads_down_the_page_with_each_figure_formatted():
    import pandas as pd

    from rocm_dl_guide.lm import pretrain

    row = {c: 1 for c in pretrain.SIZE_COLUMNS} | {"parameters": 2_100_000, "peak_lr": 0.003}
    sizes = pd.DataFrame([{"profile": "smoke"} | row, {"profile": "gpu"} | row])
    table = pretrain.size_table(sizes)
    assert list(table.columns) == ["setting", "smoke", "gpu"]
    assert list(table["setting"]) == list(pretrain.SIZE_COLUMNS.values())
    shown = dict(zip(table["setting"], table["smoke"], strict=True))
    assert shown["parameters"] == "2,100,000" and shown["peak learning rate"] == "0.003"
    assert shown["layers"] == "1"  # an integer stays one
