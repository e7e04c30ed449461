import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
BIN = Path(sys.executable).parent

# Quiet TensorFlow's C++ logging in child processes started by tests.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


# --------------------------------------------------------------------------- isolation
#
# The tests never write into the user's home or the repository: every cache and
# output directory the package, the frameworks and Jupyter would put under ``~``
# points into one folder for the whole session, ``session/`` in pytest's
# temporary directory (pruned by pytest like every basetemp; removed at the end
# of a session that finishes). Under pytest-xdist each worker is a session of
# its own, with its own folder. pytest_configure sets it in os.environ, before
# any test module is imported (and with it the package, Keras or matplotlib,
# which read some of these once), so that child processes (command-line tests,
# Jupyter kernels, the book build) inherit it.
#
# Tests share the one data cache, so each offline fixture is generated once per
# session. A test that needs an empty cache, or data nobody else has changed,
# takes ``private_data_cache``: the shared cache's IMDB, for one, may have lost
# ``train/unsup``, which ``imdb.train`` (and the book's IMDB page) removes.

ISOLATED_DIRS = {
    "ROCM_DL_GUIDE_DATA": "data",  # datasets.cache_dir()
    "ROCM_DL_GUIDE_RUNS": "runs",  # train.runs_dir()
    "TORCH_HOME": "torch",  # torch.hub weights (Inception v3, ...)
    "KERAS_HOME": "keras",  # keras.json, keras.datasets downloads
    "MPLCONFIGDIR": "matplotlib",  # matplotlib's config and font cache
    "IPYTHONDIR": "ipython",  # kernels' IPython profile and history
    "JUPYTER_CONFIG_DIR": "jupyter/config",
    "JUPYTER_DATA_DIR": "jupyter/data",
    "JUPYTER_RUNTIME_DIR": "jupyter/runtime",  # kernel connection files
    "XDG_CACHE_HOME": "cache",  # pooch's default cache, pip, zizmor, ...
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "share",
}
SESSION_DIR: Path | None = None  # set by pytest_configure


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has made its factory
def pytest_configure(config):
    global SESSION_DIR, _CONFIG
    _CONFIG = config
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        SESSION_DIR = factory.getbasetemp() / "session"
        SESSION_DIR.mkdir()
    else:  # pragma: no cover - a pytest without the attribute
        SESSION_DIR = Path(tempfile.mkdtemp(prefix="rocm-dl-guide-tests-"))
    for name, sub in ISOLATED_DIRS.items():
        path = SESSION_DIR / sub
        path.mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(path)
    share_the_cores()
    measure_the_machine()
    choose_the_triton_engine()


def share_the_cores() -> None:
    """Under pytest-xdist, give each worker its share of the CPU threads.

    Every worker's PyTorch (and the OpenMP and BLAS libraries under it and
    NumPy) would otherwise start a thread per core, so two workers run four busy
    threads on two cores; OpenMP threads wait for each other by spinning, and a
    test that took 10 s alone took 240 s so. Set before any test module imports
    a framework; processes that tests start inherit it, and the book build gives
    no page more than the share (``GUIDE_BUILD_MAX_THREADS``,
    :mod:`guide_build.parallel`): a timed page given both threads next to a
    busy worker took 4 to 7 times as long."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1 and "PYTEST_XDIST_WORKER" in os.environ:
        share = str(cpu_share(workers))
        os.environ["OMP_NUM_THREADS"] = share
        os.environ["GUIDE_BUILD_MAX_THREADS"] = share  # the book build's pages too


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset -c 0`` leaves one,
    where ``os.cpu_count()`` still counts the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def cpu_share(workers: int) -> int:
    """The threads each of ``workers`` test processes gets: an equal share of the
    usable CPUs, at least one."""
    return max(1, usable_cpus() // max(1, workers))


# --------------------------------------------------------------------------- time limits
#
# A time limit catches a hang; it does not measure speed. Every limit a test
# declares (the suite's 60 s in pyproject.toml, a @pytest.mark.timeout(N), the
# marks added below for the book build and the shared tiny-lm run, the
# ``timeout`` of the subprocess helpers here) is its *budget*: about what it may
# take on the reference machine. Its hard limit is the budget times
# HANG_MARGIN times the machine-speed factor (:func:`hang_limit`), so that it
# holds on a machine three times slower than the reference one, and on a slower
# one still by the factor measured at the start of the session. A test that
# waits for something itself (``time.monotonic() - start < N``, a polling
# deadline, a subprocess's ``timeout=``) uses :func:`hang_limit` too: one
# number rules them all. The slowest tests (``--durations`` in pyproject.toml)
# are how the budgets are watched.

HANG_MARGIN = 3
"""A hard limit is this many times a test's budget (times the speed factor)."""

