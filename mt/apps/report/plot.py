"""Figures: training curves of one or more experiments (`mt plot`) and attention heatmaps.

Everything is drawn on a `matplotlib.figure.Figure` rendered by the Agg canvas: no pyplot, no
display and no global state, so it runs the same on a server, in tests and inside `mt report`.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path
from typing import Any, Sequence

from mt.atomic_files import check_output, write_bytes_atomic
from mt.errors import ConfigError, MtError
from mt.experiment.paths import Experiment
from mt.training.train_log import load_train_log

DPI = 100


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise MtError("matplotlib is not installed: `pip install matplotlib` (or reinstall mt)") from None
    # Text as written: a sentence, token or run name with "$" (a price) was read as TeX math, drawn
    # garbled or refused with a parser's traceback. mt's figures have no math.
    matplotlib.rcParams["text.parse_math"] = False
    return matplotlib


def minor_label(value: float) -> bool:
    """Whether a log axis's minor tick is labelled: 2 and 5 times a power of ten (as matplotlib's own)."""
    import math

    if value <= 0:
        return False
    digit = round(value / 10 ** math.floor(math.log10(value)), 6)
    return digit in (2.0, 5.0)


def new_figure(width: float, height: float):
    """A figure (inches) with the Agg canvas attached and constrained layout."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig, dpi: int = DPI) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def write_png(fig, path: Path, dpi: int = DPI) -> None:
    write_bytes_atomic(path, png_bytes(fig, dpi))


# -- training curves ----------------------------------------------------------------------------
# (panel title, training key, validation key, log scale)
CURVES = (
    ("loss (label-smoothed)", "loss", "valid_loss", False),
    ("perplexity", "ppl", "valid_ppl", True),
    ("validation BLEU", None, "valid_bleu", False),
    ("learning rate", "lr", None, False),
)


def training_curves(runs: Sequence[tuple[str, list[dict], list[dict]]]):
    """One figure: loss, perplexity, BLEU and learning rate (rows) against steps and wall time
    (columns); each run (name, training records, validation records) in its own colour, training
    solid, validation dashed."""
    _matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FormatStrFormatter, FuncFormatter

    fig = new_figure(12, 12)
    axes = fig.subplots(len(CURVES), 2, squeeze=False)
    longest = max((r["elapsed"] for _, t, v in runs for r in t[-1:] + v[-1:] if _finite(r.get("elapsed"))), default=0)
    hours = longest > 3 * 3600
    time_unit, time_scale = ("hours", 3600.0) if hours else ("minutes", 60.0)
    colours = [f"C{i % 10}" for i in range(len(runs))]
    for row, (title, train_key, valid_key, log_scale) in enumerate(CURVES):
        drawn = False
        for column, x_key in enumerate(("step", "elapsed")):
            ax = axes[row][column]
            for colour, (_, train, valid) in zip(colours, runs):
                for records, key, style in ((train, train_key, "-"), (valid, valid_key, "--")):
                    points = [
                        (r[x_key], r[key]) for r in records if key and _finite(r.get(x_key)) and _finite(r.get(key))
                    ]
                    if not points:
                        continue
                    xs = [x / time_scale if x_key == "elapsed" else x for x, _ in points]
                    ys = [y for _, y in points]
                    marker = "o" if style == "--" and len(points) <= 30 else None
                    ax.plot(xs, ys, style, color=colour, marker=marker, markersize=3, linewidth=1.3)
                    drawn = True
            ax.set_title(title, fontsize=10, loc="left")
            ax.set_xlabel("step" if x_key == "step" else f"wall time ({time_unit}, training only)", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelsize=8)
            if log_scale and drawn:
                ax.set_yscale("log")
                # plain numbers: a log axis labels its ticks as TeX ("$\mathdefault{10^{2}}$"), which
                # mt's figures draw as written (text.parse_math off)
                ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
                ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if minor_label(value) else ""))
            if train_key == "lr":
                ax.yaxis.set_major_formatter(FormatStrFormatter("%.1e"))
        if not drawn:
            for ax in axes[row]:
                ax.text(
                    0.5,
                    0.5,
                    "not in these logs" + (" (train.valid_bleu: true adds it)" if valid_key == "valid_bleu" else ""),
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    fontsize=9,
                    color="0.4",
                )
                ax.set_xticks([])
                ax.set_yticks([])
    handles = [Line2D([], [], color=c, linewidth=2.5) for c in colours]
    handles += [
        Line2D([], [], color="0.3", linestyle="-"),
        Line2D([], [], color="0.3", linestyle="--", marker="o", markersize=3),
    ]
    labels = [name for name, _, _ in runs] + ["training", "validation"]
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), fontsize=9, frameon=False)
    return fig


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def run_names(exps: Sequence[Experiment]) -> list[str]:
    """Legend names: directory names, or full paths where two directories share a name."""
    names = [exp.root.resolve().name or str(exp.root) for exp in exps]  # `--exp .` is its directory's name
    return [str(exp.root) if names.count(name) > 1 else name for name, exp in zip(names, exps)]


