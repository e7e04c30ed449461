"""The language-model chapter's ``real`` data source: pinned Hub snapshots, WikiText-2
and a pretrained model folder, tested offline on fixtures in the Hub's formats
served by a stand-in for ``huggingface_hub``'s two calls (never the network)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import hang_limit
from rocm_dl_guide.core import archives, profiles
from rocm_dl_guide.lm import corpus as corpora
from rocm_dl_guide.lm import hub, lora, pretrain, topic_task
from rocm_dl_guide.lm import model as models

REAL_SMOKE = profiles.with_data_source(profiles.get("smoke"), "real")
TINY = models.ModelSize(layers=2, width=32, heads=2, ffn=64, context=64)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeHub:
    """``hf_hub_download`` and ``HfApi.get_paths_info`` over local repositories:
    ``repos[(repo_id, revision)]`` is a folder; files named in ``lfs`` are
    reported with their SHA-256 (as LFS files are), the others by git blob hash."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Path] = {}
        self.lfs: set[str] = set()
        self.downloads: list[str] = []
        self.record_override: dict[str, str] = {}

    def hf_hub_download(self, repo_id, filename, *, repo_type, revision, local_dir):
        source = self.repos[(repo_id, revision)] / filename
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        self.downloads.append(filename)
        return str(target)

    def get_paths_info(self, repo_id, paths, *, revision, repo_type):
        infos = []
        for p in paths:
            f = self.repos[(repo_id, revision)] / p
            if not f.is_file():
                continue
            if p in self.lfs:
                sha = self.record_override.get(p, _sha256(f))
                infos.append(SimpleNamespace(path=p, lfs=SimpleNamespace(sha256=sha), blob_id=""))
            else:
                infos.append(SimpleNamespace(path=p, lfs=None, blob_id=hub.blob_hash(f)))
        return infos


@pytest.fixture
def fake_hub(monkeypatch, private_data_cache):
    import huggingface_hub

    fake = FakeHub()
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake.hf_hub_download)
    monkeypatch.setattr(
        huggingface_hub.HfApi,
        "get_paths_info",
        lambda self, *a, **k: fake.get_paths_info(*a, **k),
    )
    return fake


def _wikitext_parquet(path: Path, articles: list[tuple[str, list[str]]]) -> None:
    """A parquet file in WikiText's layout: one row per line, a ``text`` column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [""]
    for title, paragraphs in articles:
        rows += [f" = {title} = \n", ""]
        for i, para in enumerate(paragraphs):
            if i == 1:
                rows += [f" = = Section of {title} = = \n", ""]
            rows += [para + " \n", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": rows}), path)


def _serve_wikitext(fake: FakeHub, root: Path) -> Path:
    from pydoc_data.topics import topics

    names = sorted(topics)
    paras = [[p for p in topics[n].split("\n\n") if p.strip()][:6] for n in names]
    repo = root / "wikitext"
    train, valid = (f.path for f in hub.WIKITEXT_2.files)
    _wikitext_parquet(
        repo / train, [(n.title(), p) for n, p in zip(names[:40], paras[:40], strict=True)]
    )
    _wikitext_parquet(
        repo / valid, [(n.title(), p) for n, p in zip(names[40:48], paras[40:48], strict=True)]
    )
    fake.repos[(hub.WIKITEXT_2.repo_id, hub.WIKITEXT_2.revision)] = repo
    fake.lfs |= {train, valid}
    return repo


def test_git_blob_hash_is_gits_own(tmp_path):
    f = tmp_path / "config.json"
    f.write_text('{"architectures": ["LlamaForCausalLM"]}\n')
    git = subprocess.run(
        ["git", "hash-object", str(f)], capture_output=True, text=True, check=True, timeout=30
    )
    assert hub.blob_hash(f) == git.stdout.strip()


def test_a_snapshot_is_verified_kept_whole_and_downloaded_once(fake_hub, tmp_path):
    repo = _serve_wikitext(fake_hub, tmp_path)
    root = hub.fetch(hub.WIKITEXT_2)
    assert root == hub.folder(hub.WIKITEXT_2) and hub.is_complete(hub.WIKITEXT_2, root)
    manifest = json.loads((root / hub.MANIFEST).read_text())
    train = hub.WIKITEXT_2.files[0].path
    assert manifest["revision"] == hub.WIKITEXT_2.revision
    assert manifest["files"][train]["sha256"] == _sha256(repo / train)
    assert not (root / ".cache").exists()
    assert hub.fetch(hub.WIKITEXT_2) == root and len(fake_hub.downloads) == 2  # cached

    (root / train).write_bytes(b"truncated")  # a damaged copy is not complete any more
    assert not hub.is_complete(hub.WIKITEXT_2, root)


def test_a_file_that_does_not_match_its_checksum_is_not_kept(fake_hub, tmp_path):
    _serve_wikitext(fake_hub, tmp_path)
    fake_hub.record_override[hub.WIKITEXT_2.files[1].path] = "0" * 64
    with pytest.raises(archives.ChecksumError, match="validation.*expected 0000.*nothing was kept"):
        hub.fetch(hub.WIKITEXT_2)
    folder = hub.folder(hub.WIKITEXT_2)
    assert not folder.exists() and not list(folder.parent.glob(".*download*"))

    pinned = replace(hub.WIKITEXT_2, files=(replace(hub.WIKITEXT_2.files[0], sha256="1" * 64),))
    with pytest.raises(archives.ChecksumError, match="train.*expected 1111"):
        hub.fetch(pinned)


def test_wikitext_articles_are_split_at_their_titles_and_validation_is_held_out(fake_hub, tmp_path):
    _serve_wikitext(fake_hub, tmp_path)
    corpus = corpora.for_profile(REAL_SMOKE)
    assert corpus.name == "wikitext-2-raw" and hub.WIKITEXT_2.revision[:12] in corpus.source
    assert len(corpus.train) == 40 and len(corpus.held_out) == 8
    title, text = corpus.documents[0]
    assert title == "Assert" and "= = Section of Assert = =" in text
    assert not set(corpus.train) & set(corpus.held_out)
    assert (
        corpora.for_profile(profiles.current("smoke")).name == "pydoc-topics"
    )  # fixtures: Python's docs

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="bad.parquet is not a readable WikiText parquet"):
        corpora.wikitext_articles(bad)


def test_pretraining_on_the_real_source_tokenizes_wikitext(fake_hub, tmp_path):
    _serve_wikitext(fake_hub, tmp_path)
    data = pretrain.load(REAL_SMOKE)
    assert data.corpus.name == "wikitext-2-raw"
    text = data.corpus.held_out[0][:200]
    assert data.tokenizer.decode(data.tokenizer.encode(text).ids) == text
    assert len(data.val_tokens) > 0 and 256 < data.vocab_size <= pretrain.VOCAB_SIZE


def _pretrained_folder(root: Path) -> Path:
    """A model folder in the Hub's layout (config.json, model.safetensors,
    tokenizer.json): a small random Llama with the chapter's tokenizer."""
    data = pretrain.load(profiles.current("smoke"))
    lm = models.build(TINY, data.vocab_size, data.eos_id, seed=3)
    folder = root / "smollm"
    lm.model.save_pretrained(folder)
    (folder / "tokenizer.json").write_text(data.tokenizer.to_str())
    return folder