REFERENCE_CPU = (
    "Intel Xeon, family 6 model 207 (Emerald Rapids; /proc/cpuinfo names it "
    "'Intel(R) Xeon(R) Processor'), 2 vCPUs, AVX-512 with VNNI, BF16 and FP16"
)
REFERENCE_SECONDS = 0.21
"""What :data:`SPEED_WORKLOAD` takes on :data:`REFERENCE_CPU`, idle, the way the
session measures it for ``make test`` (two copies at once, one per CPU, wall
time): the median of nine measurements on an idle machine (0.18 to 0.24 s; load
average under 1). The earlier 0.15 s was the CPU time measured while other jobs
ran, which made the factor on this very machine 1.2 to 1.5."""

SPEED_FACTOR_VARIABLE = "GUIDE_TEST_SPEED_FACTOR"
"""The session's speed factor, set by the process that measured it so that the
pytest-xdist workers it starts use the same; set it yourself to skip the
measurement (it is never below 1)."""
SPEED_SECONDS_VARIABLE = "GUIDE_TEST_SPEED_SECONDS"
"""The measured time of the reference workload, for the header."""

SPEED_WORKLOAD = """
import os, sys, time
import numpy as np

if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")})

def once():
    start = time.perf_counter()
    total = 0
    for i in range(1_500_000):  # the interpreter: most of what the tests spend
        total += i * i % 7
    a = np.linspace(-1.0, 1.0, 256 * 256, dtype=np.float32).reshape(256, 256)
    b = a
    for _ in range(200):  # float32 matrix products (the BLAS the CPU gets)
        b = np.tanh(a @ b)
    return time.perf_counter() - start

print("ready", flush=True)
sys.stdin.readline()  # all copies start together
print(sorted(once() for _ in range(3))[1], flush=True)
"""
"""The fixed reference workload: a pure-Python loop and a fixed number of
256x256 float32 matrix products in NumPy, on one thread (a multi-threaded BLAS
on so small a product measures how its threads wait for each other on a busy
machine, not the machine: two threads took 5 s where one took 0.2).
It runs in fresh interpreters (NumPy only: no framework import, half a second
in all), one copy per test process, all started together, each on its own share
of the usable CPUs, so it sees what a test sees: the CPU's speed, the
instruction set the BLAS may use (``OPENBLAS_CORETYPE``), and how many test
processes share a CPU (two workers under ``taskset -c 0`` share one)."""

_SPEED: dict = {}  # factor, seconds, copies, how: set once per process


