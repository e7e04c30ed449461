"""The package's architecture: layered subpackages, no cycles, one command line, no reach-ins.

The package is cut by the book's parts. At the bottom, ``core`` (profiles,
devices, files, data sets, fixtures, the case-study registry, runs, provenance,
preemption and small helpers) imports nothing above it. ``training`` (the one
loop, checkpoints, sharded state, the Keras loop) and the ``doctor`` use only
the core. The chapters (``casestudies``, ``distributed``, ``kernels``, ``lm``,
``optimization``) use the core and the training loop, and a sibling chapter or
the doctor only through an edge listed, with its reason, in
:data:`CHAPTER_EXCEPTIONS`. ``selfcheck``, ``cli`` and ``__main__`` sit on top
and may import anything; nothing below imports them, and only the ``cli``
subpackage (and ``__main__``) builds argparse parsers. No module uses another
module's private (``_name``) names, no function is longer than 80 lines, and no
module is longer than 600.

Modules are named by their dotted name inside the package (``training.train``,
``doctor.system``, ``cli.train``; ``doctor`` for ``doctor/__init__.py``), and
the whole package is walked. A module belongs to a layer when its name or one
of its dotted prefixes is listed there: listing ``doctor`` puts
``doctor.system`` in the doctor's layer. The modules of one listed subpackage
may import each other.

The import graph counts every import, also those inside functions and under
``TYPE_CHECKING``, and resolves relative ones (``from . import x``, ``from ..
import profiles``); it comes from ``_ext/guide_build/imports.py``'s
``module_imports``, the same reader the book's execution cache uses. Each check
is a plain function, and :func:`test_each_check_can_fail` runs it on a small
made-up graph, source or package that it must reject.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
from guide_build import imports  # noqa: E402

PACKAGE = "rocm_dl_guide"
PACKAGE_DIR = ROOT / "code" / PACKAGE
MAX_FUNCTION_LINES = 80

# Each entry covers a module and, when it is a subpackage, every module in it:
# "core" is core/ (core.profiles, core.datasets, ...), "cli" is cli/ and cli.*.
CORE = frozenset({"__init__", "core"})
TRAINING = frozenset({"training"})
DOCTOR = frozenset({"doctor"})
CHAPTERS = frozenset({"casestudies", "distributed", "kernels", "lm", "optimization"})
ENTRY_POINTS = frozenset({"selfcheck", "cli", "__main__"})
TIERS = CORE | TRAINING | DOCTOR | CHAPTERS | ENTRY_POINTS
MAX_MODULE_LINES = 600

# The edges from a chapter to a sibling chapter or to the doctor, each with its reason.
CHAPTER_EXCEPTIONS = {
    # The optimisation chapter's model is the training chapter's Inception v3:
    # exported, calibrated on its data, tuned, profiled and timed.
    ("optimization.onnx_files", "casestudies.inception_pretrained"): "exports Inception v3",
    ("optimization.inference", "casestudies.inception_pretrained"): "classifies its sample photo",
    ("optimization.ort_int8", "casestudies.tiny_imagenet"): "calibrates on its data",
    ("optimization.precision", "casestudies.tiny_imagenet"): "calibrates on its data",
    ("optimization.tuning", "casestudies.inception_pretrained"): "tunes its convolutions",
    ("optimization.profiling", "casestudies.inception_pretrained"): "profiles its forward pass",
    # Agreement and a training step need a trained network: the CIFAR-10 one.
    ("optimization.agreement", "casestudies.cifar10"): "agreement on a trained network",
    ("optimization.profiling", "casestudies.cifar10"): "profiles a training step",
    # MIGraphX's Python module is found where the doctor finds ROCm.
    ("optimization.backends", "doctor.installed"): "finds ROCm's libraries",
    # TensorFlow's strategies train the Fashion-MNIST classifier of the case study.
    ("distributed.tf_distributed", "casestudies.fashion_mnist"): "its epochs and batch size",
    ("distributed.tf_tasks", "casestudies.fashion_mnist"): "trains its classifier",
}
PARSER_MODULES = frozenset({"cli", "__main__"})
PARSER_CALLS = frozenset({"add_parser", "add_subparsers", "ArgumentParser"})

# Where a run's profile (and with it its data source) is resolved from a name or the
# environment: the profiles module itself, the command line (cli.common.run_profile) and
# selfcheck's runner. Everything below them takes a resolved Profile (issue 43 item 3).
PROFILE_RESOLVERS = frozenset({"core.profiles", "cli", "selfcheck"})
PROFILE_EXCEPTIONS = {
    # The report says which profile a run started here would get, and asks PyTorch
    # through the probe (this process never imports it), so profiles.current() won't do.
    "doctor.report": "the profile a run started here would get",
}
RESOLVING_FUNCTIONS = frozenset({"current", "get"})

# --------------------------------------------------------------------------- the checks


def package_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """The package's modules, subpackages included, by dotted name (``__init__``,
    ``train``, ``doctor`` for ``doctor/__init__.py``, ``doctor.system``)."""
    return {
        imports.module_name(path, package_dir): path
        for path in sorted(package_dir.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in it), itself excluded."""
    modules = package_modules(package_dir)
    return {
        name: {m for m in imports.module_imports(path, package_dir) if m in modules and m != name}
        for name, path in modules.items()
    }


