"""GPU verification stamp: when the PyTorch path last passed ``make gpu-check``.

``{guide-gpu-stamp}`` shows when the PyTorch path last passed ``make
gpu-check`` on a GPU (the tracked record that only that command writes), with
that run's figures.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class GpuStampDirective(SphinxDirective):
    """``{guide-gpu-stamp} [example]``: when the PyTorch path last passed
    ``make gpu-check`` on a GPU, from the tracked verification record
    (``rocm_dl_guide.selfcheck.record.stamp``), with that run's figures for ``example``:
    a case study (``mnist-pytorch``, ``cifar10``, ``inception-v3``) or a check
    whose figures the record keeps under its name (``kernels:softmax``)."""

    optional_arguments = 1
    has_content = False

    def run(self):
        from docutils.statemachine import StringList

        from rocm_dl_guide.selfcheck import record, report

        example = self.arguments[0] if self.arguments else None
        named = example is not None and example.startswith(report.NAMED_FIGURES)
        if example is not None and example not in report.EXAMPLES and not named:
            raise self.error(
                f"unknown example {example!r}: one of {report.EXAMPLES}, or a check "
                f"named {' or '.join(p + '*' for p in report.NAMED_FIGURES)}"
            )
        if record.RECORD_FILE.is_file():
            self.env.note_dependency(str(record.RECORD_FILE))
        node = nodes.container(classes=["guide-gpu-stamp"])
        text = record.stamp(example)
        self.state.nested_parse(StringList(text.splitlines()), self.content_offset, node)
        return [node]


def setup(app) -> None:
    app.add_directive("guide-gpu-stamp", GpuStampDirective)