def plot(exps: Sequence[Experiment], output: Path | None = None, force: bool = False) -> Path:
    """`mt plot`: the training curves of the experiments, overlaid, as one PNG (default EXP/curves.png
    of the first experiment); an existing file is replaced only with `force`."""
    if not exps:
        raise MtError("give at least one --exp")
    output = Path(output) if output is not None else exps[0].curves_path
    check_output(output, force)
    if output.suffix.lower() != ".png":
        raise ConfigError(f"{output}: the curves are written as PNG; name the file *.png")
    runs = []
    for exp, name in zip(exps, run_names(exps)):
        if not exp.root.is_dir():
            raise MtError(f"{exp.root}: no such experiment directory")
        train, valid = load_train_log(exp.train_log_path)
        if not train and not valid:
            raise MtError(f"{exp.train_log_path}: no training records yet")
        runs.append((name, train, valid))
    write_png(training_curves(runs), output)
    return output


# -- attention heatmaps -------------------------------------------------------------------------
def _label(text: str, limit: int = 14) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def heatmaps(
    matrices: Sequence[Any],  # each (rows, cols), values in [0, 1]
    row_labels: list[str],
    col_labels: list[str],
    titles: list[str],
    suptitle: str,
    marks: list[tuple[int, int]] | None = None,  # (col, row) cells to outline in every panel
    row_axis: str = "output",
    col_axis: str = "source",
    max_columns: int = 4,
):
    """Heatmaps side by side (wrapping after `max_columns`), tokens as tick labels, one colour scale
    0..1 for all panels, so that panels compare."""
    rows, cols = len(row_labels), len(col_labels)
    cell = min(0.3, 14.0 / max(rows, cols, 1))  # inches per token; long sentences shrink
    fontsize = max(4.0, min(9.0, cell * 30))
    margin = max((len(_label(t)) for t in row_labels + col_labels), default=4) * fontsize * 0.6 / 72  # labels
    n_columns = min(len(matrices), max_columns)
    n_rows = math.ceil(len(matrices) / n_columns)
    # A title wraps to its panel's width (10-point text, about 0.55 of a point wide per character).
    fits = max(12, int((max(cols * cell, 1.5) + margin) * 72 / (10 * 0.55)))
    titles = [textwrap.fill(title, fits) for title in titles]
    title_lines = max((title.count("\n") for title in titles), default=0)
    width = n_columns * (max(cols * cell, 1.5) + margin + 0.3) + 1.0
    height = n_rows * (max(rows * cell, 1.5) + margin + 0.5 + 0.2 * title_lines) + 0.6
    fig = new_figure(width, height)
    axes = fig.subplots(n_rows, n_columns, squeeze=False)
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= len(matrices):
            ax.set_axis_off()
            continue
        matrix = matrices[k]
        if hasattr(matrix, "numpy"):  # a torch tensor: matplotlib wants a numpy array
            matrix = matrix.detach().cpu().float().numpy()
        image = ax.imshow(matrix, cmap="Blues", vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
        ax.set_xticks(range(cols), [_label(t) for t in col_labels], rotation=90, fontsize=fontsize)
        ax.set_yticks(range(rows), [_label(t) for t in row_labels], fontsize=fontsize)
        ax.xaxis.tick_top()
        ax.tick_params(length=0)
        ax.set_title(titles[k], fontsize=10, loc="left")
        ax.set_xlabel(col_axis, fontsize=8)
        ax.set_ylabel(row_axis, fontsize=8)
        if marks:
            ax.scatter(
                [c for c, _ in marks],
                [r for _, r in marks],
                marker="s",
                s=(cell * 72 * 0.8) ** 2,
                facecolors="none",
                edgecolors="#d62728",
                linewidths=1.0,
            )
    fig.suptitle(
        textwrap.fill(suptitle, max(40, int(width * 72 / 6))), fontsize=10, x=0.01, ha="left"
    )  # ~6 pt per char
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=min(1.0, 3.0 / height + 0.3), label="attention weight", pad=0.01)
    return fig
