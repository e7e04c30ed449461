"""The package's architecture: layers without cycles, one command line, no private reach-ins.

Two tiers. The core (data, devices, profiles, the training loops, the setup
checks, small helpers) never imports a case study, the inference chapter or
the command line. Case studies (mnist, cifar10, inception, fashion_mnist,
imdb) use only the core; the inference chapter (``inference``, ``bench``) may
also use ``inception``, and ``bench`` may use ``inference`` but not the other
way round. ``tf_distributed`` (the TensorFlow chapter's distributed training)
may use the core and ``fashion_mnist``; ``scaling`` (the distributed chapter's
torchrun experiments) only the core. ``cli`` and ``__main__`` may import
anything, and ``cli`` is the only module that builds an argparse parser. No
module uses another module's private (``_name``) names, and no function is
longer than 80 lines.

The import graph counts every import, also those inside functions and under
``TYPE_CHECKING``; it comes from ``_ext/guide_build.py``'s ``module_imports``,
the same function the book's execution cache uses. Each check is a plain
function, and :func:`test_each_check_can_fail` runs it on a small made-up
graph or source that it must reject.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import guide_build  # noqa: E402

PACKAGE = "rocm_dl_guide"
PACKAGE_DIR = ROOT / "code" / PACKAGE
MAX_FUNCTION_LINES = 80

CORE = frozenset(
    {
        "__init__",
        "compat",
        "datasets",
        "device",
        "diagnose",
        "distributed",
        "doctor",
        "files",
        "fixtures",
        "freshness",
        "hostfacts",
        "keras_train",
        "messages",
        "plots",
        "ports",
        "profiles",
        "progress",
        "provenance",
        "rocminfo",
        "runs",
        "sharded",
        "snapshot",
        "system",
        "tables",
        "train",
    }
)
CASE_STUDIES = frozenset({"mnist", "cifar10", "inception", "fashion_mnist", "imdb"})
INFERENCE_CHAPTER = frozenset({"inference", "bench", "precision", "profiling", "tuning"})
OTHER_CHAPTERS = frozenset({"tf_distributed", "scaling", "selfcheck", "recipes"})
ENTRY_POINTS = frozenset({"cli", "__main__"})
PARSER_MODULE = "cli"
PARSER_CALLS = frozenset({"add_parser", "add_subparsers", "ArgumentParser"})

# The extra edges the inference chapter may have, beyond the core.
ALLOWED_EXTRA = {
    "inference": frozenset({"inception"}),
    "bench": frozenset({"inception", "inference"}),
    # precision times Inception v3 and measures agreement on the trained CIFAR-10 network.
    "precision": frozenset({"inception", "inference", "bench", "cifar10"}),
    # profiling profiles a CIFAR-10 training step and an Inception v3 forward pass.
    "profiling": frozenset({"cifar10", "inception", "inference"}),
    # tuning times Inception v3's convolutions (MIOpen) and one GEMM (TunableOp).
    "tuning": frozenset({"bench", "inception"}),
    "tf_distributed": frozenset({"fashion_mnist"}),
    # selfcheck runs the PyTorch case studies, the inference chapter and a DDP job.
    "selfcheck": frozenset(
        {"mnist", "cifar10", "inception", "inference", "scaling", "profiling", "tuning"}
    ),
    # recipes lists every case study's full-profile settings.
    "recipes": frozenset({"mnist", "cifar10", "inception", "fashion_mnist", "imdb"}),
}


# --------------------------------------------------------------------------- the checks


def package_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """The package's modules by name (``__init__`` included)."""
    return {p.stem: p for p in sorted(package_dir.glob("*.py"))}


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in it), itself excluded."""
    modules = package_modules(package_dir)
    return {
        name: {m for m in guide_build.module_imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


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
    if src in ENTRY_POINTS:
        return None
    if dst in ENTRY_POINTS:
        return f"only {' and '.join(sorted(ENTRY_POINTS))} may import {dst}"
    if dst in CORE:
        return None
    if src in CORE:
        return "the core must not import a case study, the inference chapter or the CLI"
    if src in CASE_STUDIES:
        return "a case study may import only the core (not another case study)"
    if src in INFERENCE_CHAPTER or src in OTHER_CHAPTERS:
        if dst in ALLOWED_EXTRA[src]:
            return None
        if src == "inference" and dst == "bench":
            return "inference must not import bench (bench uses inference)"
        return f"{src} may import only the core, " + " and ".join(sorted(ALLOWED_EXTRA[src]))
    return None  # unclassified modules are reported by layer_violations


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``"src -> dst: why"`` for each forbidden edge, and each module of no tier."""
    known = CORE | CASE_STUDIES | INFERENCE_CHAPTER | OTHER_CHAPTERS | ENTRY_POINTS
    problems = [
        f"{name}: module of no tier; add it to CORE (or another tier) in {Path(__file__).name}"
        for name in sorted(graph)
        if name not in known
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_module(node: ast.ImportFrom) -> str | None:
    """The package module an ``ImportFrom`` imports names from (``None``: the package)."""
    if node.level == 0:
        if node.module == PACKAGE:
            return None
        return node.module.split(".")[1] if node.module else None
    return node.module.split(".")[0] if node.module else None


def private_uses(module: str, source: str, modules: set[str]) -> list[str]:
    """Uses in ``module`` of another package module's private names, as ``"line N: ..."``.

    Catches ``from rocm_dl_guide.x import _y``, ``from rocm_dl_guide import x``
    (or ``import rocm_dl_guide.x as x``) then ``x._y``, and
    ``rocm_dl_guide.x._y``.
    """
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # a name bound to a package module -> that module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").split(".")[0] == PACKAGE
        ):
            target = _imported_module(node)
            for alias in node.names:
                if target is None and alias.name in modules:
                    aliases[alias.asname or alias.name] = alias.name
                elif _is_private(alias.name) and target != module:
                    where = node.module or "." * node.level
                    found.append(f"line {node.lineno}: from {where} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1 and alias.asname:
                    aliases[alias.asname] = parts[1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        value = node.value
        target = None
        if isinstance(value, ast.Name):
            target = aliases.get(value.id)
        elif (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == PACKAGE
            and value.attr in modules
        ):
            target = value.attr
        if target is not None and target != module:
            found.append(f"line {node.lineno}: {target}.{node.attr}")
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
    problems = []
    for name, path in package_modules().items():
        problems += [f"{name}.py {p}" for p in check(name, path.read_text(encoding="utf-8"))]
    return problems


# --------------------------------------------------------------------------- the package


def test_import_graph_counts_function_level_imports():
    graph = import_graph()
    assert "datasets" in graph["cli"]  # imported inside the data command's functions only
    assert "inception" in graph["inference"]  # inside functions and under TYPE_CHECKING


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_layers():
    problems = layer_violations(import_graph())
    assert not problems, "layer violations:\n" + "\n".join(problems)


def test_only_cli_builds_argparse_parsers():
    problems = _per_module(lambda name, src: [] if name == PARSER_MODULE else parser_calls(src))
    assert not problems, "argparse outside cli.py:\n" + "\n".join(problems)


def test_no_private_names_across_modules():
    modules = set(package_modules())
    problems = _per_module(lambda name, src: private_uses(name, src, modules))
    assert not problems, "private names used across modules:\n" + "\n".join(problems)


def test_no_function_longer_than_80_lines():
    problems = _per_module(lambda name, src: long_functions(src))
    assert not problems, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(problems)


# --------------------------------------------------------------------------- the checks can fail


def test_each_check_can_fail(tmp_path):
    # the graph sees imports inside functions
    mod = tmp_path / "mod.py"
    mod.write_text("def f():\n    from rocm_dl_guide import bench\n    import rocm_dl_guide.cli\n")
    assert guide_build.module_imports(mod) == {"bench", "cli"}

    # a cycle, named edge by edge
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None

    # layer violations name the offending edge
    bad = {
        "datasets": {"mnist"},
        "fashion_mnist": {"mnist", "profiles"},
        "inference": {"bench", "inception"},
        "bench": {"inference", "cifar10"},
        "mnist": {"cli"},
        "newthing": set(),
        "cli": {"bench", "datasets"},
    }
    problems = layer_violations(bad)
    for edge in (
        "datasets -> mnist",
        "fashion_mnist -> mnist",
        "inference -> bench",
        "bench -> cifar10",
        "mnist -> cli",
    ):
        assert any(p.startswith(edge + ":") for p in problems), (edge, problems)
    assert any(p.startswith("newthing:") for p in problems)
    assert not any(
        p.startswith(("cli ->", "bench -> inference", "inference -> inception")) for p in problems
    )

    # argparse outside cli
    src = "import argparse\np = argparse.ArgumentParser()\np.add_subparsers().add_parser('x')\n"
    assert parser_calls(src) == [
        "line 2: ArgumentParser",
        "line 3: add_parser",
        "line 3: add_subparsers",
    ]

    # private names of another module, in all three spellings; own names and dunders are fine
    modules = {"mnist", "datasets", "imdb"}
    src = textwrap.dedent(
        """
        from rocm_dl_guide.mnist import _epochs
        from rocm_dl_guide import datasets
        import rocm_dl_guide.datasets
        import rocm_dl_guide.mnist as m
        from rocm_dl_guide.imdb import _own
        datasets._is_network_error(None)
        rocm_dl_guide.datasets._remove(None)
        m._epochs
        datasets.__name__, datasets.fetch
        """
    )
    assert private_uses("imdb", src, modules) == [
        "line 2: from rocm_dl_guide.mnist import _epochs",
        "line 7: datasets._is_network_error",
        "line 8: datasets._remove",
        "line 9: mnist._epochs",
    ]

    # long functions: 81 lines fail, 80 pass
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    assert long_functions("def f():\n" + body) == []
    assert long_functions("def f():\n" + body + "    return 1\n") == ["f (line 1): 81 lines"]