def listed(module: str, names) -> str | None:
    """The entry of ``names`` that covers ``module``: the module itself or its
    longest dotted prefix there (``doctor`` covers ``doctor.system``, not
    ``doctorx``), else ``None``."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in names:
            return ".".join(parts[:end])
    return None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as ``[a, b, ..., a]``, or ``None`` when the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def _edge_problem(src: str, dst: str) -> str | None:
    unit = listed(src, TIERS)
    if unit is not None and unit == listed(dst, TIERS):
        return None  # within one listed module or subpackage
    if listed(src, ENTRY_POINTS):
        return None
    if listed(dst, ENTRY_POINTS):
        return f"only {', '.join(sorted(ENTRY_POINTS))} may import {dst}"
    if listed(dst, CORE):
        return None
    if listed(src, CORE):
        return "the core imports nothing above it"
    if listed(src, TRAINING | DOCTOR):
        return f"{unit} may import only the core"
    if listed(dst, TRAINING):
        return None  # a chapter uses the training loop
    if any(listed(src, {s}) and listed(dst, {d}) for s, d in CHAPTER_EXCEPTIONS):
        return None
    return (
        f"a chapter may import only the core and the training loop, and {dst} "
        "only through an entry of CHAPTER_EXCEPTIONS"
    )


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``"src -> dst: why"`` for each forbidden edge, and each module of no tier."""
    problems = [
        f"{name}: module of no tier; add it to CORE (or another tier) in {Path(__file__).name}"
        for name in sorted(graph)
        if listed(name, TIERS) is None
    ]
    for src in sorted(graph):
        for dst in sorted(graph[src]):
            why = _edge_problem(src, dst)
            if why:
                problems.append(f"{src} -> {dst}: {why}")
    return problems


