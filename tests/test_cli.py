"""The command line's own behaviour (rocm_dl_guide.cli): the parser's commands
and flags, argparse's usage errors, the run profile resolved once per command,
and the exit codes of ``main``. Parse-only or in-process, nothing heavy runs;
the commands' work is tested next to their modules (test_inference,
test_precision, test_tuning, test_profiling, test_datasets ...)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from rocm_dl_guide import cli
from rocm_dl_guide.cli import common
from rocm_dl_guide.core import profiles

COMMANDS = (
    "doctor",
    "profiles",
    "compat",
    "check-sources",
    "train",
    "data",
    "infer",
    "export",
    "bench",
    "trace",
    "selfcheck",
)


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main(argv)`` must stop in argparse with exit code 2; its stderr."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_every_command_is_registered(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.build_parser().parse_args(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"    {name}" in out, name
    assert "trace (profile)" in out  # the old name, as an alias


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["bench", "precision", "--batch", "4"], "--batch"),  # not read as --batches 4
        (["bench", "conv", "--tuning"], "--tuning"),
        (["bench", "conv", "--threads", "2"], "--threads"),
        (["bench", "inference", "--baseline", "before.json"], "--baseline"),
        (["bench", "inference", "--emulated"], "--emulated"),
    ],
)
def test_a_bench_flag_of_another_subcommand_is_a_usage_error(argv, flag, capsys):
    err = _usage_error(argv, capsys)
    assert "unrecognized arguments" in err and flag in err, err


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["bench", "inference", "--batch", "0"], "argument --batch: must be at least 1, got 0"),
        (["bench", "conv", "--warmup", "-1"], "argument --warmup: must be at least 0, got -1"),
        (["bench", "precision", "--iterations", "x"], "argument --iterations: expected an integer"),
        (["bench", "precision", "--batches", "1,0"], "expected batch sizes like 1,8,32"),
        (["trace", "training", "--steps", "0"], "argument --steps: must be at least 1"),
        (["infer", "--model", "m", "--image", "i", "--top", "0"], "argument --top"),
    ],
)
def test_bounds_are_argparse_types(argv, text, capsys):
    err = _usage_error(argv, capsys)
    assert text in err, err


def test_bench_alone_prints_its_help_and_exits_2(capsys):
    assert cli.main(["bench"]) == 2
    err = capsys.readouterr().err
    for name in ("inference", "precision", "conv"):
        assert name in err


def test_bench_defaults():
    parser = cli.build_parser()
    conv = parser.parse_args(["bench", "conv"])
    assert conv.batch is None  # the workload's own default
    inference = parser.parse_args(["bench", "inference"])
    assert inference.batch == 1 and inference.backend == "auto" and not inference.tuning
    precision = parser.parse_args(["bench", "precision"])
    assert precision.batches == (1, 8, 32) and not precision.emulated
    assert len({conv.func, inference.func, precision.func}) == 3


def test_trace_help_and_the_profile_alias(capsys):
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["trace", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "torch.profiler" in out and "{training,inference}" in out
    new = parser.parse_args(["trace", "inference", "--steps", "5", "--json"])
    old = parser.parse_args(["profile", "inference", "--steps", "5", "--json"])
    assert old.func is new.func
    assert (
        (old.kind, old.steps, old.json) == (new.kind, new.steps, new.json) == ("inference", 5, True)
    )


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("export", ["export", "--output", "out"]),
        ("trace", ["trace", "training"]),
        ("bench", ["bench", "conv"]),
        ("train", ["train", "cifar10"]),
    ],
)
def test_an_unknown_profile_is_one_line_exit_2(command, argv, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main([*argv, "--profile", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"{command}: unknown profile 'nope': choose one of smoke, gpu, full\n"
    assert not (tmp_path / "out").exists()


def test_data_source_is_exported_before_the_profile_is_resolved(capsys, monkeypatch):
    # setenv first, so that monkeypatch records the variable and removes what the
    # command exports when the test ends (delenv of an unset variable records nothing)
    monkeypatch.setenv(profiles.DATA_SOURCE_VAR, "unset")
    monkeypatch.delenv(profiles.DATA_SOURCE_VAR)
    monkeypatch.setenv(profiles.ENV_VAR, "nope")
    assert cli.main(["bench", "conv", "--data-source", "fixtures"]) == 2
    assert capsys.readouterr().err.startswith("bench: unknown profile 'nope'")
    assert os.environ[profiles.DATA_SOURCE_VAR] == "fixtures"


def test_keyboard_interrupt_exits_130(capsys, monkeypatch):
    def interrupted(name=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(profiles, "current", interrupted)
    assert cli.main(["profiles"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_closed_pipe_exits_141_without_a_traceback():
    script = (
        "import sys\n"
        "from rocm_dl_guide import cli\n"
        "from rocm_dl_guide.core import profiles\n"
        "def closed(name=None):\n"
        "    raise BrokenPipeError\n"
        "profiles.current = closed\n"
        "sys.exit(cli.main(['profiles']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_common_argparse_types():
    assert common.positive_int("3") == 3 and common.non_negative_int("0") == 0
    for parse, text in ((common.positive_int, "0"), (common.non_negative_int, "-1")):
        with pytest.raises(argparse.ArgumentTypeError, match="must be at least"):
            parse(text)
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer"):
        common.positive_int("1.5")


def test_command_error_is_printed_as_one_line(capsys):
    with pytest.raises(common.CommandError) as raised:
        common.run_profile("export", "nope")
    assert raised.value.code == 2 and raised.value.command == "export"
    assert common.fail("x", ValueError("two\n  lines"), 3) == 3
    assert capsys.readouterr().err == "x: two lines\n"


def _book_commands() -> list[tuple[str, list[str]]]:
    """(page, arguments) of every ``python -m rocm_dl_guide ...`` (also under
    torchrun or srun) in the bash blocks of the book's pages and the README:
    lines joined at a backslash, cut at a comment, a pipe or a redirection,
    shell variables replaced by a placeholder."""
    import re
    import shlex

    from conftest import ROOT

    found = []
    for page in [*sorted((ROOT / "book").rglob("*.md")), ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```(?:bash|console|shell)\n(.*?)```", text, flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].lstrip("$ ")
                if "-m rocm_dl_guide" not in line:
                    continue
                line = re.sub(r'"?\$\{?\w+\}?([^"\s]*)"?', r"PLACEHOLDER\1", line)
                words = shlex.split(line.split("|")[0].split(">")[0].split("&&")[-1])
                args = words[words.index("rocm_dl_guide") + 1 :]
                found.append((page.relative_to(ROOT).as_posix(), args))
    return found


def test_every_command_the_book_prints_parses(capsys):
    """Commands work as printed (issue 44): each ``python -m rocm_dl_guide ...``
    of the book and the README is one the package's parser accepts, so a
    renamed flag or command fails here, not in a reader's terminal."""
    parser = cli.build_parser()
    commands = _book_commands()
    assert len(commands) > 30 and any(a[:1] == ["serve"] for _, a in commands)
    refused = []
    for page, args in commands:
        if args in (["--help"], ["-h"]) or "--help" in args:
            continue
        try:
            parser.parse_args(args)
        except SystemExit:
            refused.append(f"{page}: python -m rocm_dl_guide {' '.join(args)}")
    assert not refused, "\n".join(refused)