def measure_speed(copies: int = 1) -> float:
    """Seconds the reference workload takes: ``copies`` copies at once, one thread
    and one usable CPU each (in turn: two copies on one CPU share it); the slowest
    copy's median of three runs."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cpus = _usable_cpu_list()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SPEED_WORKLOAD, ",".join(map(str, share))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for share in _shares(cpus, copies)
    ]
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("the reference workload did not start")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return max(float(proc.communicate(timeout=300)[0]) for proc in procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _usable_cpu_list() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def _shares(cpus: list[int], copies: int) -> list[list[int]]:
    """The CPU of each copy: the usable ones in turn, from the start again where
    there are fewer CPUs than copies (which then share them, as the workers would)."""
    return [[cpus[i % len(cpus)]] for i in range(copies)]


def measure_the_machine() -> None:
    """The session's speed factor: ``max(1, measured / REFERENCE_SECONDS)``, measured
    once, by the process pytest started (under pytest-xdist, before it starts the
    workers: one copy of the workload per worker), and handed to the workers and
    everything the tests start through :data:`SPEED_FACTOR_VARIABLE`."""
    given = os.environ.get(SPEED_FACTOR_VARIABLE, "").strip()
    if given:
        try:
            factor = float(given)
        except ValueError:
            factor = math.nan
        if not math.isfinite(factor) or factor <= 0:
            raise pytest.UsageError(
                f"{SPEED_FACTOR_VARIABLE} must be a positive number, not {given!r}"
            )
        seconds = os.environ.get(SPEED_SECONDS_VARIABLE)
        factor = max(1.0, factor)
        os.environ[SPEED_FACTOR_VARIABLE] = f"{factor:.3f}"
        _SPEED.update(
            factor=factor,
            seconds=float(seconds) if seconds else None,
            how="measured" if seconds else f"given by {SPEED_FACTOR_VARIABLE}",
        )
        return
    # Under pytest-xdist the workers find the factor in the environment; a worker
    # that does not (started some other way) measures one copy for itself.
    copies = 1 if "PYTEST_XDIST_WORKER" in os.environ else _planned_workers() or 1
    try:
        seconds = measure_speed(copies)
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
        _SPEED.update(factor=1.0, seconds=None, how=f"not measured ({exc}): taken as 1")
        os.environ[SPEED_FACTOR_VARIABLE] = "1"  # the workers too
        return
    factor = max(1.0, seconds / REFERENCE_SECONDS)
    _SPEED.update(factor=factor, seconds=seconds, how=f"measured, {copies} at once")
    os.environ[SPEED_FACTOR_VARIABLE] = f"{factor:.3f}"
    os.environ[SPEED_SECONDS_VARIABLE] = f"{seconds:.3f}"


_CONFIG = None  # the session's config, for _planned_workers


def _planned_workers() -> int:
    """How many pytest-xdist workers this session starts (0 without xdist)."""
    if _CONFIG is None:
        return 0
    n = getattr(_CONFIG.option, "numprocesses", None)
    return n if isinstance(n, int) and n > 0 else 0


def speed_factor() -> float:
    """The session's machine-speed factor (1 or more)."""
    if not _SPEED:
        measure_the_machine()
    return _SPEED["factor"]


def hang_limit(budget: float) -> float:
    """The hard limit for something whose budget is ``budget`` seconds here:
    ``budget`` x :data:`HANG_MARGIN` x :func:`speed_factor`."""
    return budget * HANG_MARGIN * speed_factor()


def pytest_report_header(config):
    """One line in the session's header: the factor, and what it was made of."""
    seconds = _SPEED.get("seconds") if _SPEED else None
    factor = speed_factor()
    took = f"took {seconds:.2f} s here" if seconds else "was not run here"
    return [
        f"time limits: each test's hard limit is its budget x {HANG_MARGIN} x {factor:.2f}, "
        f"the machine-speed factor ({_SPEED['how']}; the reference workload {took}, "
        f"{REFERENCE_SECONDS:.2f} s on the reference CPU, {REFERENCE_CPU})"
    ]


_SCALED = pytest.StashKey[float]()  # an item's budget, once its limit is scaled


def scale_time_limit(config, item) -> None:
    """Give ``item`` its hard limit: a new closest ``timeout`` mark (the one
    pytest-timeout reads) of :func:`hang_limit` of its budget, the closest
    mark's seconds or else the suite's default, its method kept. A budget of 0
    (no limit) stays 0."""
    if _SCALED in item.stash:
        return
    marker = item.get_closest_marker("timeout")
    kwargs: dict = {}
    if marker is None:
        budget = _default_timeout(config)
    else:
        budget = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        kwargs = {k: v for k, v in marker.kwargs.items() if k != "timeout"}
        if len(marker.args) > 1:
            kwargs.setdefault("method", marker.args[1])
    if not budget:
        return
    item.stash[_SCALED] = float(budget)
    item.user_properties.append((BUDGET_PROPERTY, float(budget)))  # for the summary
    item.add_marker(pytest.mark.timeout(hang_limit(float(budget)), **kwargs), append=False)


