"""A learned verdict against CRAG's rule (docs/evaluation.md): one softmax regression
over the signals the grade node records, fitted on one library's questions and measured
on the other's, both ways.

    python scripts/verdict_model.py REPORT

REPORT is the folder of a held-out `crag eval` run (`--systems crag`): its records hold,
per question, the grader's scores and what the coverage, constraint and part checks
found (`grades`), the verdict the rule gave, and the verdict expected. The signals:
the best three scores and the gap after the first, a name the library never writes
(the whole question's subject, or any), a year or version no graded chunk meets, the
share of a decomposed question's parts covered and its weakest part's best score,
whether the question was decomposed, and whether the fast path took it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

VERDICTS = ["correct", "ambiguous", "incorrect"]
#: `upper` as fitted on both dev libraries: a part is covered when a chunk that names
#: its subject scores this much.
UPPER = 0.6
STRENGTHS = (0.001, 0.01, 0.1, 0.3, 1.0)


def signals(record: dict[str, Any]) -> list[float]:
    grades = record.get("grades") or {}
    scores = [*sorted(record.get("scores") or [0.0], reverse=True), 0.0, 0.0]
    parts = grades.get("parts") or []
    met = {m for found in grades.get("meets") or [] for m in found}
    unmet = [a for a in grades.get("asked") or [] if a not in met]
    return [
        scores[0],
        scores[1],
        float(np.mean(scores[:3])),
        scores[0] - scores[1],
        float(bool(grades.get("unknown"))),
        float(bool(grades.get("never"))),
        float(bool(unmet)),
        float(np.mean([p["explains"] >= UPPER for p in parts])) if parts else 1.0,
        min(p["top"] for p in parts) if parts else scores[0],
        float(bool(parts)),
        float(record.get("route") == "fast"),
    ]


def library(report: Path, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(signals, expected verdicts, the rule's verdicts) of crag's records."""
    lines = (report / name / "records.jsonl").read_text(encoding="utf-8").splitlines()
    records = [r for r in map(json.loads, lines) if r.get("system") == "crag"]
    x = np.array([signals(r) for r in records])
    expected = np.array([VERDICTS.index(r["expected_verdict"]) for r in records])
    rule = np.array([VERDICTS.index(r["verdict"]) for r in records])
    return x, expected, rule


def fit(x: np.ndarray, y: np.ndarray, strength: float, steps: int = 3000) -> Any:
    """Softmax regression on standardised signals, L2 `strength`, by gradient descent."""
    mean, scale = x.mean(0), x.std(0) + 1e-9

    def design(rows: np.ndarray) -> np.ndarray:
        return np.c_[(rows - mean) / scale, np.ones(len(rows))]

    z = design(x)
    w = np.zeros((z.shape[1], len(VERDICTS)))
    for _ in range(steps):
        p = np.exp(z @ w - (z @ w).max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        penalty = strength * np.r_[w[:-1], np.zeros((1, len(VERDICTS)))]
        w -= 0.5 * (z.T @ (p - np.eye(len(VERDICTS))[y]) / len(y) + penalty)
    return lambda rows: (design(rows) @ w).argmax(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--libraries", default="d2l,pydocs")
    args = parser.parse_args()
    first, second = args.libraries.split(",")
    data = {name: library(args.report, name) for name in (first, second)}
    print("| L2 | measured on | learned, held out | learned, in-sample | the rule |")
    print("|---|---|---|---|---|")
    for strength in STRENGTHS:
        for train, test in ((first, second), (second, first)):
            (x, y, _), (x2, y2, rule) = data[train], data[test]
            model = fit(x, y, strength)
            held_out, in_sample = (model(x2) == y2).mean(), (model(x) == y).mean()
            print(
                f"| {strength:g} | {test} | {held_out:.3f} | {in_sample:.3f} | "
                f"{(rule == y2).mean():.3f} |"
            )


if __name__ == "__main__":
    main()
