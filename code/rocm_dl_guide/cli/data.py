"""The ``data`` commands: ``data list``, ``data fetch NAME``, ``data import NAME ARCHIVE``.

``data fetch`` also downloads the language-model chapter's pinned Hugging Face Hub
snapshots (:mod:`rocm_dl_guide.lm.hub`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rocm_dl_guide.cli.common import fail, print_help_and_exit_2
from rocm_dl_guide.core.messages import one_line


def _cmd_data_list(args: argparse.Namespace) -> int:
    from rocm_dl_guide.core import dataset_registry, datasets

    entries = datasets.cached()
    print(f"Data cache: {datasets.cache_dir()}  (set ${datasets.ENV_VAR} to move it)")
    if entries:
        print(f"{'NAME':<18} {'KIND':<8} {'SIZE':>9}  PATH")
        for e in entries:
            size = dataset_registry.human_size(e["size"])
            print(f"{e['name']:<18} {e['kind']:<8} {size:>9}  {e['path']}")
    else:
        print("Nothing cached yet.")
    have_real = {e["name"] for e in entries if e["kind"] == "real"}
    missing = [n for n in dataset_registry.REGISTRY if n not in have_real]
    if missing:
        print("\nReal data not downloaded (python -m rocm_dl_guide data fetch NAME):")
        for n in missing:
            spec = dataset_registry.REGISTRY[n]
            print(f"  {n:<18} {dataset_registry.human_size(spec.download_size):>9}  {spec.title}")
    return 0


def _data_command(command: str, action, expected: tuple[type[BaseException], ...]) -> int:
    """Run ``action()`` (which returns a prepared root) for ``data fetch``/``data import``.

    Prints the root (exit 0); an unknown data-set name is exit 2, the
    ``expected`` errors exit 1, anything else exit 1 with its type named; always
    one line on stderr, never a traceback.
    """
    from rocm_dl_guide.core import dataset_registry

    try:
        root = action()
    except dataset_registry.UnknownDatasetError as exc:
        return fail(command, exc, 2)
    except expected as exc:
        return fail(command, exc)
    except Exception as exc:  # noqa: BLE001 - a command line prints one line, not a traceback
        return fail(command, f"unexpected {type(exc).__name__}: {one_line(exc)}")
    print(root)
    return 0


def _cmd_data_fetch(args: argparse.Namespace) -> int:
    from rocm_dl_guide.core import archives, datasets

    expected = (
        datasets.DataUnavailableError,
        archives.ChecksumError,
        archives.ArchiveError,
        OSError,
    )
    from rocm_dl_guide.lm import hub

    if args.name in hub.SNAPSHOTS:  # the language-model chapter's pinned Hub snapshots
        return _data_command("data fetch", lambda: hub.fetch(hub.SNAPSHOTS[args.name]), expected)
    return _data_command("data fetch", lambda: datasets.fetch(args.name), expected)


def _cmd_data_import(args: argparse.Namespace) -> int:
    from rocm_dl_guide.core import archives, datasets

    expected = (archives.ChecksumError, archives.ArchiveError, OSError)
    return _data_command(
        "data import", lambda: datasets.import_archive(args.name, Path(args.archive)), expected
    )


def register(sub) -> None:
    """``data {list,fetch,import}``: errors are one line on stderr (exit 1, or 2 for an
    unknown data-set name); ``data`` alone prints its help and exits 2."""
    from rocm_dl_guide.core import dataset_registry, datasets
    from rocm_dl_guide.lm import hub

    names = ", ".join(dataset_registry.REGISTRY)
    fetchable = ", ".join([*dataset_registry.REGISTRY, *hub.SNAPSHOTS])
    parser = sub.add_parser(
        "data",
        help="list, download or import the guide's data sets",
        description="The guide's data sets: list the cache, download and verify a real data "
        f"set, or import one downloaded elsewhere. Cache: ${datasets.ENV_VAR} or the OS cache.",
    )
    data_sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    p = data_sub.add_parser("list", help="the cache directory and the data sets in it")
    p.set_defaults(func=_cmd_data_list)

    p = data_sub.add_parser(
        "fetch", help="download, verify and extract a real data set (or a pinned Hub snapshot)"
    )
    p.add_argument("name", metavar="NAME", help=f"one of: {fetchable}")
    p.set_defaults(func=_cmd_data_fetch)

    p = data_sub.add_parser(
        "import", help="install a data set from a file downloaded elsewhere (no network)"
    )
    p.add_argument("name", metavar="NAME", help=f"one of: {names}")
    p.add_argument(
        "archive",
        metavar="ARCHIVE",
        help="the upstream archive (for mnist/fashion-mnist: a directory or archive holding "
        "the four .gz files)",
    )
    p.set_defaults(func=_cmd_data_import)

    parser.set_defaults(func=print_help_and_exit_2(parser))
