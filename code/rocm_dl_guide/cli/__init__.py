"""The guide's command line: ``python -m rocm_dl_guide COMMAND``.

The only place that builds argparse parsers and turns exceptions into messages
and exit codes. The modules behind the commands (``doctor``, ``datasets``,
``inference``, ``bench`` ...) expose plain functions that return values or
raise; the command modules here register the parsers of one command group
each (``register(subparsers)``) and hold its handlers, which print the result,
or one line ``COMMAND: message`` on stderr, and return the exit code (0
success, 1 failure, 2 a usage error such as an unknown name):

- :mod:`.setup`: ``doctor``, ``profiles``, ``compat``, ``check-sources``;
- :mod:`.train`: ``train``;
- :mod:`.data`: ``data list|fetch|import``;
- :mod:`.inference`: ``infer``, ``export``;
- :mod:`.lm`: ``generate``, ``serve`` (the language-model chapter's model);
- :mod:`.bench`: ``bench inference|precision|conv|llm|kernels``;
- :mod:`.trace`: ``trace training|inference`` (torch.profiler; alias ``profile``);
- :mod:`.selfcheck`: ``selfcheck``;

and :mod:`.common` what they share (one-line errors, the run profile, argparse
types).
"""

from __future__ import annotations

import argparse
import os
import sys

from rocm_dl_guide import __version__
from rocm_dl_guide.cli import bench, data, inference, lm, selfcheck, setup, trace, train
from rocm_dl_guide.cli.common import CommandError, fail
from rocm_dl_guide.core.files import DiskFullError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rocm_dl_guide",
        description="Examples and checks from the executable ROCm Deep Learning Guide.",
    )
    parser.add_argument("--version", action="version", version=f"rocm_dl_guide {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (setup, train, data, inference, lm, bench, trace, selfcheck):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "data_source", None):
        # Through the environment, so that torchrun's workers and every
        # profiles.current() in this process see it too.
        from rocm_dl_guide.core import profiles

        os.environ[profiles.DATA_SOURCE_VAR] = args.data_source
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return code
    except CommandError as exc:
        return fail(exc.command, exc, exc.code)
    except DiskFullError as exc:  # any writer, where the handler did not catch it
        return fail(args.command, exc)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): no traceback. Point stdout at
        # devnull so the interpreter's final flush cannot fail again, and exit
        # 141 (128 + SIGPIPE), as a shell tool killed by SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
