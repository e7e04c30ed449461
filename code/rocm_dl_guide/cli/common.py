"""What the command modules share: one-line errors, the run profile, argparse types.

Each command module (``setup``, ``train``, ``data``, ``inference``, ``bench``,
``trace``, ``selfcheck``) registers its parsers and handlers; a handler prints
its result, or one line ``COMMAND: message`` on stderr, and returns the exit
code (0 success, 1 failure, 2 a usage error such as an unknown name). A handler
can also raise :class:`CommandError`, which :func:`rocm_dl_guide.cli.main`
prints the same way; so it does a :class:`rocm_dl_guide.core.files.DiskFullError`
that a handler let through (a full disk: the file, the space left, what is
intact, what to do), exit code 1.
"""

from __future__ import annotations

import argparse
import sys

from rocm_dl_guide.core.messages import one_line

PROFILE_HELP = "smoke, gpu or full (default: $ROCM_DL_GUIDE_PROFILE or auto)"
DATA_SOURCE_HELP = (
    "real (real data sets, pretrained weights; downloads) or fixtures (generated offline "
    "fixtures, random weights); default: $ROCM_DL_GUIDE_DATA_SOURCE or the profile's own"
)


class CommandError(Exception):
    """A command's one-line error: ``main`` prints ``command: message`` on
    stderr and exits with ``code``."""

    def __init__(self, command: str, message: BaseException | str, code: int = 1) -> None:
        super().__init__(one_line(message))
        self.command = command
        self.code = code


def fail(command: str, exc: BaseException | str, code: int = 1) -> int:
    """Print ``command: message`` on one line on stderr; return ``code``."""
    print(f"{command}: {one_line(exc)}", file=sys.stderr)
    return code


def run_profile(command: str, name: str | None):
    """The run profile in force (``--profile NAME``, else the environment's or
    the default), as a :class:`~rocm_dl_guide.core.profiles.Profile`.

    Raises :class:`CommandError` (exit 2, ``command: message``) for an unknown
    profile or data source. Every command with ``--profile`` resolves it here.
    """
    from rocm_dl_guide.core import profiles

    try:
        return profiles.current(name)
    except profiles.ProfileError as exc:
        raise CommandError(command, exc, 2) from exc


def add_profile_args(p: argparse.ArgumentParser) -> None:
    """``--profile`` and ``--data-source``, for the commands that load data or weights."""
    p.add_argument("--profile", help=PROFILE_HELP)
    p.add_argument("--data-source", choices=("real", "fixtures"), help=DATA_SOURCE_HELP)


def _int_at_least(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    return _int_at_least(text, 0)


def print_help_and_exit_2(parser: argparse.ArgumentParser):
    """A handler for a command group called without its subcommand (``data``,
    ``bench``): its help on stderr, exit code 2."""

    def handler(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return handler