def test_lora_on_the_real_source_fine_tunes_the_pinned_pretrained_model(
    fake_hub, tmp_path, monkeypatch
):
    folder = _pretrained_folder(tmp_path)
    names = ("config.json", "tokenizer.json", "model.safetensors")
    pin = replace(
        hub.SMOLLM2_135M,
        files=tuple(
            hub.HubFile(n, None if n == "config.json" else _sha256(folder / n)) for n in names
        ),
    )
    monkeypatch.setattr(hub, "SMOLLM2_135M", pin)
    fake_hub.repos[(pin.repo_id, pin.revision)] = folder

    lm, tokenizer, path = lora.base_model(REAL_SMOKE)
    assert path == hub.folder(pin) and fake_hub.downloads == list(names)
    x = torch.randint(0, tokenizer.get_vocab_size(), (1, 12))
    with torch.no_grad():
        assert torch.equal(lm(x), models.CausalLM(type(lm.model).from_pretrained(folder))(x))

    run = lora.train(REAL_SMOKE, epochs=1, progress=False, checkpoint_dir=tmp_path / "ckpt")
    assert run.base == hub.folder(pin) and run.base_name == "SmolLM2-135M"
    assert run.summary().startswith("LoRA on SmolLM2-135M")
    assert 0 < run.trainable_fraction < 0.5 and run.adapter is not None
    assert run.record_fields()["accuracy"] == run.accuracy


def test_a_model_folder_that_is_not_one_gets_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a transformers model folder: no config.json"):
        lora.base_model(profiles.current("smoke"), tmp_path)
    folder = _pretrained_folder(tmp_path)
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="smollm is not a readable model"):
        lora.base_model(profiles.current("smoke"), folder)


def test_answers_of_several_tokens_are_labelled_and_matched_whole(tmp_path):
    data = pretrain.load(profiles.current("smoke"))
    word = "supercalifragilistic"
    answer = topic_task.answer_ids(data.tokenizer, word)
    assert len(answer) > 1
    item = topic_task.Example("Some passage about nothing in particular.", word)
    ((x, y),) = topic_task.TopicPrompts([item], data.tokenizer)
    labelled = (y != -100).nonzero().flatten().tolist()
    assert y[labelled].tolist() == answer and x[[i + 1 for i in labelled]].tolist() == answer

    class Oracle(torch.nn.Module):
        """Predicts the answer's tokens in turn, then ``wrong_at`` breaks it."""

        def __init__(self, wrong_at=None):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.wrong_at = wrong_at

        def forward(self, ids):
            prompt = len(data.tokenizer.encode(topic_task.PROMPT.format(passage=item.passage)).ids)
            k = ids.shape[1] - prompt
            logits = torch.zeros(1, data.tokenizer.get_vocab_size(), ids.shape[1])
            logits[0, answer[k] + (1 if k == self.wrong_at else 0), -1] = 1.0
            return logits

    assert topic_task.exact_match(Oracle(), data.tokenizer, [item]) == 1.0
    assert topic_task.exact_match(Oracle(wrong_at=len(answer) - 1), data.tokenizer, [item]) == 0.0


@pytest.mark.timeout(180)
def test_lora_on_the_real_source_offline_fails_at_once_with_the_ways_out(tmp_path):
    from rocm_dl_guide.core.ports import free_ports

    env = {
        **{k: v for k, v in __import__("os").environ.items() if not k.startswith("HF_")},
        "HF_ENDPOINT": f"http://127.0.0.1:{free_ports(1)[0]}",  # nobody listens: refused
        "ROCM_DL_GUIDE_DATA": str(tmp_path / "data"),
        "ROCM_DL_GUIDE_PROFILE": "smoke",
    }
    done = subprocess.run(  # "at once": one refused connection, no retries, no training
        [sys.executable, "-m", "rocm_dl_guide", "train", "lora", "--data-source", "real"],
        capture_output=True,
        text=True,
        timeout=hang_limit(50),
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("train: cannot download SmolLM2-135M"), done.stderr
    assert "data fetch smollm2-135m" in last and "--data-source fixtures" in last
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "hub" / "smollm2-135m" / hub.SMOLLM2_135M.revision).exists()
