"""What the backend's optimisation passes did to the exported model.

:func:`graph_views` shows the graph before and after: with MIGraphX, the
program as parsed and as compiled (``program.print()``) and its instruction
counts; elsewhere the ONNX Runtime counterpart, the operators of the exported
ONNX graph against those of the model ONNX Runtime optimised for this CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_dl_guide.optimization import backends, inference, onnx_files

if TYPE_CHECKING:  # pragma: no cover
    import pandas


@dataclass
class GraphViews:
    """The model's graph before and after the backend's optimisations."""

    backend: str
    label: str
    """What the two views are, in words (and whose counterpart, off MIGraphX)."""
    table: pandas.DataFrame
    """Operator (or instruction) counts: ``operator``, ``before``, ``after``."""
    before_text: str = ""
    """MIGraphX: ``program.print()`` after parsing (trimmed); else empty."""
    after_text: str = ""
    """MIGraphX: ``program.print()`` after compiling (trimmed); else empty."""

    @property
    def nodes_before(self) -> int:
        return int(self.table["before"].sum())

    @property
    def nodes_after(self) -> int:
        return int(self.table["after"].sum())


def _trim(text: str, lines: int) -> str:
    rows = text.splitlines()
    extra = f"\n... ({len(rows) - lines} more lines)" if len(rows) > lines else ""
    return "\n".join(rows[:lines]) + extra


def _mgx_ops(text: str) -> dict[str, int]:
    """Instruction names in a MIGraphX program listing (``@3 = convolution[...](...)``)."""
    import re
    from collections import Counter

    return dict(Counter(m.group(1) for m in re.finditer(r"=\s*([\w:]+)", text)).most_common())


def graph_views(
    prepared: onnx_files.ExportedInception,
    backend: str | None = None,
    lines: int = 25,
    workdir: Path | None = None,
) -> GraphViews:
    """What the optimisation passes did to the exported model.

    MIGraphX: the program as parsed and as compiled (``program.print()``'s text,
    trimmed to ``lines``) and its instruction counts. Elsewhere the ONNX
    Runtime counterpart: the operators of the exported ONNX graph against those
    of the model ONNX Runtime optimised (``optimized_model_filepath``).
    """
    import contextlib
    import tempfile

    import pandas as pd

    name = backends.select_backend(backend)
    path = prepared.onnx.path
    if name == "migraphx":
        mgx = backends.migraphx_status().module
        prog = mgx.parse_onnx(str(path), default_dim_value=1)
        before = str(prog)
        prog.compile(mgx.get_target("gpu"))
        after = str(prog)
        counts = (_mgx_ops(before), _mgx_ops(after))
        label = "MIGraphX: the program after parse_onnx and after compile for the GPU"
        texts = (_trim(before, lines), _trim(after, lines))
    else:
        with contextlib.ExitStack() as stack:
            folder = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
            saved = inference.save_compiled(path, folder / "optimized.opt.onnx", "onnxruntime")
            counts = (onnx_files.op_counts(path), onnx_files.op_counts(saved.path))
        label = (
            "ONNX Runtime counterpart (no MIGraphX here): the exported ONNX graph and the "
            "graph ONNX Runtime optimised for this CPU (optimized_model_filepath)"
        )
        texts = ("", "")
    ops = list(dict.fromkeys([*counts[0], *counts[1]]))
    table = pd.DataFrame(
        {
            "operator": ops,
            "before": [counts[0].get(o, 0) for o in ops],
            "after": [counts[1].get(o, 0) for o in ops],
        }
    )
    return GraphViews(name, label, table, *texts)
