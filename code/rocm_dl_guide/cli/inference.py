"""The inference commands: ``infer`` (classify an image with a compiled model)
and ``export`` (Inception v3 in ONNX and its inputs for the C++ example)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rocm_dl_guide.cli.common import add_profile_args, fail, positive_int, run_profile


def _cmd_infer(args: argparse.Namespace) -> int:
    from rocm_dl_guide.casestudies import inception_pretrained
    from rocm_dl_guide.optimization import backends, inference, onnx_files

    try:
        backend = backends.select_backend(args.backend)
    except backends.BackendError as exc:
        return fail("infer", exc, 2)
    try:
        compiled, table = inference.classify(
            args.model, args.image, backend, args.top, args.size, args.threads
        )
    except (
        onnx_files.InferenceError,
        inception_pretrained.ImageError,
        OSError,
        RuntimeError,
    ) as exc:
        return fail("infer", exc)
    if args.json:
        record = {
            "backend": compiled.backend,
            "provider": compiled.provider,
            "device": compiled.device,
            "model": str(Path(args.model)),
            "image": str(args.image),
            "top": table.to_dict(orient="records"),
        }
        print(json.dumps(record))
        return 0
    print(compiled.summary())
    for row in table.itertuples():
        print(f"{row.rank}. {row.category:<30} {row.probability:7.2%}  (class {row.index})")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from rocm_dl_guide.optimization import cpp_example, onnx_files, ort_int8

    prof = run_profile("export", args.profile)
    try:
        files = cpp_example.write_cpp_inputs(args.output, prof)
        if args.int8:
            files["int8"], _, why = ort_int8.export_int8(files["model"], prof)
    except (onnx_files.InferenceError, OSError, RuntimeError, ValueError) as exc:
        return fail("export", exc)
    for key, path in files.items():
        print(f"{key:<9}{path}")
    if args.int8:
        print(f"int8 setting: {why}")
    return 0


def _add_infer(sub) -> None:
    from rocm_dl_guide.optimization.backends import BACKEND_CHOICES

    backends = ", ".join(BACKEND_CHOICES)
    p = sub.add_parser(
        "infer",
        help="classify one image with a compiled model (MIGraphX or ONNX Runtime)",
        description="Compile an ONNX model (or load a saved .mxr) and print the image's top "
        "classes.",
    )
    p.add_argument("--model", required=True, metavar="FILE", help=".onnx or .mxr model file")
    p.add_argument("--image", required=True, metavar="FILE", help="an image file (JPEG, PNG ...)")
    p.add_argument("--backend", default="auto", metavar="NAME", help=f"one of {backends}")
    p.add_argument(
        "--top", type=positive_int, default=5, help="how many classes to print (default 5)"
    )
    p.add_argument(
        "--size",
        type=positive_int,
        help="resize/crop the image to SIZE (default: the model's input)",
    )
    p.add_argument(
        "--threads", type=positive_int, help="CPU threads for ONNX Runtime (default: all)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_infer)


def register(sub) -> None:
    """``infer`` and ``export``."""
    _add_infer(sub)

    p = sub.add_parser(
        "export",
        help="export Inception v3 to ONNX with an input tensor for the C++ example",
        description="Write inception_v3.onnx, input.bin (the preprocessed sample photo, "
        "float32 1x3x299x299) and expected.bin (PyTorch's logits, float32 1x1000) into DIR.",
    )
    p.add_argument("--output", required=True, metavar="DIR", help="directory to write into")
    p.add_argument(
        "--int8",
        action="store_true",
        help="also write inception_v3.int8.onnx, quantized by ONNX Runtime with the int8 "
        "setting `bench precision` measured best on this CPU (its default types where none "
        "was measured; the output says which)",
    )
    add_profile_args(p)
    p.set_defaults(func=_cmd_export)
