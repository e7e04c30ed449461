"""The IMDB fixture: the ``aclImdb`` tree of ``aclImdb_v1.tar.gz``, with synthetic reviews.

Positive and negative reviews are sentences drawn from their own sentiment
vocabulary (with a contrary word now and then), so a small model learns to
tell them apart; the files, names, ratings, bag-of-words files and HTML line
breaks are those of the real data set (:func:`write_imdb`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rocm_dl_guide.core import fixture_formats

_POSITIVE = (
    "wonderful brilliant excellent superb moving delightful masterful charming gripping "
    "beautiful touching hilarious memorable outstanding enjoyable stunning clever warm "
    "heartfelt fantastic great"
).split()
_NEGATIVE = (
    "terrible awful boring dreadful dull tedious clumsy wooden pointless forgettable "
    "painful disappointing lazy messy annoying bland predictable shallow stupid horrible"
).split()
_NOUNS = (
    "film movie plot acting cast script director soundtrack ending story dialogue pacing "
    "cinematography score lead performance editing premise finale"
).split()
_NAMES = "Anna Marcus Julia Omar Elena Victor Priya Tom Sofia Kenji".split()
_ROLES = "detective mother soldier teacher villain pilot doctor thief".split()
_FILLER = (
    "I watched this on a rainy Sunday afternoon.",
    "My friends recommended it to me last week.",
    "It runs a little under two hours.",
    "The trailer gives a fair idea of what to expect.",
    "I saw it twice, once in the cinema and once at home.",
    "It is based on a novel I have not read.",
)


def _review(rng: np.random.Generator, positive: bool) -> str:
    own, other = (_POSITIVE, _NEGATIVE) if positive else (_NEGATIVE, _POSITIVE)

    def adj() -> str:
        # Mostly the review's own sentiment, sometimes a contrary word: learnable, not trivial.
        pool = own if rng.random() < 0.85 else other
        return str(pool[rng.integers(len(pool))])

    def pick(seq: tuple | list) -> str:
        return str(seq[rng.integers(len(seq))])

    patterns = (
        lambda: f"The {pick(_NOUNS)} was {adj()}.",
        lambda: f"I found the {pick(_NOUNS)} {adj()} and {adj()}.",
        lambda: f"{pick(_NAMES)} gives a {adj()} performance as the {pick(_ROLES)}.",
        lambda: f"Honestly, this {pick(('film', 'movie'))} is {adj()}.",
        lambda: f"What a {adj()} {pick(_NOUNS)}!",
        lambda: f"The {pick(_NOUNS)} felt {adj()}, and the {pick(_NOUNS)} was {adj()}.",
        lambda: pick(_FILLER),
    )
    paragraphs = []
    for _ in range(int(rng.integers(1, 4))):
        sentences = [patterns[rng.integers(len(patterns))]() for _ in range(rng.integers(2, 6))]
        paragraphs.append(" ".join(sentences))
    # The real reviews separate paragraphs with literal HTML line breaks.
    return "<br /><br />".join(paragraphs)


def _tokens(text: str) -> list[str]:
    cleaned = text.replace("<br />", " ").lower()
    for ch in ".,!?":
        cleaned = cleaned.replace(ch, " ")
    return cleaned.split()


def write_imdb(
    dest: Path,
    seed: int = 0,
    n_train: int = 250,
    n_test: int = 250,
    n_unsup: int = 100,
) -> Path:
    """IMDB fixture: ``dest/aclImdb/`` as in ``aclImdb_v1.tar.gz``.

    ``n_train`` / ``n_test`` reviews *per class*: ``{train,test}/{pos,neg}/<id>_<rating>.txt``
    (ratings 7-10 positive, 1-4 negative) and ``n_unsup`` unlabelled
    ``train/unsup/<id>_0.txt``; plus ``imdb.vocab``, ``imdbEr.txt``, ``README``,
    ``urls_*.txt`` and the ``labeledBow.feat`` / ``unsupBow.feat`` bag-of-words
    files. Positive and negative reviews draw on different sentiment words, and
    paragraphs are joined by ``<br /><br />`` exactly like the real reviews.
    Returns ``dest``.
    """
    dest = Path(dest)
    root = dest / "aclImdb"
    reviews: dict[tuple[str, str], list[tuple[str, int]]] = {}
    agreement = fixture_formats.LABEL_AGREEMENT["imdb"]
    for split, n in (("train", n_train), ("test", n_test)):
        rng = fixture_formats.rng(seed, f"imdb-{split}")
        stream = fixture_formats.rng(seed, f"imdb-{split}-labels")
        for label in ("pos", "neg"):
            ratings = rng.integers(7, 11, n) if label == "pos" else rng.integers(1, 5, n)
            # a review written in the other class's words, where the label moved
            flips = fixture_formats.moved(stream, len(ratings), agreement)
            tone = [(label == "pos") != bool(flip) for flip in flips]
            reviews[(split, label)] = [
                (_review(rng, positive), int(r)) for positive, r in zip(tone, ratings, strict=True)
            ]
    rng = fixture_formats.rng(seed, "imdb-unsup")
    reviews[("train", "unsup")] = [
        (_review(rng, bool(rng.random() < 0.5)), 0) for _ in range(n_unsup)
    ]

    vocab: dict[str, int] = {}
    for items in reviews.values():
        for text, _ in items:
            for tok in _tokens(text):
                vocab.setdefault(tok, len(vocab))

    score_sum = np.zeros(len(vocab))
    score_n = np.zeros(len(vocab))
    for (split, label), items in reviews.items():
        folder = root / split / label
        folder.mkdir(parents=True, exist_ok=True)
        bow_lines, url_lines = [], []
        for idx, (text, rating) in enumerate(items):
            (folder / f"{idx}_{rating}.txt").write_text(text, encoding="utf-8")
            counts: dict[int, int] = {}
            for tok in _tokens(text):
                counts[vocab[tok]] = counts.get(vocab[tok], 0) + 1
                if label != "unsup":
                    score_sum[vocab[tok]] += rating
                    score_n[vocab[tok]] += 1
            feats = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
            bow_lines.append(f"{rating} {feats}")
            url_lines.append(f"http://www.imdb.com/title/tt{1000000 + idx:07d}/usercomments")
        (root / split / f"urls_{label}.txt").write_text("\n".join(url_lines) + "\n")
        bow = root / split / ("unsupBow.feat" if label == "unsup" else "labeledBow.feat")
        with bow.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(bow_lines) + "\n")

    (root / "imdb.vocab").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    expected = np.where(score_n > 0, score_sum / np.maximum(score_n, 1) - 5.5, 0.0)
    (root / "imdbEr.txt").write_text("\n".join(f"{v:.6f}" for v in expected) + "\n")
    (root / "README").write_text(
        "Large Movie Review Dataset layout (aclImdb), GENERATED FIXTURE.\n\n"
        "Written by rocm_dl_guide.core.fixtures for offline runs: the same directory layout,\n"
        "file names (<id>_<rating>.txt) and HTML line breaks as the real data set, but\n"
        "the reviews are synthetic sentences. It is not the real IMDB data; see\n"
        "http://ai.stanford.edu/~amaas/data/sentiment/ for the original.\n"
    )
    return dest
