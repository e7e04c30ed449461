"""Shared figures: one image grid for every data set page, one grouped bar chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas


def grouped_bars(ax, groups: Sequence[str], series: dict[str, Sequence[float]]) -> None:
    """Bars of each series side by side within each group, centred on the group's
    tick (the kernels' and the inference sweep's comparisons)."""
    width = 0.8 / max(1, len(series))
    pos = np.arange(len(groups))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(pos + (i - (len(series) - 1) / 2) * width, values, width, label=label)
    ax.set_xticks(pos, list(groups))


def image_grid(
    images,
    labels,
    class_names=None,
    ncols: int = 5,
    title: str | None = None,
    cmap: str | None = None,
    size: float = 1.6,
):
    """Show ``images`` (N,H,W) or (N,H,W,C) uint8/float, or (N,C,H,W) tensors, in a grid
    with their class names underneath. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    imgs = np.asarray(images)
    if imgs.ndim == 4 and imgs.shape[1] in (1, 3) and imgs.shape[-1] not in (1, 3):
        imgs = imgs.transpose(0, 2, 3, 1)  # NCHW -> NHWC
    if imgs.ndim == 4 and imgs.shape[-1] == 1:
        imgs = imgs[..., 0]
    n = len(imgs)
    nrows = max(1, int(np.ceil(n / ncols)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows + 0.4))
    for i, ax in enumerate(np.atleast_1d(axes).ravel()):
        ax.axis("off")
        if i >= n:
            continue
        img = imgs[i]
        if img.dtype != np.uint8:
            lo, hi = float(img.min()), float(img.max())
            img = (img - lo) / (hi - lo) if hi > lo else img * 0
        ax.imshow(img, cmap=cmap or ("gray" if img.ndim == 2 else None))
        label = int(labels[i])
        ax.set_title(class_names[label] if class_names else str(label), fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_history(
    frame: pandas.DataFrame,
    *,
    loss: Sequence[str] = ("loss", "val_loss"),
    accuracy: Sequence[str] = ("accuracy", "val_accuracy"),
    ax=None,
    title: str | None = None,
):
    """Plot loss and accuracy per epoch from a history frame; returns the Figure.

    ``loss`` and ``accuracy`` name the (train, validation) columns; columns that
    are missing or all-NaN are left out. Without ``ax``: two side-by-side
    subplots. With ``ax``: loss on ``ax`` and accuracy on a twin y-axis.
    """
    import matplotlib.pyplot as plt

    def present(cols: Sequence[str]) -> list[str]:
        return [c for c in cols if c in frame and frame[c].notna().any()]

    def label(col: str) -> str:
        text = col.replace("_", " ")
        return text if text.startswith(("train", "val")) else f"train {text}"

    loss_cols, acc_cols = present(loss), present(accuracy)
    epochs = frame["epoch"] if "epoch" in frame else range(1, len(frame) + 1)
    if ax is None:
        fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    else:
        fig, ax_loss = ax.figure, ax
        ax_acc = ax.twinx() if acc_cols else None

    styles = {0: {"marker": "o"}, 1: {"marker": "s", "linestyle": "--"}}
    for i, col in enumerate(loss_cols):
        ax_loss.plot(epochs, frame[col], label=label(col), **styles[min(i, 1)])
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("loss")
    if ax_acc is not None:
        for i, col in enumerate(acc_cols):
            ax_acc.plot(
                epochs,
                frame[col],
                label=label(col),
                color=f"C{i + 2}",
                **styles[min(i, 1)],
            )
        ax_acc.set_ylabel("accuracy")
        ax_acc.set_xlabel("epoch")
    if len(frame):
        # integer epochs on the x axis
        from matplotlib.ticker import MaxNLocator

        for a in (ax_loss, ax_acc):
            if a is not None:
                a.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ax is None:
        ax_loss.set_title("loss")
        ax_acc.set_title("accuracy")
        if loss_cols:
            ax_loss.legend()
        if acc_cols:
            ax_acc.legend()
        else:
            ax_acc.set_visible(False)
        if title:
            fig.suptitle(title)
    else:
        handles, labels = ax_loss.get_legend_handles_labels()
        if ax_acc is not None:
            h2, l2 = ax_acc.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        if handles:
            # Below the axes: the falling loss and the rising accuracy cross, so
            # a legend inside would cover one of them.
            below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "frameon": False}
            ax_loss.legend(handles, labels, ncol=len(handles), **below)
        if title:
            ax_loss.set_title(title)
    return fig


# --------------------------------------------------------------------------- devices


def plot_training_sweep(result, title: str | None = None):
    """A training sweep's (:class:`rocm_dl_guide.training.training_speed.Sweep`)
    throughput and busy fraction against the batch size, a line per variant;
    returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    key = result.rate_key
    for variant in dict.fromkeys(r["variant"] for r in result.measured()):
        rows = sorted((r for r in result.measured() if r["variant"] == variant),
                      key=lambda r: r["batch"])  # fmt: skip
        style = "o-" if len(rows) > 1 else "s"
        batches = [r["batch"] for r in rows]
        left.plot(batches, [r[key] for r in rows], style, label=variant)
        if any(r["busy_fraction"] is not None for r in rows):
            busy = [r["busy_fraction"] for r in rows]
            right.plot(batches, [100 * b if b is not None else None for b in busy], style,
                       label=variant)  # fmt: skip
    from matplotlib.ticker import NullLocator, ScalarFormatter

    ticks = sorted({r["batch"] for r in result.measured()})
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("batch size")
        ax.grid(alpha=0.3)
    left.set_ylabel(f"{result.unit} per second")
    left.legend(fontsize=8)
    right.set_ylabel("GPU busy (% of wall time)")
    right.set_ylim(0, 105)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