BUDGET_PROPERTY = "time budget (s)"


def over_budget(reports, factor: float) -> list[tuple[str, float, float]]:
    """``(test, seconds, budget)`` of each test whose setup, call and teardown
    together took longer than its budget x ``factor``, slowest first."""
    took: dict[str, float] = {}
    budgets: dict[str, float] = {}
    for report in reports:
        took[report.nodeid] = took.get(report.nodeid, 0.0) + getattr(report, "duration", 0.0)
        for name, value in getattr(report, "user_properties", ()):
            if name == BUDGET_PROPERTY:
                budgets[report.nodeid] = value
    over = [(n, took[n], b) for n, b in budgets.items() if took.get(n, 0.0) > b * factor]
    return sorted(over, key=lambda row: -row[1])


def _default_timeout(config) -> float | None:
    """pytest-timeout's own default for a test without a mark: ``--timeout``,
    ``$PYTEST_TIMEOUT`` or the ini file's ``timeout``."""
    try:
        import pytest_timeout
    except ImportError:  # pragma: no cover - the plugin is in requirements
        return None
    return pytest_timeout.get_env_settings(config).timeout


def budget_of(item) -> float | None:
    """The budget an item's hard limit was scaled from (``None``: no limit)."""
    return item.stash.get(_SCALED, None)


def choose_the_triton_engine() -> None:
    """Without a GPU, Triton's interpreter (``TRITON_INTERPRET=1``) for the kernels
    chapter's tests. ``rocm_dl_guide.kernels.engine`` chooses it too, but only a
    process that has not imported Triton yet can: test modules that import
    torchvision import it, through ``torch._dynamo``, before ``test_kernels`` runs.
    Importing PyTorch to ask for a GPU does not import Triton."""
    from rocm_dl_guide.core.device import gpu_available

    if "TRITON_INTERPRET" not in os.environ and not gpu_available():
        os.environ["TRITON_INTERPRET"] = "1"


def pytest_unconfigure(config):
    if SESSION_DIR is not None:
        shutil.rmtree(SESSION_DIR, ignore_errors=True)


# --------------------------------------------------------------------------- parallel runs
#
# `make test` and `make check` run the suite on every core (pytest-xdist, ``-n auto
# --dist loadgroup``). A group's tests run on one worker, in order:
# - every test that reads the book build (the ``build`` fixture, directly or through
#   another fixture) is in the group "book", so the book is built once, by one
#   worker, while the other workers run the rest;
# - a test that uses a module's (or class's) fixture is in the group of its
#   module, so that such a fixture (a training run, a torchrun job) is made once,
#   not once per worker;
# - every other test goes to whichever worker is free.
# Without xdist the marks change nothing.

BUILD_TIMEOUT = 1200
"""The budget of a test that reads the book build (its hard limit is
:func:`hang_limit` of it, 3600 s here): the build itself (the first such test
waits for it; about 6 minutes beside the other worker) is the one thing allowed
past the suite's 60 s."""


