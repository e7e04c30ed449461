"""Attention kernels: the backends agree with the math reference, the math path's
memory grows with the square of the length and the fused kernel's does not."""

from __future__ import annotations

import pytest
import torch

from rocm_dl_guide.lm import attention

CPU = torch.device("cpu")


def test_the_flash_kernel_agrees_with_the_math_reference():
    for n in (64, 333, 1024):  # 333: not a multiple of any block size
        q, k, v = attention.inputs(n)
        math_out = attention.attend(q, k, v, "math")
        flash_out = attention.attend(q, k, v, "flash")
        diff = (math_out - flash_out).abs().max().item()
        assert 0 <= diff <= attention.TOLERANCE[torch.float32], (n, diff)
        # causal: the first position attends only to itself
        assert torch.allclose(math_out[..., 0, :], v[..., 0, :], atol=1e-6)


def test_math_memory_grows_with_the_square_and_flash_memory_does_not():
    rows = attention.measure((512, 1024, 2048), CPU, backends=("math", "flash"), iterations=1)
    by = {(r.backend, r.seq_len): r for r in rows}
    if by[("math", 2048)].peak_mb is None:
        pytest.skip("peak memory is measured through /proc on Linux only")
    # the math path holds at least one score matrix per head: 8 x 2048 x 2048 floats
    assert by[("math", 2048)].peak_mb >= attention.score_matrix_mb(2048)
    assert attention.growth(rows, "math") > 3.0  # ~4 per doubling
    assert attention.growth(rows, "flash") < 2.5  # ~2 per doubling: linear
    assert by[("flash", 2048)].peak_mb < by[("math", 2048)].peak_mb / 10
    assert attention.agree(rows, torch.float32)
    assert all(r.ms > 0 for r in rows)


def test_a_backend_the_device_lacks_gets_a_row_that_says_why():
    ok, why = attention.supported("efficient", CPU, torch.float32)
    assert not ok and why.startswith("efficient attention does not run on cpu")
    rows = attention.measure((128,), CPU, backends=("math", "efficient"), iterations=1)
    (skipped,) = [r for r in rows if r.backend == "efficient"]
    assert skipped.ms is None and skipped.note == why
    with pytest.raises(ValueError, match="unknown attention backend 'naive'"):
        attention.sdpa_backend("naive")


def test_the_backend_sdpa_picks_is_named():
    assert attention.default_backend(CPU, torch.float32) in (*attention.BACKENDS, "unknown")


def test_the_pages_table_and_plot_show_every_measured_backend():
    rows = [
        attention.Row("math", n, 1.0 * n, 0.5 * n, 0.0 if i else None)
        for i, n in enumerate((256, 512))
    ] + [attention.Row("flash", n, 0.5 * n, 0.1 * n, 1.1e-6) for n in (256, 512)]
    rows.append(attention.Row("efficient", 256, None, None, None, note="GPUs only"))
    table = attention.frame(rows)
    assert set(table["backend"]) == {"math", "flash"}  # not the one that did not run
    shown = attention.wide(table)
    assert shown.loc[512, ("ms", "flash")] == 256.0
    assert shown.loc[512, ("max_abs_diff", "flash")] == "1.1e-06"  # not rounded to 0.0
    fig = attention.plot(table, torch.float32, "a CPU")
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "log"]
    assert len(fig.axes[0].lines) == 2 and "float32, a CPU" in fig._suptitle.get_text()