def parser_calls(source: str) -> list[str]:
    """``"line N: name"`` for each call of ``add_parser``/``add_subparsers``/``ArgumentParser``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in PARSER_CALLS:
            found.append(f"line {node.lineno}: {name}")
    return found


def parser_violations(modules: dict[str, Path]) -> list[str]:
    """``"path line N: name"`` for each parser built outside ``cli`` and ``__main__``."""
    problems = []
    for name, path in modules.items():
        if listed(name, PARSER_MODULES) is None:
            calls = parser_calls(path.read_text(encoding="utf-8"))
            problems += [f"{name}: {call}" for call in calls]
    return problems


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(expr: ast.expr, aliases: dict[str, str], modules: set[str]) -> str | None:
    """The package module that ``expr`` (a name or ``name.attr...``) is bound to."""
    if isinstance(expr, ast.Name):
        return aliases.get(expr.id)
    if isinstance(expr, ast.Attribute):
        parent = _module_of(expr.value, aliases, modules)
        if parent is not None and imports.child(parent, expr.attr) in modules:
            return imports.child(parent, expr.attr)
    return None


def private_uses(
    module: str, source: str, modules: set[str], package: str | None = None
) -> list[str]:
    """Uses in ``module`` of another package module's private names, as ``"line N: ..."``.

    Catches ``from rocm_dl_guide.x import _y`` (or ``from .x import _y``),
    ``from rocm_dl_guide import x`` (or ``import rocm_dl_guide.x as x``, ``from
    . import x``) then ``x._y``, and ``rocm_dl_guide.x._y``. ``modules``: the
    package's dotted module names; ``package``: where ``module``'s relative
    imports start (by default the package it is in; its own name for an
    ``__init__.py``).
    """
    if package is None:
        package = module.rpartition(".")[0] or imports.ROOT_MODULE
    tree = ast.parse(source)
    # a name bound to a package module -> that module
    aliases: dict[str, str] = {PACKAGE: imports.ROOT_MODULE}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = imports.from_module(node, package)
            if target is None:
                continue
            for alias in node.names:
                if imports.child(target, alias.name) in modules:
                    aliases[alias.asname or alias.name] = imports.child(target, alias.name)
                elif _is_private(alias.name) and target != module:
                    where = "." * node.level + (node.module or "")
                    found.append(f"line {node.lineno}: from {where} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1 and alias.asname:
                    aliases[alias.asname] = ".".join(parts[1:])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            target = _module_of(node.value, aliases, modules)
            if target is not None and target != module:
                found.append(f"line {node.lineno}: {target}.{node.attr}")
    return sorted(found, key=lambda text: int(text.split()[1].rstrip(":")))


def _names_in(expr: ast.expr | None) -> set[str]:
    """The names and attribute names in an annotation (string annotations parsed)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        expr = ast.parse(expr.value, mode="eval").body
    return (
        {
            getattr(node, "id", None) or getattr(node, "attr", None)
            for node in ast.walk(expr)
            if isinstance(node, (ast.Name, ast.Attribute))
        }
        if expr is not None
        else set()
    )


