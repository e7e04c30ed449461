"""The language-model chapter's text and tokenizer.

Offline (the ``fixtures`` data source, the ``smoke`` profile's default) the
corpus is real English that ships with Python itself: the standard library's
``pydoc_data.topics``, the text of the Python documentation's reference topics
that ``help()`` shows (79 topics, about 65,000 words). It is the same on every
machine with the same Python, needs no network and no fixture, and is split by
topic: every tenth topic is held out, so held-out perplexity is measured on
text the model never trained on.

On the ``real`` data source it is WikiText-2 (raw) from the Hugging Face Hub,
pinned by revision and checksum (:mod:`rocm_dl_guide.lm.hub`): its training
articles for training, its validation articles held out.

The tokenizer is a byte-level BPE (the scheme of GPT-2 and Llama 3) trained on
the training split with Hugging Face ``tokenizers``, and cached as
``tokenizer.json`` under the data cache (built by one process at a time, like
every cached artefact, :func:`rocm_dl_guide.core.files.prepare_once`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_dl_guide.core import datasets, files, profiles
from rocm_dl_guide.lm import hub

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from tokenizers import Tokenizer

END_OF_TEXT = "<|endoftext|>"
"""The special token that ends every document (and starts generation)."""
PROMPT = "An exception is raised when"
"""The chapter's prompt, in the corpus's own style: generation, quantization,
serving and the selfcheck all continue it."""
HELD_OUT_EVERY = 10
"""Every tenth topic (in name order, starting with the sixth) is held out."""


@dataclass(frozen=True)
class Corpus:
    """Named documents, split into training and held-out ones."""

    name: str
    source: str
    """Where the text comes from, for the page and the run record."""
    documents: tuple[tuple[str, str], ...]
    """``(title, text)`` in a fixed order."""
    held_out_documents: tuple[tuple[str, str], ...] | None = None
    """The corpus's own held-out split, where it has one; else every tenth of
    :attr:`documents` is held out."""

    @property
    def train(self) -> list[str]:
        if self.held_out_documents is not None:
            return [text for _, text in self.documents]
        return [text for i, (_, text) in enumerate(self.documents) if not _held_out(i)]

    @property
    def held_out(self) -> list[str]:
        if self.held_out_documents is not None:
            return [text for _, text in self.held_out_documents]
        return [text for i, (_, text) in enumerate(self.documents) if _held_out(i)]

    @cached_property
    def words(self) -> int:
        every = self.documents + (self.held_out_documents or ())
        return sum(len(text.split()) for _, text in every)

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the text: the tokenizer cache is keyed by it."""
        h = hashlib.sha256()
        for title, text in self.documents + (self.held_out_documents or ()):
            h.update(title.encode() + b"\0" + text.encode() + b"\0")
        return h.hexdigest()[:12]


def _held_out(index: int) -> bool:
    return index % HELD_OUT_EVERY == 5


def python_docs() -> Corpus:
    """The standard library's ``pydoc_data.topics``: Python's reference topics."""
    from pydoc_data.topics import topics

    version = ".".join(map(str, sys.version_info[:3]))
    return Corpus(
        name="pydoc-topics",
        source=f"pydoc_data.topics of Python {version} (the reference topics of help())",
        documents=tuple((name, topics[name]) for name in sorted(topics)),
    )


WIKITEXT_TRAIN, WIKITEXT_VALIDATION = (f.path for f in hub.WIKITEXT_2.files)
_ARTICLE = re.compile(r"^ = ([^=].*) = $")
"""An article's title line in WikiText (`` = Title = ``; sections have ``= =``)."""


def wikitext2() -> Corpus:
    """WikiText-2 (raw) from the Hub, pinned (downloaded once): one document per
    Wikipedia article, the validation articles held out."""
    root = hub.fetch(hub.WIKITEXT_2)
    return Corpus(
        name="wikitext-2-raw",
        source=f"WikiText-2 (raw), {hub.WIKITEXT_2.repo_id} at {hub.WIKITEXT_2.revision[:12]}",
        documents=wikitext_articles(root / WIKITEXT_TRAIN),
        held_out_documents=wikitext_articles(root / WIKITEXT_VALIDATION),
    )


def wikitext_articles(parquet: Path) -> tuple[tuple[str, str], ...]:
    """The articles of a WikiText parquet file (one row per line, a ``text`` column)."""
    import pyarrow.parquet as pq

    try:
        lines = pq.read_table(parquet, columns=["text"]).column("text").to_pylist()
    except Exception as exc:  # pyarrow raises its own kinds
        raise ValueError(f"{parquet} is not a readable WikiText parquet file ({exc})") from exc
    articles: list[tuple[str, list[str]]] = []
    for line in lines:
        title = _ARTICLE.match(line.rstrip("\n"))
        if title:
            articles.append((title.group(1), []))
        if articles:
            articles[-1][1].append(line)
    if not articles:
        raise ValueError(f"{parquet} holds no WikiText article (no ` = Title = ` line)")
    return tuple((title, "".join(body).strip()) for title, body in articles)


def for_profile(profile: profiles.Profile) -> Corpus:
    """The corpus of ``profile``'s data source: Python's documentation offline
    (``fixtures``), WikiText-2 from the Hub with ``real``."""
    return wikitext2() if profile.pretrained else python_docs()


def tokenizer_path(corpus: Corpus, vocab_size: int) -> Path:
    """Where the tokenizer of ``corpus`` with ``vocab_size`` tokens is cached."""
    key = f"{corpus.name}-{corpus.fingerprint}-bpe{vocab_size}"
    return datasets.cache_dir() / "lm" / key / "tokenizer.json"


def tokenizer(corpus: Corpus, vocab_size: int = 4096) -> Tokenizer:
    """The byte-level BPE tokenizer of ``corpus``'s training split (trained once, cached).

    Byte-level: every string, whatever its characters, encodes to tokens and
    decodes back unchanged.
    """
    from tokenizers import Tokenizer

    path = tokenizer_path(corpus, vocab_size)

    def complete(p: Path) -> bool:
        return p.is_file()

    def build() -> None:
        tok = train_tokenizer(corpus.train, vocab_size)
        with files.atomic_write(path, "w") as fh:
            fh.write(tok.to_str())

    files.prepare_once(path, complete, build, what=f"the {corpus.name} tokenizer")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception type
        raise ValueError(
            f"{path} is not a readable tokenizer ({exc}); delete it to train it again"
        ) from exc


def train_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE tokenizer on ``texts`` (in memory)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def encode_documents(tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """All ``texts`` as one stream of token ids, each document followed by the
    end-of-text token (the way GPT-style pretraining packs documents)."""
    import torch

    eot = tok.token_to_id(END_OF_TEXT)
    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def describe(tok: Tokenizer) -> dict:
    """The tokenizer's facts for a page: vocabulary size and model type."""
    return {"vocab_size": tok.get_vocab_size(), "model": json.loads(tok.to_str())["model"]["type"]}
