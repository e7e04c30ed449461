"""The full profile's hyperparameters are the guide's, and the overview table shows them.

The expected values below were read from the guide's text
(``shared/seeds/000_1adfbdfecaaddc6e.txt``, line numbers in the comments) and,
for MNIST, from the defaults of PyTorch's ``examples/mnist/main.py``, which the
guide runs (seed line 371).
"""

from __future__ import annotations

import inspect

import pytest

from rocm_dl_guide.casestudies import cifar10, imdb, inception, recipes
from rocm_dl_guide.core import casestudies, profiles

GUIDE = {
    "inception-v3": {
        "batch size": 32,  # 679
        "learning rate": 0.1,  # 687
        "momentum": 0.9,  # 689
        "weight decay": 1e-4,  # 691
        "schedule": "StepLR: x0.1 every 30 epochs",  # 693-695: lr_step_size 30, lr_gamma 0.1
        "epochs": 90,  # 699
        "input": "train crop 299; val resize 342, crop 299",  # 659, 667-669
        "optimizer": "SGD",  # 811
    },
    "cifar10": {
        "batch size": 4,  # 942
        "learning rate": 0.001,  # 1054
        "momentum": 0.9,  # 1054
        "epochs": 2,  # 1058: range(2)
        "optimizer": "SGD",
    },
    "fashion-mnist": {"epochs": 10, "batch size": 32},  # 1291 fit(epochs=10), Keras default batch
    "imdb": {
        "batch size": 32,  # 1457
        "epochs": 10,  # 1568
        "input": "250 tokens, vocabulary 10000",  # 1494-1496
    },
    "mnist-pytorch": {
        "batch size": 64,
        "learning rate": 1.0,
        "schedule": "StepLR: x0.7 every epoch",
        "epochs": 14,
        "optimizer": "Adadelta",
    },
}


@pytest.mark.parametrize("name", sorted(GUIDE))
def test_full_profile_settings_are_the_guides(name):
    recipe = recipes.recipe(name)
    for key, value in GUIDE[name].items():
        assert recipe[key] == value, (name, key)


def test_the_full_profile_does_not_cap_what_the_recipe_says():
    full = profiles.current("full")
    assert full.epochs(inception.FULL_EPOCHS) == 90
    assert full.max_train_batches is None and full.image_size is None


def test_the_training_functions_use_the_recipe():
    """The defaults the code trains with are the constants the table shows."""
    assert inception.default_batch(profiles.current("full")) == 32
    assert inspect.signature(cifar10.load).parameters["batch_size"].default == 4
    assert imdb.SEQUENCE_LENGTH == 250 and imdb.MAX_FEATURES == 10000


def test_the_table_has_a_row_per_case_study_and_every_column():
    frame = recipes.table()
    assert list(frame["command"]) == list(recipes.names())
    # the post-training runs show their recipes on their own pages
    assert set(recipes.names()) == set(casestudies.REGISTRY) - {"mnist-tensorflow", "dpo", "grpo"}
    assert list(frame.columns) == ["command", *recipes.COLUMNS]
    row = frame.set_index("command").loc["cifar10"]
    assert row["batch size"] == 4 and row["weight decay"] == "-"
    assert row["learning rate"] == "0.001"  # as a recipe writes it, not 0.001000
    assert frame.set_index("command").loc["mnist-pytorch", "learning rate"] == "1"
    with pytest.raises(ValueError, match="unknown case study"):
        recipes.recipe("resnet")