def profile_resolutions(
    module: str, source: str, modules: set[str], package: str | None = None
) -> list[str]:
    """Where ``module`` resolves a run profile itself, as ``"line N: ..."``: each call
    of ``profiles.current`` or ``profiles.get`` (however the module or the function was
    imported), and each function whose signature takes ``ProfileLike`` (a name or None
    to resolve below the entry point). ``modules`` and ``package`` as for
    :func:`private_uses`."""
    if package is None:
        package = module.rpartition(".")[0] or imports.ROOT_MODULE
    tree = ast.parse(source)
    aliases: dict[str, str] = {PACKAGE: imports.ROOT_MODULE}
    functions: dict[str, str] = {}  # a name bound to profiles.current or profiles.get
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = imports.from_module(node, package)
            for alias in node.names if target is not None else ():
                if imports.child(target, alias.name) in modules:
                    aliases[alias.asname or alias.name] = imports.child(target, alias.name)
                elif target == "core.profiles" and alias.name in RESOLVING_FUNCTIONS:
                    functions[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1 and alias.asname:
                    aliases[alias.asname] = ".".join(parts[1:])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in functions:
                found.append(f"line {node.lineno}: profiles.{functions[func.id]}")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in RESOLVING_FUNCTIONS
                and _module_of(func.value, aliases, modules) == "core.profiles"
            ):
                found.append(f"line {node.lineno}: profiles.{func.attr}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            annotations = [a.annotation for a in every if a is not None] + [node.returns]
            if any("ProfileLike" in _names_in(a) for a in annotations):
                found.append(f"line {node.lineno}: ProfileLike in {node.name}'s signature")
    return sorted(found, key=lambda text: int(text.split()[1].rstrip(":")))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``"name (line N): L lines"`` for each function longer than ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{node.name} (line {node.lineno}): {length} lines")
    return found


def _per_module(check) -> list[str]:
    """``check(name, path, source)``'s problems for every module, each after its file."""
    problems = []
    for name, path in package_modules().items():
        where = path.relative_to(PACKAGE_DIR).as_posix()
        problems += [f"{where} {p}" for p in check(name, path, path.read_text(encoding="utf-8"))]
    return problems


# --------------------------------------------------------------------------- the package


def test_import_graph_counts_function_level_imports():
    graph = import_graph()
    # imported inside the data command's functions only (in cli.py, or in cli/)
    cli_imports = set().union(*(deps for name, deps in graph.items() if listed(name, {"cli"})))
    assert "core.datasets" in cli_imports
    # inside functions and under TYPE_CHECKING
    assert "casestudies.inception_pretrained" in graph["optimization.inference"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_layers():
    problems = layer_violations(import_graph())
    assert not problems, "layer violations:\n" + "\n".join(problems)


def test_only_cli_builds_argparse_parsers():
    problems = parser_violations(package_modules())
    assert not problems, "argparse outside cli and __main__:\n" + "\n".join(problems)


def test_no_private_names_across_modules():
    modules = set(package_modules())

    def check(name, path, source):
        return private_uses(name, source, modules, imports.package_name(path, PACKAGE_DIR))

    problems = _per_module(check)
    assert not problems, "private names used across modules:\n" + "\n".join(problems)


def test_profile_resolved_only_at_the_entry_points():
    """Issue 43 item 3, settings resolved once: a run's profile (and its data source)
    is resolved from its name or the environment once, where the run starts (a
    command, through ``cli.common.run_profile``; selfcheck's runner; a book page; a
    test), and passed down as a ``Profile``. A function below those entry points that
    resolved it again could disagree with the run's own (another data source, another
    profile), so none calls ``profiles.current`` or ``profiles.get``, and none takes a
    ``ProfileLike`` (a name, or None for "the profile in force"). The one exception,
    with its reason, is in ``PROFILE_EXCEPTIONS``."""
    modules = set(package_modules())

    def check(name, path, source):
        if listed(name, PROFILE_RESOLVERS) or name in PROFILE_EXCEPTIONS:
            return []
        return profile_resolutions(name, source, modules, imports.package_name(path, PACKAGE_DIR))

    problems = _per_module(check)
    assert not problems, (
        "profiles resolved below the entry points (take a Profile instead):\n" + "\n".join(problems)
    )


def module_lengths(package_dir: Path = PACKAGE_DIR) -> dict[str, int]:
    """Each module's path in the package -> its number of lines."""
    return {
        path.relative_to(package_dir).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in package_modules(package_dir).values()
    }


def test_no_module_longer_than_600_lines():
    lengths = module_lengths()
    over = sorted(f"{name} ({n})" for name, n in lengths.items() if n > MAX_MODULE_LINES)
    assert not over, f"modules over {MAX_MODULE_LINES} lines: " + ", ".join(over)


def test_no_function_longer_than_80_lines():
    problems = _per_module(lambda name, path, source: long_functions(source))
    assert not problems, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(problems)


# --------------------------------------------------------------------------- the checks can fail


# A made-up package with subpackages, in which every rule is broken once, by a
# module inside a subpackage, some through relative imports.
MADE_UP = {
    "__init__.py": "",
    "core/__init__.py": "",
    "core/datasets.py": "",
    "core/files.py": "from ..training import train\n",  # the core imports the loop
    "training/__init__.py": "",
    "training/train.py": "from ..core import datasets\n",
    "casestudies/__init__.py": "",
    "casestudies/mnist.py": "from ..training import train\n",
    "optimization/__init__.py": "",
    "optimization/bench.py": "from ..casestudies import mnist\n",  # not a listed exception
    # the doctor: its __init__ and members import each other
    "doctor/__init__.py": "from .report import run\n",
    "doctor/report.py": "import argparse\nfrom . import system\n"
    "parser = argparse.ArgumentParser()\n",
    "doctor/system.py": "def f():\n    from ..casestudies import mnist\n",  # a chapter
    # the command line: may import anything, build parsers, import its own modules
    "cli/__init__.py": "from .train import main\n",
    "cli/train.py": "import argparse\nfrom ..doctor import system\nfrom . import common\n"
    "argparse.ArgumentParser()\n",
    "cli/common.py": "from rocm_dl_guide.optimization import bench\n",
    # a chapter: its own modules and the core yes, a sibling chapter no
    "lm/__init__.py": "from . import model\n",
    "lm/model.py": "from . import data\nfrom rocm_dl_guide.core import datasets\n",
    "lm/data.py": "from ..casestudies.mnist import load\n",
    "doctorx.py": "",  # "doctor" covers doctor.system, not doctorx
}


def _made_up_package(root: Path) -> Path:
    for name, source in MADE_UP.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


def _subpackage_checks_can_fail(tmp_path: Path) -> None:
    package_dir = _made_up_package(tmp_path / "made_up")
    graph = import_graph(package_dir)
    # relative imports seen, resolved to the modules they name
    assert graph["doctor"] == {"doctor.report"} and graph["doctor.report"] == {"doctor.system"}
    assert "casestudies.mnist" in graph["doctor.system"]  # from .. import, inside a function
    assert {"doctor.system", "cli.common"} <= graph["cli.train"]
    assert "casestudies.mnist" in graph["lm.data"]  # from ..x.y import a name: the module
    problems = layer_violations(graph)
    bad = (
        "doctor.system -> casestudies.mnist:",
        "lm.data -> casestudies.mnist:",
        "optimization.bench -> casestudies.mnist:",
        "core.files -> training.train:",
        "doctorx:",
    )
    for edge in bad:
        assert any(p.startswith(edge) for p in problems), (edge, problems)
    # cli.*, the doctor's, lm's, the loop's and the case study's own edges are fine
    assert len(problems) == len(bad), problems
    modules = package_modules(package_dir)
    assert parser_violations(modules) == ["doctor.report: line 3: ArgumentParser"]
    assert listed("cli.train", PARSER_MODULES) == "cli" and listed("clix", PARSER_MODULES) is None
    # private names through relative imports, in a module and in an __init__
    src = (
        "from . import report\nreport._x\nfrom ..casestudies.mnist import _y\n"
        "from .system import _own\n"
    )
    assert private_uses("doctor.system", src, set(modules)) == [
        "line 2: doctor.report._x",
        "line 3: from ..casestudies.mnist import _y",
    ]
    assert private_uses("doctor", "from . import system\nsystem._z\n", set(modules), "doctor") == [
        "line 2: doctor.system._z"
    ]


def test_each_check_can_fail(tmp_path):
    # the graph sees imports inside functions
    package_dir = _made_up_package(tmp_path / "flat")
    mod = package_dir / "mod.py"
    mod.write_text(
        "def f():\n    from rocm_dl_guide.optimization import bench\n    import rocm_dl_guide.cli\n"
    )
    assert {"optimization.bench", "cli"} <= imports.module_imports(mod, package_dir)

    # a cycle, named edge by edge
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None

    # layer violations name the offending edge
    bad = {
        "core.datasets": {"casestudies.mnist", "doctor", "core.files"},
        "casestudies.fashion_mnist": {"casestudies.mnist", "core.profiles"},
        "optimization.inference": {"optimization.bench", "casestudies.inception_pretrained"},
        "optimization.bench": {"casestudies.cifar10", "doctor.compat"},
        "casestudies.mnist": {"cli", "doctor", "training.train"},
        "newthing": set(),
        "cli": {"optimization.bench", "core.datasets", "doctor"},
        "cli.setup": {"doctor.freshness"},
        "doctor": {"doctor.report"},
        "doctor.report": {"doctor.system", "core.profiles", "casestudies.inception"},
        "training.train": {"casestudies.mnist", "core.files"},
        "lm.pretrain": {"training.train", "selfcheck"},
    }
    problems = layer_violations(bad)
    for edge in (
        "core.datasets -> casestudies.mnist",  # the core imports a chapter
        "core.datasets -> doctor",
        "optimization.bench -> casestudies.cifar10",  # no listed exception
        "optimization.bench -> doctor.compat",
        "casestudies.mnist -> cli",
        "casestudies.mnist -> doctor",
        "doctor.report -> casestudies.inception",  # the doctor imports a chapter
        "training.train -> casestudies.mnist",  # the loop imports a chapter
        "lm.pretrain -> selfcheck",  # a chapter imports the top
    ):
        assert any(p.startswith(edge + ":") for p in problems), (edge, problems)
    assert any(p.startswith("newthing:") for p in problems)
    fine = ("cli ->", "cli.setup ->", "optimization.inference ->", "doctor ->")
    fine += ("doctor.report -> doctor.system", "doctor.report -> core.profiles")
    fine += ("casestudies.fashion_mnist ->", "casestudies.mnist -> training.train")
    fine += (
        "training.train -> core.files",
        "lm.pretrain -> training.train",
        "core.datasets -> core",
    )
    assert not any(p.startswith(fine) for p in problems), problems
    assert len(problems) == 10, problems

    # argparse outside cli
    src = "import argparse\np = argparse.ArgumentParser()\np.add_subparsers().add_parser('x')\n"
    assert parser_calls(src) == [
        "line 2: ArgumentParser",
        "line 3: add_parser",
        "line 3: add_subparsers",
    ]

    # private names of another module, in all three spellings; own names and dunders are fine
    modules = {"core", "casestudies", "casestudies.mnist", "core.datasets", "casestudies.imdb"}
    src = textwrap.dedent(
        """
        from rocm_dl_guide.casestudies.mnist import _epochs
        from rocm_dl_guide.core import datasets
        import rocm_dl_guide.core.datasets
        import rocm_dl_guide.casestudies.mnist as m
        from rocm_dl_guide.casestudies.imdb import _own
        datasets._is_network_error(None)
        rocm_dl_guide.core.datasets._remove(None)
        m._epochs
        datasets.__name__, datasets.fetch
        """
    )
    assert private_uses("casestudies.imdb", src, modules) == [
        "line 2: from rocm_dl_guide.casestudies.mnist import _epochs",
        "line 7: core.datasets._is_network_error",
        "line 8: core.datasets._remove",
        "line 9: casestudies.mnist._epochs",
    ]

    # profiles resolved below the entry points, however spelled; a Profile taken is fine
    modules = {"core", "core.profiles", "lm", "lm.hub", "lm.pretrain"}
    src = textwrap.dedent(
        """
        from rocm_dl_guide.core import profiles
        from ..core import profiles as p
        from rocm_dl_guide.core.profiles import get as named
        from . import hub
        def load(profile: profiles.ProfileLike = None, n: "ProfileLike" = None):
            return profiles.current(profile)
        def settings(profile: profiles.Profile) -> dict:
            return {"lr": p.get("smoke").name, "epochs": profile.epochs(3)}
        named("gpu"), hub.get("x"), {}.get("y"), profiles.with_data_source(None, None)
        """
    )
    assert profile_resolutions("lm.pretrain", src, modules) == [
        "line 6: ProfileLike in load's signature",
        "line 7: profiles.current",
        "line 9: profiles.get",
        "line 10: profiles.get",
    ]

    # long modules: the made-up package's longest module is found
    package_dir = _made_up_package(tmp_path / "lengths")
    (package_dir / "core" / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert module_lengths(package_dir)["core/long.py"] == MAX_MODULE_LINES + 1

    # long functions: 81 lines fail, 80 pass
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    assert long_functions("def f():\n" + body) == []
    assert long_functions("def f():\n" + body + "    return 1\n") == ["f (line 1): 81 lines"]

    # the same checks, broken inside subpackages
    _subpackage_checks_can_fail(tmp_path)
