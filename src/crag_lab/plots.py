"""PNG figures of an evaluation (matplotlib, Agg backend: no display needed).

matplotlib is imported inside each function: a run that draws nothing never pays for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag_lab.metrics import route_of

VERDICT_ORDER = ("correct", "incorrect", "ambiguous")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def score_histograms(
    scores: Sequence[float],
    labels: Sequence[bool],
    thresholds: Mapping[str, float],
    path: Path,
    title: str = "grader scores on labelled pairs",
) -> Path:
    """How far apart the grader puts relevant and non-relevant passages."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    bins = [i / 20 for i in range(21)]
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    ax.hist(neg, bins=bins, alpha=0.6, label=f"not relevant (n={len(neg)})", color="tab:red")
    ax.hist(pos, bins=bins, alpha=0.6, label=f"relevant (n={len(pos)})", color="tab:green")
    for (name, value), style in zip(thresholds.items(), ("--", ":", "-."), strict=False):
        ax.axvline(value, color="black", linestyle=style, label=f"{name} = {value:.2f}")
    ax.set_xlabel("score")
    ax.set_ylabel("pairs")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion_matrices(matrices: Mapping[str, Sequence[Sequence[int]]], path: Path) -> Path:
    """One verdict confusion matrix per graded system (rows expected, columns predicted)."""
    plt = _pyplot()
    n = max(1, len(matrices))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False)
    for ax, (system, matrix) in zip(axes[0], matrices.items(), strict=False):
        ax.imshow(matrix, cmap="Blues")
        peak = max(max(row) for row in matrix) or 1
        for i, row in enumerate(matrix):
            for j, value in enumerate(row):
                color = "white" if value > peak / 2 else "black"
                ax.text(j, i, str(value), ha="center", va="center", color=color)
        ax.set_xticks(range(3), VERDICT_ORDER, rotation=30)
        ax.set_yticks(range(3), VERDICT_ORDER)
        ax.set_xlabel("predicted")
        ax.set_ylabel("expected")
        ax.set_title(system)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def threshold_surface(
    surface: Mapping[str, Any], current: tuple[float, float] | None, path: Path
) -> Path:
    """Verdict accuracy over (lower, upper), with the best and the current point marked."""

    plt = _pyplot()
    lowers, uppers = surface["lowers"], surface["uppers"]
    acc = np.array(
        [[np.nan if v is None else v for v in row] for row in surface["accuracy"]], dtype=float
    )
    fig, ax = plt.subplots(figsize=(6.5, 5.2))
    extent = (uppers[0], uppers[-1], lowers[-1], lowers[0])
    image = ax.imshow(acc, cmap="viridis", extent=extent, aspect="auto")
    fig.colorbar(image, ax=ax, label="verdict accuracy")
    best = surface["best"]
    ax.plot(best["upper"], best["lower"], "r*", markersize=14, label=f"best {best['accuracy']:.2f}")
    if current is not None:
        ax.plot(
            current[1],
            current[0],
            "o",
            color="white",
            markeredgecolor="black",
            markersize=8,
            label="current",
        )
    ax.set_xlabel("upper threshold")
    ax.set_ylabel("lower threshold")
    ax.set_title(f"verdict accuracy over thresholds (n={surface['n']})")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_by_route(records: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> Path:
    """Wall time per question, per system and verdict path."""
    plt = _pyplot()
    groups: list[tuple[str, list[float]]] = []
    for system, rows in records.items():
        routes: dict[str, list[float]] = {}
        for r in rows:
            if not r.get("error"):
                routes.setdefault(route_of(r), []).append(float(r["seconds"]))
        groups += [(f"{system}\n{route}", v) for route, v in sorted(routes.items())]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups)), 4.2))
    if groups:
        ax.boxplot([v for _, v in groups], showfliers=True)
        ax.set_xticks(range(1, len(groups) + 1), [g for g, _ in groups], fontsize=8)
    ax.set_ylabel("seconds per question")
    ax.set_yscale("log")
    ax.set_title("latency by system and verdict path")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def reliability_diagram(by_library: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Predicted confidence against the observed share of right outcomes, per library
    (`crag_lab.confidence.held_out`): a calibrated one lies on the diagonal."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
    for name, held in by_library.items():
        points = held["bins"]
        ax.plot(
            [b["predicted"] for b in points],
            [b["observed"] for b in points],
            marker="o",
            label=f"{name} (ECE {held['ece']:.3f}, n={held['n']})",
        )
        for b in points:
            ax.annotate(str(b["n"]), (b["predicted"], b["observed"]), fontsize=7)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (held out by library)")
    ax.set_ylabel("share of outcomes right")
    ax.set_title("reliability of crag's confidence")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