def _uses_a_shared_fixture(item) -> bool:
    """Whether the test uses a fixture made once per module, class or package."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True  # cannot tell: keep it with its module
    return any(
        d.scope in ("module", "class", "package")
        for name in item.fixturenames
        for d in info.name2fixturedefs.get(name, ())
    )


def _join_group(item, group: str, loadgroup: bool) -> None:
    """Put ``item`` in xdist's ``group``: the mark, and under ``--dist loadgroup``
    the ``@group`` suffix of its node id that the scheduler reads. pytest-xdist
    3.8 writes that suffix to ``item._nodeid``, which pytest 9 no longer reads
    (it keeps the id in ``item._id``), so every group would be scattered and the
    book built by each worker; the suffix is written here the way pytest 9 keeps it."""
    item.add_marker(pytest.mark.xdist_group(group))
    if loadgroup and "@" not in item.nodeid:
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    loadgroup = bool(config.getvalue("loadgroup")) if hasattr(config.option, "loadgroup") else False
    for item in items:
        if "build" in item.fixturenames:
            _join_group(item, "book", loadgroup)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))
        elif _uses_a_shared_fixture(item):
            _join_group(item, item.module.__name__, loadgroup)
        if "tiny_lm_run" in item.fixturenames and item.get_closest_marker("timeout") is None:
            # The first test to ask makes the shared tiny-lm run in its setup.
            item.add_marker(pytest.mark.timeout(SHARED_RUN_TIMEOUT))
        scale_time_limit(config, item)  # last: every mark above is a budget


@pytest.fixture(autouse=True, scope="session")
def no_system_data_copies() -> Iterator[None]:
    """In-process tests see no operating-system copy of a data set (Debian's
    dataset-fashion-mnist), so that the smoke profile's default is the fixture
    on every machine; tests of system copies name their own folders. Child
    processes and the book build see the machine as it is."""
    from rocm_dl_guide.core import datasets

    with pytest.MonkeyPatch.context() as patch:  # session-wide: before any module's fixtures
        patch.setattr(datasets, "SYSTEM_COPIES", {})
        yield


@pytest.fixture
def private_data_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data cache (``ROCM_DL_GUIDE_DATA``) of the test's own, instead of
    the session's shared one; for tests that need an empty cache or data that no
    other test has changed."""
    path = tmp_path / "data-cache"
    monkeypatch.setenv("ROCM_DL_GUIDE_DATA", str(path))
    return path


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


# --------------------------------------------------------------------------- the book


