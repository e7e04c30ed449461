"""The training chapter's TensorFlow text case study: sentiment of IMDB movie reviews.

The reviews are plain text files in the layout of the ``aclImdb`` archive
(``train/{pos,neg,unsup}``, ``test/{pos,neg}``), prepared by the data layer:
the real archive, or the offline fixture in the same layout. The steps, each a
function here, follow the guide:

1. :func:`remove_unlabeled` deletes ``train/unsup`` (safe to run again);
2. :func:`load_datasets` reads the folders with
   ``keras.utils.text_dataset_from_directory``: an 80/20 training/validation
   split of ``train`` with a fixed seed, and the test set;
3. :func:`custom_standardization` lower-cases, replaces the reviews' HTML line
   breaks (``<br />``) by spaces and strips punctuation; :func:`make_vectorizer`
   builds a ``TextVectorization`` layer with it (10,000 tokens, sequences of
   250) and adapts it to the training text;
4. :func:`build_model`: embedding (16), dropout, average pooling, dropout, one
   logit; :func:`compile_model`: Adam, binary cross-entropy on logits, binary
   accuracy at threshold 0;
5. :func:`export_model` puts the vectorizer in front and a sigmoid behind, so
   the exported model reads raw strings; :func:`predict` takes a plain list.

``python -m rocm_dl_guide train imdb`` runs :func:`train`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import string
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocm_dl_guide.core import datasets, profiles
from rocm_dl_guide.core.messages import count

# The guide's hyperparameters.
MAX_FEATURES = 10000
"""Vocabulary size of the ``TextVectorization`` layer (tokens kept, most frequent first)."""
SEQUENCE_LENGTH = 250
"""Every review is padded or truncated to this many tokens."""
EMBEDDING_DIM = 16
DROPOUT = 0.2
BATCH_SIZE = 32
SEED = 42
"""Seeds the training/validation split (and the weights)."""
VALIDATION_SPLIT = 0.2
FULL_EPOCHS = 10
RECIPE = {
    "case study": "IMDB sentiment (Keras)",
    "optimizer": "Adam (Keras default rate)",
    "batch size": BATCH_SIZE,
    "learning rate": 0.001,
    "momentum": None,
    "weight decay": None,
    "schedule": "constant",
    "epochs": FULL_EPOCHS,
    "input": f"{SEQUENCE_LENGTH} tokens, vocabulary {MAX_FEATURES}",
}
"""The ``full`` profile's settings, which are the guide's (Adam at Keras's default rate)."""

HTML_LINE_BREAK = "<br />"
"""How the reviews of the archive break lines: with a space before the slash."""
FIXTURE_REPEATS = 30
"""Passes over the fixture's training reviews per epoch (real data: one pass).

The fixture holds 400 training reviews, 13 batches of 32, against 625 batches
of the real training split: with one pass an epoch is too short for the
guide's model to move away from chance in the smoke profile's few epochs.
Ten passes left it at 61% test accuracy with every probability near one half;
thirty reach about 82%, near the 86% that the fixture's labels allow
(2026-11-28), in about 15 s on two cores.
"""
EXAMPLES = ("The movie was great!", "The movie was okay.", "The movie was terrible...")
"""The guide's new sentences for the exported model."""


def _tf():
    from rocm_dl_guide.core.device import import_tensorflow

    return import_tensorflow()


def _keras():
    _tf()
    import keras

    return keras


# --------------------------------------------------------------------------- the files


def data_folder(profile: profiles.Profile) -> tuple[datasets.PreparedData, Path]:
    """``(prepared, dataset_dir)``: the data layer's IMDB and its ``aclImdb`` folder."""
    prepared = datasets.prepare("imdb", profile)
    return prepared, prepared.root / "aclImdb"


def sample_review(dataset_dir: Path) -> tuple[Path, str]:
    """A positive training review: ``pos/1181_9.txt`` as in the guide when it exists
    (the real archive), else the first review of ``pos`` with an HTML line break, else
    the first review of ``pos``. Returns ``(path, text)``."""
    pos = Path(dataset_dir) / "train" / "pos"
    guide = pos / "1181_9.txt"
    if guide.is_file():
        return guide, guide.read_text(encoding="utf-8")
    files = sorted(pos.glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"{pos} holds no reviews")
    for path in files:
        text = path.read_text(encoding="utf-8")
        if HTML_LINE_BREAK in text:
            return path, text
    return files[0], files[0].read_text(encoding="utf-8")


def remove_unlabeled(dataset_dir: Path) -> bool:
    """Delete ``train/unsup``, the unlabelled reviews, so that the folders of ``train``
    are exactly the two classes. Returns whether it removed anything now.

    Safe to run again (then it does nothing) and from two processes at once:
    the folder is first renamed, atomically, and only then deleted.
    """
    train_dir = Path(dataset_dir) / "train"
    unsup = train_dir / "unsup"
    removed = False
    if unsup.is_dir():
        doomed = train_dir / f".unsup-removing-{uuid.uuid4().hex}"
        try:
            os.rename(unsup, doomed)
            removed = True
        except FileNotFoundError:  # another process got there first
            pass
    # Text loaders skip dot-folders; delete them anyway, including any an interrupted
    # run left behind.
    for leftover in train_dir.glob(".unsup-removing-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    return removed


@dataclass
class RawDatasets:
    """The three ``tf.data`` datasets of (review text, label) batches."""

    train: object
    val: object
    test: object

    @property
    def class_names(self) -> list[str]:
        """Label ``i`` is ``class_names[i]``: the folder names in alphabetical order."""
        return list(self.train.class_names)

    def table(self):
        """Reviews per set and class (reads every review once)."""
        import pandas as pd

        rows = {}
        for name in ("train", "val", "test"):
            labels = np.concatenate([y.numpy() for _, y in getattr(self, name)])
            counts = np.bincount(labels.astype(int), minlength=len(self.class_names))
            rows[name] = dict(zip(self.class_names, counts.tolist(), strict=True))
            rows[name]["total"] = int(counts.sum())
        return pd.DataFrame.from_dict(rows, orient="index")


def load_datasets(
    dataset_dir: Path, batch_size: int = BATCH_SIZE, seed: int = SEED, verbose: bool = True
) -> RawDatasets:
    """Training and validation sets (an 80/20 split of ``train``, fixed by ``seed``)
    and the test set, as batches of raw review strings with 0/1 labels.

    Removes ``train/unsup`` first (:func:`remove_unlabeled`), else the loader
    would take it for a third class. ``verbose``: Keras prints how many files
    it found and how many each subset uses.
    """
    keras = _keras()
    dataset_dir = Path(dataset_dir)
    remove_unlabeled(dataset_dir)
    common = {"batch_size": batch_size, "verbose": verbose}
    split = {"validation_split": VALIDATION_SPLIT, "seed": seed, **common}
    # Keras prints the "Using N files for ..." lines whatever ``verbose`` says.
    quiet = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())
    with quiet:
        train = keras.utils.text_dataset_from_directory(
            dataset_dir / "train", subset="training", **split
        )
        val = keras.utils.text_dataset_from_directory(
            dataset_dir / "train", subset="validation", **split
        )
        test = keras.utils.text_dataset_from_directory(dataset_dir / "test", **common)
    if list(train.class_names) != ["neg", "pos"]:
        raise ValueError(
            f"{dataset_dir / 'train'}: expected the classes ['neg', 'pos'], found "
            f"{list(train.class_names)}"
        )
    return RawDatasets(train=train, val=val, test=test)


# --------------------------------------------------------------------------- text to numbers


_PUNCTUATION = f"[{re.escape(string.punctuation)}]"


def custom_standardization(input_data, line_break: str = HTML_LINE_BREAK):
    """Lower-case, replace ``line_break`` (a regular expression) by a space, delete
    ASCII punctuation.

    Works on a string tensor of any shape; this is the ``standardize`` of the
    ``TextVectorization`` layer. ``line_break`` must be the markup the data
    really holds, ``<br />``: a pattern that does not match leaves the tags in,
    and stripping punctuation then turns every one of them into a word ``br``.
    """
    tf = _tf()
    lowercase = tf.strings.lower(input_data)
    without_breaks = tf.strings.regex_replace(lowercase, line_break, " ")
    return tf.strings.regex_replace(without_breaks, _PUNCTUATION, "")


def standardize(text: str, line_break: str = HTML_LINE_BREAK) -> str:
    """:func:`custom_standardization` of one Python string, as a Python string."""
    tf = _tf()
    out = custom_standardization(tf.constant(text), line_break=line_break)
    return out.numpy().decode("utf-8")


def make_vectorizer(raw_train, max_tokens: int = MAX_FEATURES, length: int = SEQUENCE_LENGTH):
    """A ``TextVectorization`` layer (integer token ids, ``length`` per review) whose
    vocabulary is adapted to the training text of ``raw_train``."""
    keras = _keras()
    layer = keras.layers.TextVectorization(
        standardize=custom_standardization,
        max_tokens=max_tokens,
        output_mode="int",
        output_sequence_length=length,
    )
    layer.adapt(raw_train.map(lambda text, label: text))
    return layer


def token_table(vectorize_layer, text: str, n: int = 12):
    """The first ``n`` token ids of ``text`` and the vocabulary entry of each."""
    import pandas as pd

    tf = _tf()
    ids = vectorize_layer(tf.constant([text])).numpy()[0][:n]
    vocabulary = vectorize_layer.get_vocabulary()
    return pd.DataFrame({"token id": ids, "token": [vocabulary[i] for i in ids]})


def vectorize_datasets(vectorize_layer, raw: RawDatasets, repeats: int = 1):
    """``(train, val, test)``: ``raw`` with the text turned into token ids, cached in
    memory and prefetched. ``repeats`` passes over the training set per epoch."""
    tf = _tf()

    def vectorize_text(text, label):
        return vectorize_layer(tf.expand_dims(text, -1)), label

    def ready(ds):
        return ds.map(vectorize_text).cache()

    train = ready(raw.train)
    if repeats > 1:
        train = train.repeat(repeats)
    autotune = tf.data.AUTOTUNE
    return tuple(ds.prefetch(autotune) for ds in (train, ready(raw.val), ready(raw.test)))


# --------------------------------------------------------------------------- model


def build_model(max_tokens: int = MAX_FEATURES, length: int = SEQUENCE_LENGTH):
    """Embedding, dropout, average over the review, dropout, one logit (positive > 0)."""
    keras = _keras()
    layers = keras.layers
    return keras.Sequential(
        [
            keras.Input(shape=(length,), dtype="int64"),
            layers.Embedding(max_tokens + 1, EMBEDDING_DIM),
            layers.Dropout(DROPOUT),
            layers.GlobalAveragePooling1D(),
            layers.Dropout(DROPOUT),
            layers.Dense(1),
        ],
        name="imdb_sentiment",
    )


def compile_model(model):
    """Adam, binary cross-entropy on the logit, accuracy of the logit's sign."""
    keras = _keras()
    model.compile(
        optimizer="adam",
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(threshold=0.0)],
    )
    return model


