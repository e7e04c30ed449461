"""The setup commands: ``doctor``, ``profiles``, ``compat`` and ``check-sources``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_dl_guide.cli.common import fail


def _read_log(path: str | None) -> dict | None | int:
    """The reader's log for ``--log`` (``{"source", "text"}``), or exit status 2."""
    from rocm_dl_guide.doctor import logs

    if path is None:
        return None
    try:
        text, source = logs.load(path)
    except OSError as exc:
        print(f"doctor: cannot read the log {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return {"source": source, "text": text}


def _read_smi(path: str | None) -> dict | None | int:
    """The amd-smi/rocm-smi output for ``--smi`` (``{"source", "text"}``), or exit
    status 2 with one sentence: unreadable, empty, or nothing doctor can read."""
    from rocm_dl_guide.doctor import logs, smi

    if path is None:
        return None
    try:
        text, source = logs.load(path)
    except OSError as exc:
        print(f"doctor: cannot read the smi output {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not text.strip():
        print(f"doctor: {source}: the smi output is empty", file=sys.stderr)
        return 2
    if smi.read(text).empty:
        print(
            f"doctor: {source}: no amd-smi or rocm-smi output doctor can read (it reads: "
            + "; ".join(smi.KNOWN_FORMATS)
            + ")",
            file=sys.stderr,
        )
        return 2
    return {"source": source, "text": text}


def _with_log(report, log: dict | None, smi: dict | None = None):
    from dataclasses import replace

    from rocm_dl_guide import doctor

    extra = {k: v for k, v in (("log", log), ("smi", smi)) if v}
    return doctor.check_system(replace(report.system, **extra)) if extra else report


def _cmd_doctor(args: argparse.Namespace) -> int:
    from rocm_dl_guide import doctor
    from rocm_dl_guide.core import files
    from rocm_dl_guide.doctor import snapshot

    log = _read_log(args.log)
    if isinstance(log, int):
        return log
    smi = _read_smi(args.smi)
    if isinstance(smi, int):
        return smi
    if args.snapshot:
        if args.rocminfo or args.python:
            print(
                "doctor: --snapshot replays a snapshot as it is: no --rocminfo or --python",
                file=sys.stderr,
            )
            return 2
        try:
            report = _with_log(doctor.from_snapshot(args.snapshot), log, smi)
        except snapshot.SnapshotError as exc:
            print(f"doctor: {exc}", file=sys.stderr)
            return 2
        print(report.to_json() if args.json else report.to_text())
        return 0
    text = source = None
    if args.rocminfo:
        path = Path(args.rocminfo)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            print(f"doctor: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        source = f"saved rocminfo output {path.name}"
    if not args.json:
        print(
            "Checking ROCm, the GPUs and the frameworks (each framework is imported in a "
            "separate process; this takes a few seconds)...",
            file=sys.stderr,
        )
    ran = doctor.run(
        rocminfo_text=text, rocminfo_source=source, python=args.python, run_smi=smi is None
    )
    report = _with_log(ran, log, smi)
    if args.collect:
        try:
            path = snapshot.write(args.collect, report.system)
        except files.DiskFullError as exc:
            return fail("doctor", exc)
        except OSError as exc:
            print(f"doctor: cannot write {args.collect}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(
            f"snapshot written to {path} (replay it with: doctor --snapshot {path})",
            file=sys.stderr,
        )
    print(report.to_json() if args.json else report.to_text())
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from rocm_dl_guide.core import profiles

    try:
        current = profiles.current()
    except profiles.ProfileError as exc:
        where = f"${profiles.ENV_VAR} or ${profiles.DATA_SOURCE_VAR}"
        print(f"profiles: {exc} (from {where})", file=sys.stderr)
        return 2
    for p in profiles.PROFILES.values():
        mark = "*" if p.name == current.name else " "
        print(f"{mark} {p.name:<6} {p.description}")
    print(f"\nSelect one with {profiles.ENV_VAR}=NAME (now: {current.name}).")
    print(
        f"Data: {current.source_note()}; choose with "
        f"{profiles.DATA_SOURCE_VAR}=real|fixtures or --data-source."
    )
    return 0


def _cmd_compat(args: argparse.Namespace) -> int:
    from rocm_dl_guide.doctor import compat, compat_data

    if args.framework == "gpus":
        table = compat.gpu_table()
    elif args.framework == "apus":
        table = compat.apu_table()
    elif args.framework == "driver":
        table = compat.kernel_driver_table()
    else:
        table = compat.framework_table(args.framework)
    print(table.to_string(index=False))
    keys = set(table.get("Source", []))
    if args.framework in compat_data.FRAMEWORKS:
        # The rows' other source fields: the framework's field source and the
        # sources of disagreeing values (shown inside the cells).
        for rocm in table["ROCm"]:
            rel = compat_data.find_release(rocm) or {}
            keys.add(compat_data.field_source(rel, args.framework))
            keys.update(a.get("source") for a in compat_data.alternatives(rel, args.framework))
    print("\nSources:")
    for key in sorted(k for k in keys if k):
        src = compat_data.sources().get(key, {})
        print(f"  {key}: {src.get('title', '?')} <{src.get('url', '?')}>")
    return 0


def _cmd_check_sources(args: argparse.Namespace) -> int:
    """Exit 0: every source current; 1: something is stale; 2: a malformed
    $ROCM_DL_GUIDE_SOURCES_BASE or --timeout; 3: the network is unreachable."""
    from rocm_dl_guide.doctor import freshness

    if args.timeout <= 0:
        return fail("check-sources", "--timeout must be positive", 2)
    try:
        rewrite = freshness.rewrites_from_env()
    except ValueError as exc:
        return fail("check-sources", exc, 2)
    print("Checking the compatibility data's sources (needs the network) ...", file=sys.stderr)
    try:
        report = freshness.check_sources(rewrite=rewrite, timeout=args.timeout)
    except freshness.NetworkUnavailable as exc:
        return fail("check-sources", exc, 3)
    for note in report.notes:
        print(f"note: {note.key}: {note.detail}" + (f" <{note.url}>" if note.url else ""))
    if report.current:
        print(f"all {report.sources} sources current")
        return 0
    print(f"STALE: {len(report.stale)} problem(s) in the compatibility data's sources:")
    for f in report.stale:
        print(f"  [{f.kind}] {f.key}  {f.url}\n      {f.detail}")
    return 1


def _add_doctor(sub) -> None:
    p = sub.add_parser("doctor", help="check ROCm, GPUs and frameworks against the guide's data")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--rocminfo",
        metavar="FILE",
        help="read saved `rocminfo` output from FILE instead of running rocminfo",
    )
    p.add_argument(
        "--python",
        metavar="PATH",
        help="probe the frameworks of another Python interpreter (default: this one)",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="also read the error text you saw (a log or a copied traceback; - for standard "
        "input) and explain the messages doctor knows; --collect keeps it in the snapshot",
    )
    p.add_argument(
        "--smi",
        metavar="FILE",
        help="read saved amd-smi or rocm-smi output (static --partition, list, partition, "
        "topology; rocm-smi --showbus, --showcomputepartition, --showmemorypartition, "
        "--showtopo; - for standard input) instead of running amd-smi/rocm-smi here, and "
        "explain the GPU partitions; --collect keeps it",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--collect",
        metavar="FILE",
        help="also write everything the checks read to FILE (JSON), to attach to a bug report",
    )
    group.add_argument(
        "--snapshot",
        metavar="FILE",
        help="run every check on a snapshot written by --collect instead of on this machine",
    )
    p.set_defaults(func=_cmd_doctor)


def register(sub) -> None:
    """``doctor``, ``profiles``, ``compat`` and ``check-sources``."""
    _add_doctor(sub)

    p = sub.add_parser("profiles", help="list the run profiles and the one in force")
    p.set_defaults(func=_cmd_profiles)

    p = sub.add_parser("compat", help="print the sourced ROCm compatibility tables")
    p.add_argument(
        "framework",
        choices=["pytorch", "tensorflow", "onnxruntime", "migraphx", "gpus", "apus", "driver"],
        help="which table",
    )
    p.set_defaults(func=_cmd_compat)

    p = sub.add_parser(
        "check-sources",
        help="check that the compatibility data's sources still say what it cites (network)",
        description="Fetch every source the compatibility data cites and check its recorded "
        "facts; look for ROCm releases, rocm/pytorch tags and PyTorch ROCm wheel indexes "
        "newer than the data knows. Exit 0 when current, 1 when stale, 3 when offline. "
        "URL prefixes can be redirected with $ROCM_DL_GUIDE_SOURCES_BASE (a JSON object).",
    )
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per request (default 20)")
    p.set_defaults(func=_cmd_check_sources)