def toc_parents() -> dict[str, str | None]:
    """Every page in ``_toc.yml``, in reading order (without the ``.md``), with the
    page whose toctree holds it (the root's is ``None``; chapters hang from the root)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    parent: dict[str, str | None] = {toc["root"]: None}

    def walk(entries, above):
        for entry in entries or []:
            if "file" in entry:
                parent[entry["file"]] = above
            below = entry.get("file", above)
            walk(entry.get("sections"), below)
            walk(entry.get("chapters"), below)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), toc["root"])
    walk(toc.get("chapters"), toc["root"])
    return parent


def toc_files() -> list[str]:
    """Every page in ``_toc.yml``, in reading order (without the ``.md``)."""
    return list(toc_parents())


def source(page: str) -> Path:
    return ROOT / f"{page}.md"


def is_executable(page: str) -> bool:
    return "```{code-cell}" in source(page).read_text()


@dataclass
class Build:
    code: int
    log: str
    seconds: float
    clean: bool = False
    """Whether the build started without an execution cache (a fresh checkout)."""
    page_times: dict | None = None
    """The build's ``page-times.json`` (the session's book build only)."""

    @property
    def executed(self) -> list[str]:
        """Pages this build executed (not taken from the cache)."""
        return [
            line.split(":")[0] for line in self.log.splitlines() if "Executing notebook" in line
        ]


def build_book(root: Path = ROOT, timeout: float = BUILD_TIMEOUT, env: dict | None = None) -> Build:
    """``jupyter-book build`` as ``make book`` runs it; returns exit code, log and time.
    ``timeout`` is the build's budget: it is stopped after :func:`hang_limit` of it."""
    clean = not (root / ".jupyter_cache").exists()
    start = time.monotonic()
    proc = subprocess.run(
        [tool("jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=hang_limit(timeout),
        env=env,
    )
    return Build(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start, clean)


def run_root(tmp_path_factory) -> Path:
    """The folder every worker of this test run shares: pytest's base temporary
    folder, or its parent under pytest-xdist (each worker has a base of its own,
    ``popen-gwN``, inside the run's)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_artefact(tmp_path_factory, name: str, make) -> Path:
    """A folder ``name`` made once per test run by ``make(folder)``, whichever
    worker asks first; the others wait for it (a file lock) and reuse it. A
    folder whose ``make`` failed is made again by the next one to ask."""
    from filelock import FileLock

    folder = run_root(tmp_path_factory) / name
    done = folder / ".made"
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            make(folder)
            done.touch()
    return folder


SHARED_RUN_TIMEOUT = 100
"""The budget of a test whose setup may train the shared tiny-lm (about 30 s
alone, twice that beside a busy worker); its hard limit is :func:`hang_limit` of it."""
TINY_LM_RECORD = "record.json"
"""In the shared tiny-lm folder: the last line of `train tiny-lm --json`."""


@pytest.fixture(scope="session")
def tiny_lm_run(tmp_path_factory) -> Path:
    """The folder of ``train tiny-lm --epochs 1 --json --checkpoint-dir FOLDER``,
    run as a reader runs it, once per test run (shared by the xdist workers): its
    checkpoints, weights and model folder, and its JSON record in
    :data:`TINY_LM_RECORD`. The command's own test reads it, and so does every
    test that needs a trained model (its greedy choices are no longer
    near-ties). Tests only read it."""

    def train(folder: Path) -> None:
        proc = guide_cli(
            "train", "tiny-lm", "--epochs", "1", "--json", "--checkpoint-dir", str(folder)
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        (folder / TINY_LM_RECORD).write_text(proc.stdout.strip().splitlines()[-1])

    return shared_artefact(tmp_path_factory, "tiny-lm", train)


@pytest.fixture(scope="session")
def tiny_lm_weights(tiny_lm_run) -> Path:
    """The weights file of :func:`tiny_lm_run`."""
    from rocm_dl_guide.lm import pretrain

    return tiny_lm_run / pretrain.WEIGHTS_NAME


PAGE_TIMES = ROOT / "_build" / "page-times.json"
"""The build's table of page execution times (``guide_build.page_times``)."""


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> Build:
    """One build of the whole book, shared by every test that reads the site.
    Its page times are kept (a later rebuild writes the file again) and shown
    in the session's summary."""
    import json

    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One build per run: a second one would mean the groups were scattered.
        built = run_root(tmp_path_factory) / "book-built-by"
        assert not built.exists(), f"the book was built by {built.read_text()} already"
        built.write_text(os.environ["PYTEST_XDIST_WORKER"])
    result = build_book()
    if PAGE_TIMES.is_file():
        result.page_times = json.loads(PAGE_TIMES.read_text(encoding="utf-8"))
    print(
        f"book build: exit {result.code} in {result.seconds:.0f} s, "
        f"{len(result.executed)} pages executed"
    )
    _BUILDS.append(result)
    return result


_BUILDS: list[Build] = []  # the session's whole-book build, for the summary below


def page_failures(log: str, most: int = 120) -> list[str]:
    """The whole error of each page whose execution failed, as a parallel build's
    workers write it (``guide_build.parallel.printing_failures``): the failing
    cell and its traceback, at most ``most`` lines a page."""
    if str(ROOT / "_ext") not in sys.path:
        sys.path.insert(0, str(ROOT / "_ext"))
    from guide_build.parallel import PAGE_FAILED

    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line.endswith(f": {PAGE_FAILED}:")]
    return [line for i in starts for line in lines[i : i + most]]


def build_failure_summary(build: Build, tail: int = 40) -> list[str]:
    """What to print at the end of the session when the book did not build:
    Sphinx's warning and error lines, then the log's last lines. The failing
    tests' own messages sit far above the many tests that depend on the site,
    and a CI log is often read from its end."""
    lines = build.log.splitlines()
    flagged = [
        line
        for line in lines
        if re.search(r"\b(WARNING|ERROR)\b|(Error|Exception)\b|^Traceback", line)
    ]
    return [
        f"the book did not build (exit {build.code} after {build.seconds:.0f} s)",
        *page_failures(build.log),
        *(flagged[:60] or ["(no warning or error lines in the log)"]),
        f"--- last {tail} lines of the build log ---",
        *lines[-tail:],
    ]


def pytest_sessionfinish(session):
    """An xdist worker hands the session's build to the controller, which prints
    the summaries (:func:`pytest_testnodedown`)."""
    import dataclasses
    import json

    output = getattr(session.config, "workeroutput", None)
    if output is not None and _BUILDS:
        build = dataclasses.replace(_BUILDS[-1], log=_BUILDS[-1].log[-200_000:])
        output["guide_build"] = json.dumps(dataclasses.asdict(build))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    import json

    data = getattr(node, "workeroutput", {}).get("guide_build")
    if data:
        _BUILDS.append(Build(**json.loads(data)))


def pytest_terminal_summary(terminalreporter):
    reports = [
        r
        for group in terminalreporter.stats.values()
        for r in group
        if isinstance(r, pytest.TestReport)
    ]
    over = over_budget(reports, speed_factor())
    if over:
        # Each still within its hard limit (3 x); the next to fail on a slower machine.
        terminalreporter.section("tests over their time budget")
        for nodeid, seconds, budget in over:
            terminalreporter.write_line(
                f"{seconds:7.1f} s  budget {budget:g} s x {speed_factor():.2f}  {nodeid}"
            )
    for build in _BUILDS:
        if build.page_times:
            terminalreporter.section("book build: slowest pages")
            if str(ROOT / "_ext") not in sys.path:
                sys.path.insert(0, str(ROOT / "_ext"))
            from guide_build import page_times  # the build log's own lines

            for line in page_times.summary_lines(build.page_times):
                terminalreporter.write_line(line)
        if build.code != 0:
            terminalreporter.section("book build failure")
            for line in build_failure_summary(build):
                terminalreporter.write_line(line)


LEAN_PYTHON = Path(__file__).parent / "bin" / "python-without-packages"
"""An interpreter with no site-packages: ``doctor --python`` finds no framework."""


def doctor_cli(
    *args: str,
    stdin: str | None = None,
    env: dict | None = None,
    timeout: float = 100,
    frameworks: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m rocm_dl_guide doctor ARGS`` in a subprocess (stdout and stderr
    captured as text). Unless ``frameworks`` is true, the framework probes run
    in :data:`LEAN_PYTHON` (``--python``), which has none: a test about ROCm,
    the SMI tools, logs or snapshots then costs no TensorFlow and PyTorch import.
    The tests about the probes themselves (test_doctor.py) pass ``frameworks=True``.
    ``timeout`` is its budget: it is stopped after :func:`hang_limit` of it."""
    env = dict(os.environ if env is None else env)
    cmd = [sys.executable, "-m", "rocm_dl_guide", "doctor", *args]
    if not frameworks and "--snapshot" not in args and "--python" not in args:
        env["GUIDE_BASE_PYTHON"] = sys.executable
        cmd += ["--python", str(LEAN_PYTHON)]
    return subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=hang_limit(timeout), env=env
    )


def guide_cli(
    *args: str, timeout: float = 100, profile: str = "smoke"
) -> subprocess.CompletedProcess:
    """``python -m rocm_dl_guide ARGS`` in a subprocess with the ``profile``, from
    the repository root; stdout and stderr captured as text. ``timeout`` is its
    budget: it is stopped after :func:`hang_limit` of it."""
    env = {**os.environ, "ROCM_DL_GUIDE_PROFILE": profile}
    return subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", *args],
        capture_output=True,
        text=True,
        timeout=hang_limit(timeout),
        env=env,
        cwd=ROOT,
    )


def process_gone(pid: int) -> bool:
    """No such process, or a zombie waiting to be reaped, within a hang limit."""
    deadline = time.monotonic() + hang_limit(2)
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False
