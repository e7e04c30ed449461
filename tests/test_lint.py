"""The package and tests stay clean under the project's ruff configuration."""

import subprocess

from conftest import ROOT, tool


def test_ruff_check_is_clean():
    proc = subprocess.run(
        [tool("ruff"), "check", "code", "tests", "_ext", "--output-format", "concise"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
