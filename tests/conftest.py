import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
BIN = Path(sys.executable).parent

# Quiet TensorFlow's C++ logging in child processes started by tests.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="module")
def isolated_data_cache(tmp_path_factory):
    """A data cache (``ROCM_DL_GUIDE_DATA``) of the test module's own, for tests
    that change the prepared data (e.g. IMDB's removal of the unlabelled folder)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROCM_DL_GUIDE_DATA", str(tmp_path_factory.getbasetemp() / "data"))
        yield


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


# --------------------------------------------------------------------------- the book


def toc_files() -> list[str]:
    """Every page in ``_toc.yml``, in reading order (without the ``.md``)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def source(page: str) -> Path:
    return ROOT / f"{page}.md"


def is_executable(page: str) -> bool:
    return "```{code-cell}" in source(page).read_text()


@dataclass
class Build:
    code: int
    log: str
    seconds: float

    @property
    def executed(self) -> list[str]:
        """Pages this build executed (not taken from the cache)."""
        return [
            line.split(":")[0] for line in self.log.splitlines() if "Executing notebook" in line
        ]


def build_book(root: Path = ROOT, timeout: int = 3600, env: dict | None = None) -> Build:
    """``jupyter-book build`` as ``make book`` runs it; returns exit code, log and time."""
    start = time.monotonic()
    proc = subprocess.run(
        [tool("jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return Build(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


@pytest.fixture(scope="session")
def build() -> Build:
    """One build of the whole book, shared by every test that reads the site."""
    result = build_book()
    print(
        f"book build: exit {result.code} in {result.seconds:.0f} s, "
        f"{len(result.executed)} pages executed"
    )
    return result
