"""The precision benchmark's result: one row per engine and batch size, as a
table, a plot and plain text, and the best int8 setting among its rows.

:class:`PrecisionBench` is what :func:`rocm_dl_guide.optimization.precision.run`
returns and what ``bench precision --json`` prints (:meth:`PrecisionBench.to_dict`).
Every speed-up in it is against :data:`REFERENCE`, PyTorch eager fp32.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from rocm_dl_guide.core.messages import count

REFERENCE = ("PyTorch eager", "fp32")
"""The engine every speed-up (``speedup_vs_eager_fp32``) and every agreement is
measured against."""

LEAST_SURE_COLUMN = "agreement, least sure 10%"
"""The column of agreement on the test images the fp32 model is least sure of
(:func:`rocm_dl_guide.optimization.agreement.least_sure`)."""

SAME_SPEED = 0.95
"""A matrix product at this share of fp32's speed or more counts as as fast in
the page's sentences (a 0.997x prints "1.00x")."""

LOGIT_COLUMN = "logit change (median)"
"""The column of how far an engine's logits moved from fp32's
(:func:`rocm_dl_guide.optimization.agreement.logit_change`)."""

WITH_INTERVAL = "top-1 agreement [95% interval]"
"""The agreement column of :meth:`PrecisionBench.display_frames`, its interval beside it."""

AGREEMENT_SLACK = 0.01
"""How much less top-1 agreement than the best int8 configuration's still counts
as as good when :meth:`PrecisionBench.best_int8` picks the fastest."""