def plot_history(result, title: str | None = None):
    """Training and validation loss and accuracy per epoch; returns the Figure."""
    from rocm_dl_guide.core.plots import plot_history as draw

    return draw(result.history, accuracy=("binary_accuracy", "val_binary_accuracy"), title=title)


def export_model(vectorize_layer, model):
    """A model of raw review strings: vectorizer, ``model``, sigmoid (a probability).

    Compiled for evaluation on the raw test set (cross-entropy on probabilities,
    accuracy at 0.5). Call it with a string tensor, or use :func:`predict`.
    """
    keras = _keras()
    exported = keras.Sequential(
        [
            keras.Input(shape=(), dtype="string"),
            vectorize_layer,
            model,
            keras.layers.Activation("sigmoid"),
        ],
        name="imdb_sentiment_export",
    )
    exported.compile(
        optimizer="adam",
        loss=keras.losses.BinaryCrossentropy(from_logits=False),
        metrics=["accuracy"],
    )
    return exported


def predict(exported, texts: Sequence[str]) -> np.ndarray:
    """The probability that each text in ``texts`` (a list of strings) is positive."""
    tf = _tf()
    if isinstance(texts, str):
        texts = [texts]
    batch = tf.constant(list(texts), dtype=tf.string)
    return np.asarray(exported.predict(batch, verbose=0)).reshape(-1)


