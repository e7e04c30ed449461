import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# Quiet TensorFlow's C++ logging in child processes started by tests.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture
def root() -> Path:
    return ROOT


def tool(name: str) -> str:
    """An executable from this environment's bin directory."""
    candidate = BIN / name
    if candidate.exists():
        return str(candidate)
    import shutil

    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed in this environment")
    return found