@dataclass
class PrecisionBench:
    """What :func:`rocm_dl_guide.optimization.precision.run` returns;
    :meth:`to_dict` is the ``--json`` object."""

    rows: list[dict[str, Any]]
    """One per (backend, precision, batch): ``ms`` (median), ``speedup_vs_eager_fp32``,
    ``top1_agreement`` (with its 95% ``agreement_interval`` over ``test_images``),
    ``least_sure_agreement`` (on the ``least_sure_images`` the fp32 model is least
    sure of) and ``accuracy`` (on the trained CIFAR-10 network)."""
    machine: str
    threads: int
    cpu_flags: list[str]
    """The flags of :data:`rocm_dl_guide.optimization.ort_int8.CPU_FLAGS` this CPU has."""
    versions: dict[str, str]
    profile: str
    speed_model: str
    """Inception v3, and which weights."""
    agreement_model: str
    agreement_note: str
    """The trained network the agreement comes from, and on which data."""
    warmup: dict[int, int]
    iterations: dict[int, int]
    skipped: dict[str, str] = field(default_factory=dict)
    """``"backend precision"`` -> why it was not run on this machine."""
    matrix_speed: dict[str, float] = field(default_factory=dict)
    """Each format's speed at one square matrix product against fp32's
    (:func:`rocm_dl_guide.optimization.precision.matrix_speed`), of side
    :attr:`matrix_size`."""
    matrix_size: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["warmup"] = {str(k): v for k, v in self.warmup.items()}
        data["iterations"] = {str(k): v for k, v in self.iterations.items()}
        return data

    def frame(self):
        """The rows as a table for a page: one line per engine and batch size."""
        import pandas as pd

        table = pd.DataFrame(self.rows)
        for column in (
            "agreement_interval", "least_sure_agreement", "logit_change", "emulated", "runs",
        ):  # fmt: skip
            if column not in table:  # rows written before these were measured
                table[column] = None
        return pd.DataFrame(
            {
                "backend": table["backend"],
                "precision": table["precision"],
                "config": table["config"].map(lambda c: c["name"] if c else ""),
                "batch": table["batch"],
                "ms (median)": table["ms"],
                "vs eager fp32": table["speedup_vs_eager_fp32"],
                "top-1 agreement": table["top1_agreement"],
                "95% interval": table["agreement_interval"].map(_interval_text),
                LEAST_SURE_COLUMN: table["least_sure_agreement"],
                LOGIT_COLUMN: table["logit_change"],
                "accuracy": table["accuracy"],
                "instructions": [_how(r) for r in self.rows],
            }
        )

    def display_frame(self):
        """:meth:`frame` as a page shows it: figures as text (a speed-up as
        ``1.23x``, an agreement as a percentage, blank where none was measured),
        the int8 setting's column only where an int8 row has one, and after the
        rows one line per engine that did not run, saying why."""
        import pandas as pd

        shown = self.frame()
        formats = {
            "ms (median)": "{:.1f}",
            "vs eager fp32": "{:.2f}x",
            "top-1 agreement": "{:.1%}",
            LEAST_SURE_COLUMN: "{:.1%}",
            "accuracy": "{:.1%}",
        }
        for column, fmt in formats.items():
            shown[column] = shown[column].map(
                lambda v, f=fmt: "" if v is None or v != v else f.format(v)
            )
        shown[LOGIT_COLUMN] = shown[LOGIT_COLUMN].map(_small_percent)
        shown["batch"] = shown["batch"].map(str)
        missing = [
            {
                "backend": name.rsplit(" ", 1)[0],
                "precision": name.rsplit(" ", 1)[-1],
                "instructions": f"not run: {why}",
            }
            for name, why in self.skipped.items()
        ]
        if missing:
            shown = pd.concat([shown, pd.DataFrame(missing)], ignore_index=True).fillna("")
        if not shown["config"].astype(bool).any():
            shown = shown.drop(columns="config")
        return shown

    SPEED_COLUMNS = ("backend", "precision", "config", "batch", "ms (median)", "vs eager fp32")
    AGREEMENT_COLUMNS = (
        "backend", "precision", "config", WITH_INTERVAL, LEAST_SURE_COLUMN, LOGIT_COLUMN,
        "accuracy",
    )  # fmt: skip

    def display_frames(self):
        """:meth:`display_frame` split in two tables narrow enough to read: the
        speed per engine, format and batch size (with ``instructions``, and the
        engines that did not run), and the agreement per engine and format (it
        does not depend on the batch size: one row each)."""
        shown = self.display_frame()
        keep = [c for c in self.SPEED_COLUMNS if c in shown.columns] + ["instructions"]
        speed = shown[keep]
        measured = shown[shown["top-1 agreement"].astype(str) != ""].copy()
        # The interval beside its figure: one column less, so the table fits.
        measured[WITH_INTERVAL] = (
            measured["top-1 agreement"] + " " + measured["95% interval"]
        ).str.strip()
        cols = [c for c in self.AGREEMENT_COLUMNS if c in measured.columns]
        agreement = measured[cols].drop_duplicates(
            subset=[c for c in ("backend", "precision", "config") if c in cols]
        )
        return speed.reset_index(drop=True), agreement.reset_index(drop=True)

    def compiled_summary(self, batch: int = 1) -> str:
        """Sentences on ``torch.compile``'s floating-point rows at ``batch``: each
        one's speed against eager fp32 (bf16 with its agreement and accuracy), or
        why it was not run."""
        out, reasons = [], {}
        for prec in ("fp32", "bf16"):
            try:
                r = self.row("torch.compile", prec, batch)
            except KeyError:
                why = self.skipped.get(f"torch.compile {prec}")
                if why:
                    reasons.setdefault(why, []).append(prec)
                continue
            speed = f"{r['speedup_vs_eager_fp32']:.2f}x"
            text = f"torch.compile ran {prec} at {speed} eager fp32's speed"
            if prec != "fp32" and r.get("top1_agreement") is not None:
                text += (
                    f" and agreed with fp32 on {r['top1_agreement']:.1%} of the test images "
                    f"(accuracy {r['accuracy']:.1%})"
                )
            out.append(text + ".")
        out += [
            f"torch.compile {' and '.join(precs)} did not run: {why}."
            for why, precs in reasons.items()
        ]
        return " ".join(out)

    def emulated_rows(self, batch: int = 1) -> list[dict[str, Any]]:
        """The rows at ``batch`` of formats this CPU has no instructions for."""
        return [r for r in self.rows if r["batch"] == batch and r.get("emulated")]

    def emulation_summary(self, batch: int = 1) -> str:
        """Sentences on the 16-bit formats at ``batch`` as this CPU ran them:
        emulated (converted in software) or with its own instructions, each one's
        speed against eager fp32, and why a format with instructions can still be
        slower: :attr:`matrix_speed`, a bare matrix product's speed per format."""
        rows = [
            r
            for r in self.rows
            if r["batch"] == batch
            and r["precision"] in ("bf16", "fp16")
            and r.get("instructions") != "GPU"
        ]
        if not rows:
            return ""
        parts = [
            f"{r['backend']} {r['precision']} ran at {r['speedup_vs_eager_fp32']:.2f}x "
            + ("(emulated)" if r.get("emulated") else f"({r['instructions']})")
            for r in rows
        ]
        text = "Against eager fp32 at batch " + f"{batch}, " + "; ".join(parts) + "."
        slow = [r for r in rows if r.get("emulated")]
        if not slow:
            return f"{text} This CPU has instructions for each format that ran.{self._matrix(rows)}"
        if all(r["speedup_vs_eager_fp32"] < 1 for r in slow):
            return text + (
                " Every emulated format was slower than fp32: without instructions for it, "
                "the narrower format costs conversions and saves no arithmetic."
            )
        faster = ", ".join(
            f"{r['backend']} {r['precision']}" for r in slow if r["speedup_vs_eager_fp32"] >= 1
        )
        return text + f" Emulated, {faster} still ran at least as fast as fp32 here."

    def _matrix(self, rows: list[dict[str, Any]]) -> str:
        """Why formats with instructions ran as they did, from :attr:`matrix_speed`
        ("" where it was not measured)."""
        formats = [p for p in dict.fromkeys(r["precision"] for r in rows) if p in self.matrix_speed]
        if not formats:
            return ""
        n = self.matrix_size
        each = " and ".join(f"{self.matrix_speed[p]:.2f}x in {p}" for p in formats)
        measured = f" A bare {n}x{n} matrix product ran at {each} here, against fp32."
        slower = dict.fromkeys(
            r["precision"]
            for r in rows
            if r["speedup_vs_eager_fp32"] < 1 and r["precision"] in formats
        )
        # As printed: a kernel at 0.996x reads "1.00x", as fast, not slower.
        kernel = [p for p in slower if self.matrix_speed[p] < SAME_SPEED]
        around = [p for p in slower if self.matrix_speed[p] >= SAME_SPEED]
        if kernel:
            these = "that format" if len(kernel) == 1 else "those formats"
            measured += (
                f" So PyTorch's {' and '.join(kernel)} matrix kernels are slower than its fp32 "
                f"ones on this processor, and {these} cannot pay here."
            )
        if around:
            measured += (
                f" In {' and '.join(around)} the matrix product was at least as fast as "
                "in fp32, so the time went around it: autocast converts the weights and "
                "activations to and from fp32 around every matrix product."
            )
        return measured

    @property
    def test_images(self) -> int | None:
        """How many test images the agreement was measured on."""
        return next((r["test_images"] for r in self.rows if r.get("test_images")), None)

    def row(
        self, backend: str, precision: str, batch: int, config: str | None = None
    ) -> dict[str, Any]:
        """The row of one engine at one batch size (``KeyError`` if it did not run);
        for ONNX Runtime int8, the row of ``config`` (a name), else the best one
        (:meth:`best_int8`)."""
        if (backend, precision) == ("ONNX Runtime", "int8") and config is None:
            return self.best_int8(batch)
        for r in self.rows:
            if (r["backend"], r["precision"], r["batch"]) == (backend, precision, batch) and (
                config is None or (r["config"] or {}).get("name") == config
            ):
                return r
        raise KeyError(f"{backend} {precision} {config or ''} did not run at batch {batch}")

    def int8_rows(self, batch: int = 1) -> list[dict[str, Any]]:
        """ONNX Runtime's int8 rows at ``batch``, one per configuration."""
        return [
            r
            for r in self.rows
            if (r["backend"], r["precision"], r["batch"]) == ("ONNX Runtime", "int8", batch)
        ]

    def least_sure_summary(self, batch: int = 1) -> str:
        """A sentence on agreement where the formats can differ: on the test images
        the fp32 model is least sure of, the engine that agreed least at ``batch``,
        or that every engine agreed ("" where none was measured)."""
        rows = [
            r
            for r in self.rows
            if r["batch"] == batch
            and (r["backend"], r["precision"]) != REFERENCE
            and r.get("least_sure_agreement") is not None
        ]
        if not rows:
            return ""
        n = rows[0]["least_sure_images"]
        where = (
            f"On the {n} test images the fp32 network was least sure of (the smallest gap "
            "between its two largest logits), where a rounding error can change the answer,"
        )
        worst = min(rows, key=lambda r: r["least_sure_agreement"])
        if worst["least_sure_agreement"] == 1.0:
            return f"{where} every engine still gave fp32's answer."
        name = f"{worst['backend']} {worst['precision']}"
        if worst.get("config"):
            name += f" ({worst['config']['name']})"
        return f"{where} {name} agreed least: {worst['least_sure_agreement']:.1%}."

    def best_int8(self, batch: int = 1, slack: float = AGREEMENT_SLACK) -> dict[str, Any]:
        """The fastest ONNX Runtime int8 configuration at ``batch`` among those whose
        agreement is within ``slack`` of the best agreement (``KeyError`` if none ran)."""
        rows = self.int8_rows(batch)
        if not rows:
            raise KeyError(f"ONNX Runtime int8 did not run at batch {batch}")
        agreements = [r["top1_agreement"] for r in rows if r["top1_agreement"] is not None]
        floor = max(agreements) - slack if agreements else None
        good = [r for r in rows if floor is None or (r["top1_agreement"] or 0) >= floor]
        return min(good, key=lambda r: r["ms"])

    def best(self, batch: int = 1) -> dict[str, Any]:
        """The fastest engine at ``batch`` other than the reference."""
        others = [
            r
            for r in self.rows
            if r["batch"] == batch and (r["backend"], r["precision"]) != REFERENCE
        ]
        if not others:
            raise KeyError(f"no engine but the reference ran at batch {batch}")
        return max(others, key=lambda r: r["speedup_vs_eager_fp32"])

    def plot(self, batch: int = 1):
        """Speed-up over eager fp32 at ``batch`` against top-1 agreement, one point per engine."""
        import matplotlib.pyplot as plt

        # A legend, not labels beside the points: engines of equal agreement sit
        # side by side near 100%, where their labels would overlap.
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        markers = "osD^vP*Xh<>"
        shown = [r for r in self.rows if r["batch"] == batch and r["top1_agreement"] is not None]
        for i, r in enumerate(shown):
            label = f"{r['backend']} {r['precision']}"
            if r.get("config"):
                label += f" ({r['config']['name']})"
            if r.get("emulated"):
                label += " (emulated)"
            ax.scatter(
                [r["speedup_vs_eager_fp32"]],
                [100 * r["top1_agreement"]],
                s=60,
                zorder=3,
                marker=markers[i % len(markers)],
                label=label,
            )
        ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False
        )
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(f"speed-up over PyTorch eager fp32 (Inception v3, batch {batch})")
        ax.set_ylabel("top-1 agreement with fp32 (%)")
        ax.set_title(f"Speed against agreement on {self.machine}", fontsize=9)
        ax.grid(alpha=0.3)
        low = min(
            [100 * r["top1_agreement"] for r in self.rows if r["top1_agreement"] is not None]
            + [100.0]
        )
        ax.set_ylim(max(0.0, low - 5), 101)
        fig.tight_layout()
        return fig

    def summary(self) -> str:
        """A plain-text table, one line per row, and what the figures come from."""
        lines = [
            f"{'backend':<15} {'precision':<9} {'batch':>5} {'ms':>9} {'speedup':>8} "
            f"{'agreement [95% CI]':>20} {'accuracy':>8}  config"
        ]
        for r in self.rows:
            agree = "-" if r["top1_agreement"] is None else f"{100 * r['top1_agreement']:.1f}%"
            agree += f" {_interval_text(r.get('agreement_interval'))}".rstrip()
            acc = "-" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}%"
            lines.append(
                f"{r['backend']:<15} {r['precision']:<9} {r['batch']:>5} {r['ms']:>9.2f} "
                f"{r['speedup_vs_eager_fp32']:>7.2f}x {agree:>20} {acc:>8}  "
                + ((r.get("config") or {}).get("name") or "")
                + (_how(r) if r.get("emulated") else "")
            )
        lines += [
            f"speed: {self.speed_model}; medians on {self.machine}, "
            f"{count(self.threads, 'thread')}",
            f"agreement and accuracy: {self.agreement_note}",
            "CPU flags: " + (", ".join(self.cpu_flags) or "none"),
        ]
        lines += [f"not run: {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


GPU_RECORD_MODEL = "inception-v3"
"""The case study whose figures in the GPU verification record the precision
page shows: the optimisation chapter's model, trained in float32 and with
mixed precision (``make gpu-check``'s ``speed:inception-v3``)."""


GPU_VARIANTS = (
    ("fp32", "float32"),
    ("bf16", "bf16 autocast"),
    ("fp32+cl", "float32 channels-last"),
    ("bf16+cl", "bf16 autocast channels-last"),
)
"""The training variants of the GPU record's Inception v3 rows, in words."""


def _amd(name: str) -> bool:
    return any(word in name for word in ("AMD", "Instinct", "Radeon"))


def gpu_record_sentence(record: dict[str, Any] | None) -> str:
    """What the last GPU verification record (``rocm_dl_guide.selfcheck.record``'s
    ``latest_record()``, ``None`` for none) says about the 16-bit formats. It keeps
    training figures, not inference ones: Inception v3 trained in float32 and with
    bf16 autocast, each in the default and the channels-last memory layout, at the
    batch size of its fastest setting. The sentence names the device (and says
    where it is not an AMD GPU), gives each variant's images per second and ratio
    to float32, and what bf16 gained in each layout."""
    if record is None:
        return (
            "No GPU verification record has been written yet, so no GPU figures for "
            "the 16-bit formats can be shown here."
        )
    figs = (record.get("figures") or {}).get(GPU_RECORD_MODEL) or {}
    device = (record.get("device") or {}).get("name") or "a GPU"
    batch = (figs.get("best") or {}).get("batch")
    rate = {
        variant: value
        for b, variant, value, *_ in figs.get("rows") or []
        if b == batch and isinstance(value, (int, float)) and value > 0
    }
    if "fp32" not in rate or not ({"bf16", "bf16+cl"} & rate.keys()):
        return f"The last GPU record ({device}) has no 16-bit figures for Inception v3."
    base = rate["fp32"]
    parts = "; ".join(
        f"{words} {rate[v]:,.0f}" + ("" if v == "fp32" else f" ({rate[v] / base:.2f}x)")
        for v, words in GPU_VARIANTS
        if v in rate
    )
    gains = [
        f"{rate[b16] / rate[b32]:.2f}x in the {layout} layout"
        for b32, b16, layout in (
            ("fp32", "bf16", "default"),
            ("fp32+cl", "bf16+cl", "channels-last"),
        )
        if b32 in rate and b16 in rate
    ]
    amd = "" if _amd(device) else " No AMD GPU has been measured for this page yet."
    return (
        f"The last GPU record was made by make gpu-check on the {device} ({record.get('date')})."
        f"{amd} It keeps training figures, not inference ones. Training Inception v3 at "
        f"batch {batch} there, in images per second: {parts}. Over float32, bf16 gained "
        + " and ".join(gains)
        + "."
    )


def _small_percent(value) -> str:
    """A share as a percentage with two decimals, ``< 0.01%`` below that, ``""`` for none."""
    if value is None or value != value:
        return ""
    if value == 0:
        return "0%"
    return "< 0.01%" if value < 0.0001 else f"{value:.2%}"


def _how(row: dict[str, Any]) -> str:
    """The instructions column: the row's instructions, and for a format the CPU
    has none for, that it was emulated and with how many runs it was timed."""
    how = row.get("instructions") or ""
    if not row.get("emulated"):
        return how
    warmup, timed = row.get("runs") or (None, None)
    after = f"after {count(warmup, 'warm-up run')}" if warmup else "no warm-up"
    runs = f"; {count(timed, 'timed run')}, {after}" if timed else ""
    return f"emulated: {how}{runs}"


def _interval_text(interval) -> str:
    if not isinstance(interval, (list, tuple)):
        return ""
    return f"[{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]"