PAIRS = ("A wonderful, moving film.", "A dull and tedious film.")
"""A positive and a negative sentence, in words the fixture's reviews use too."""


def predictions_note(probabilities: Sequence[float], real: bool) -> str:
    """What the probabilities of :data:`EXAMPLES` then :data:`PAIRS` show, in
    sentences that hold for these figures: whether each is ranked in order
    (great, okay, terrible; the positive pair sentence above the negative), and
    where they all stay near one half, why."""
    p = [float(v) for v in probabilities]
    if len(p) != len(EXAMPLES) + len(PAIRS):
        raise ValueError(f"{len(p)} probabilities for {len(EXAMPLES) + len(PAIRS)} sentences")
    intro = (
        "The last two are plain examples of a positive and a negative review."
        if real
        else "The last two use words that the fixture's reviews use too."
    )
    ordered = p[0] > p[1] > p[2] and p[3] > p[4]
    if ordered:
        text = (
            f"{intro} The model ranks every sentence in order: great above okay above "
            "terrible, and the positive example above the negative one."
        )
    else:
        text = f"{intro} The model does not rank all of them in order, as the table shows."
    if all(abs(v - 0.5) < 0.1 for v in p):
        text += (
            " Yet every probability stays near one half. The model averages over a "
            "sentence's words, and in a sentence of five words most carry no opinion."
        )
    return text


