"""PyTorch's own CPU int8 (PT2E, X86InductorQuantizer, Inductor): it quantizes,
its compiled model runs oneDNN's int8 convolutions, it follows the fp32 model,
and what it cannot do is one clear sentence."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
import torch
from torch import nn

from rocm_dl_guide.optimization import precision, pt2e


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 16, 16), dtype=np.float32)


def test_pt2e_int8_compiles_to_int8_convolutions_and_follows_fp32():
    from torch._dynamo.utils import counters

    model = _net()
    quantized = pt2e.quantize(model, [_images(32, 1), _images(5, 2)])
    targets = {str(n.target) for n in quantized.graph.nodes if n.op == "call_function"}
    assert any("quantize_per_tensor" in t for t in targets), targets
    counters.clear()
    run = pt2e.compiled(quantized)
    x = _images(8, 3)  # not a calibration image
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    out = run(x)
    # Inductor matched both convolutions into oneDNN's int8 convolution: the
    # model runs int8 kernels, not fp32 arithmetic with rounding in between.
    assert counters["inductor"]["qconv_weight_prepack_matcher_count"] == 2
    assert out.shape == ref.shape == (8, 10)
    spread = float(ref.max() - ref.min())
    assert np.abs(out - ref).max() < 0.1 * spread
    # Another batch size runs too (the batch dimension is exported free).
    assert run(_images(3, 4)).shape == (3, 10)


def test_pt2e_refuses_to_calibrate_on_nothing():
    with pytest.raises(pt2e.Pt2eError, match="at least one calibration image"):
        pt2e.quantize(_net(), [])
    with pytest.raises(pt2e.Pt2eError, match="at least one calibration image"):
        pt2e.quantize(_net(), [np.zeros((0, 3, 16, 16), np.float32)])


def test_without_torchao_pytorch_int8_is_skipped_with_the_reason(monkeypatch):
    real_import = builtins.__import__

    def no_torchao(name, *args, **kwargs):
        if name.startswith("torchao"):
            raise ImportError("No module named 'torchao'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torchao)
    why = precision.skipped([("torch.compile", "int8")], {"avx2"})
    assert "torchao's PT2E quantization does not import" in why["torch.compile int8"]
    with pytest.raises(pt2e.Pt2eError, match="torchao"):
        pt2e.quantize(_net(), [_images(2, 0)])


@pytest.mark.parametrize(
    "flags, reduced", [({"avx2", "fma"}, True), ({"avx2", "avx512f", "avx512_vnni"}, False)]
)
def test_pytorch_int8_keeps_activations_to_7_bits_without_vnni(flags, reduced, monkeypatch):
    seen = {}

    def fake_quantize(model, batches, reduce_range=False):
        seen["reduce_range"] = reduce_range
        return model

    monkeypatch.setattr(pt2e, "quantize", fake_quantize)
    engine = precision.pt2e_engine(_net(), [_images(2, 0)], flags)
    assert seen["reduce_range"] is reduced
    assert engine.key == "torch.compile int8"
    assert ("reduce_range" in engine.note) is reduced


def test_importing_the_flow_keeps_pytorchs_notices_about_torchao_off_the_page(caplog):
    import logging

    from rocm_dl_guide.core import messages

    messages.quiet_log_notice("rocm_dl_guide.test.notice", "is an Enum subclass")
    log = logging.getLogger("rocm_dl_guide.test.notice")
    with caplog.at_level(logging.WARNING, logger="rocm_dl_guide.test.notice"):
        log.warning("<enum 'X'> is an Enum subclass and is now natively supported")
        log.warning("a notice that matters")
    assert [r.getMessage() for r in caplog.records] == ["a notice that matters"]
    messages.quiet_log_notice("rocm_dl_guide.test.notice", "is an Enum subclass")
    assert len(log.filters) == 1  # a second call for the same notice adds nothing
    # the two notices importing torchao logs are filtered on PyTorch's own loggers,
    # once each although both the lm package and pt2e ask for it
    import rocm_dl_guide.lm  # noqa: F401
    from rocm_dl_guide.optimization import pt2e  # noqa: F401

    for name, _ in messages.TORCHAO_NOTICES:
        assert len(logging.getLogger(name).filters) == 1, name


def test_inductor_freezing_is_on_inside_the_block_only():
    import torch._inductor.config as inductor_config

    from rocm_dl_guide.optimization.inductor import freezing

    before = inductor_config.freezing
    with freezing():
        assert inductor_config.freezing is True
    assert inductor_config.freezing == before
    with freezing(on=False):
        assert inductor_config.freezing == before