# --------------------------------------------------------------------------- the case study


def repeats_for(data: datasets.PreparedData) -> int:
    """Passes over the training reviews per epoch: :data:`FIXTURE_REPEATS` on the fixture."""
    return FIXTURE_REPEATS if data.kind == "fixture" else 1


def epochs_for(profile: profiles.Profile, override: int | None = None) -> int:
    """The number of epochs: ``override``, else the guide's 10 capped by the profile."""
    return profile.epochs(FULL_EPOCHS, override, example="imdb")


@dataclass
class ImdbRun:
    """What :func:`train` returns."""

    test_accuracy: float
    test_loss: float
    export_accuracy: float
    """Accuracy of the exported model on the raw test reviews."""
    epochs: int
    device: str
    profile: str
    data: datasets.PreparedData
    result: object
    """The :class:`rocm_dl_guide.training.keras_train.KerasResult` of the training run."""
    model: object
    exported: object
    """:func:`export_model`: raw strings in, probabilities out."""
    vectorize_layer: object

    def summary(self) -> str:
        return (
            f"Keras IMDB sentiment: test accuracy {100 * self.test_accuracy:.1f}% "
            f"(loss {self.test_loss:.3f}) after {count(self.epochs, 'epoch')} on {self.device}; "
            f"profile {self.profile}; data: {self.data.note}"
        )

    def plot(self):
        return plot_history(self.result, title=f"IMDB sentiment ({self.data.kind} data)")


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    progress: bool = True,
    seed: int = SEED,
) -> ImdbRun:
    """The whole case study: prepare, split, vectorize, train, evaluate, export."""
    from rocm_dl_guide.training import keras_train

    n_epochs = profile.epochs(FULL_EPOCHS, epochs, example="imdb")
    data, dataset_dir = data_folder(profile)
    raw = load_datasets(dataset_dir, seed=seed, verbose=False)
    vectorize_layer = make_vectorizer(raw.train)
    train_ds, val_ds, test_ds = vectorize_datasets(vectorize_layer, raw, repeats_for(data))
    keras = _keras()
    keras.utils.set_random_seed(seed)
    model = compile_model(build_model())
    result = keras_train.fit_keras(
        model,
        train_ds,
        epochs=n_epochs,
        validation_data=val_ds,
        progress=progress,
        seed=seed,
        log=None,
    )
    test_loss, test_acc = model.evaluate(test_ds, verbose=0)
    exported = export_model(vectorize_layer, model)
    _, export_acc = exported.evaluate(raw.test, verbose=0)
    return ImdbRun(
        test_accuracy=float(test_acc),
        test_loss=float(test_loss),
        export_accuracy=float(export_acc),
        epochs=n_epochs,
        device=result.device,
        profile=profile.name,
        data=data,
        result=result,
        model=model,
        exported=exported,
        vectorize_layer=vectorize_layer,
    )
