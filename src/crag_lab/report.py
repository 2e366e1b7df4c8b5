"""The evaluation report: metrics.json, records.jsonl and a Markdown summary.

metrics.json holds every number; the Markdown puts crag and the baselines side by
side and says how each number is defined, so the report reads on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crag_lab.dataset import ANSWERABLE, CATEGORIES, VERDICTS

DEFINITIONS = """\
- **verdict accuracy**: share of questions whose verdict equals `expected_verdict`. The
  tutorial baseline has no verdicts of its own; its route is mapped onto crag's scale (all
  documents relevant → correct, some → ambiguous, none → incorrect). Naive RAG grades nothing.
- **support recall (evidence in context)**: share of answerable questions (internal, external,
  partial) whose final context (the strips handed to the generator) has a strip holding one
  of `answers` or a `support` entry's evidence phrase (`hint`; normal form, case and spacing
  aside). **(a support file in context)**: looser, a strip from a labelled support document
  (same file name) also counts. **(evidence among the candidates)**: the same test over
  everything the system read before refining (the graded library chunks and search
  results): whether the evidence was found at all, whatever refinement kept.
- **partial: both sources in context**: share of partial questions whose context holds a
  support document from every corpus their `support` names (books and external).
- **answer containment**: share of answerable questions with `answers` whose answer contains
  one of them. With `--no-llm` answers are extractive (the best strips verbatim; for the
  baselines, which do not refine, whole chunks), so this mostly measures the context.
- **none: refusal / confident wrong**: on questions no corpus answers, the share declined, and
  the share answered anyway (nothing supports any answer to these).
- **unsupported answers**: answerable questions answered although the context holds no support.
- **compression**: tokens of the final context / tokens of everything fetched (library chunks
  and web results), summed over questions. Tokens are whitespace-separated words.
- **conflicts** (a conflict set: questions with `expect` / `reject` / `conflict`):
  *resolved*, the share of questions whose sources disagree where the answer gives an
  `expect` value and no `reject` value; *named*, where crag reports the disagreement;
  *controls: a conflict named*, on questions whose sources agree (or that ask for no
  single value), the share where crag wrongly reports one. `crag-relevance` is crag on
  relevance alone: composite weights (1, 0, 0, 0), no conflict resolution, library first.
- **latency**: wall time of the whole question, in seconds, per verdict path.
- **grader**: the run's grader as a classifier of the labelled pairs: a pair is predicted
  relevant when its score >= the threshold (`lower` decides good documents; `upper` decides
  `correct`; 0.5 is the tutorial's cut). ROC AUC with ties counted one half."""


#: The reliability diagram of crag's confidence, beside the report of several libraries.
RELIABILITY_PNG = "reliability.png"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def systems_table(systems: Mapping[str, Mapping[str, Any]]) -> str:
    """crag and the baselines side by side, one row per headline metric."""
    names = list(systems)

    def row(label: str, get: Any) -> list[Any]:
        return [label, *(get(systems[s]) for s in names)]

    rows = [
        row("questions (errors)", lambda m: f"{m['n']} ({m['errors']})"),
        row("decision quality (mean of categories)", lambda m: m.get("decision_quality")),
        *(
            row(
                f"  {cat}: right decision",
                lambda m, c=cat: m["by_category"][c].get("decision_quality"),
            )
            for cat in CATEGORIES
        ),
        row("verdict accuracy", lambda m: m["verdict_accuracy"]),
        row("partial: verdict accuracy", lambda m: m["by_category"]["partial"]["verdict_accuracy"]),
        row("support recall (evidence in context)", lambda m: m["support_recall"]),
        row("support recall (a support file in context)", lambda m: m["support_recall_file"]),
        row(
            "support recall (evidence among the candidates)",
            lambda m: m.get("support_recall_candidates"),
        ),
        row("partial: both sources in context", lambda m: m["partial_full_support"]),
        row(
            "answer containment",
            lambda m: m["answer_containment"],
        ),
        row("none: refusal rate", lambda m: m["none"]["refusal_rate"]),
        row("none: confident wrong", lambda m: m["none"]["confident_wrong_rate"]),
        row("answerable: refused", lambda m: m["answerable_refusal_rate"]),
        row("answerable: unsupported answer", lambda m: m["unsupported_answer_rate"]),
        row("web search rate", lambda m: m["web_search_rate"]),
        row(
            "web search rate, library questions",
            lambda m: m["by_category"]["internal"]["web_search_rate"],
        ),
        row("compression (context/retrieved)", lambda m: m["compression"]["ratio"]),
        row(
            "context tokens / question",
            lambda m: round(m["compression"]["context_tokens"] / max(1, m["n"])),
        ),
        *(
            [
                row("conflicts: resolved", lambda m: (m.get("conflicts") or {}).get("resolved")),
                row("conflicts: named", lambda m: (m.get("conflicts") or {}).get("named")),
                row(
                    "controls: a conflict named",
                    lambda m: (m.get("conflicts") or {}).get("false_conflicts"),
                ),
            ]
            if any(m.get("conflicts") for m in systems.values())
            else []
        ),
        row("latency p50 (s)", lambda m: m["latency"]["all"]["p50"]),
        row("latency p95 (s)", lambda m: m["latency"]["all"]["p95"]),
    ]
    return _table(["metric", *names], rows)


#: The headline figures of a library, as (label, how to read it from a system's metrics).
HEADLINE: tuple[tuple[str, Any], ...] = (
    ("decision quality", lambda m: m.get("decision_quality")),
    ("verdict accuracy", lambda m: m["verdict_accuracy"]),
    ("partial verdicts", lambda m: m["by_category"]["partial"]["verdict_accuracy"]),
    ("answerable declined", lambda m: m["answerable_refusal_rate"]),
    ("unanswerable declined", lambda m: m["none"]["refusal_rate"]),
    ("unsupported answers", lambda m: m["unsupported_answer_rate"]),
    ("support recall", lambda m: m["support_recall"]),
    ("p50 (s)", lambda m: m["latency"]["all"]["p50"]),
)


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if len(numbers) == len(values) and numbers else None


def libraries_table(by_library: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per system and library, then the system's mean over the libraries; the
    pair AUC of the run's grader (and of plain similarity) on each library's pairs."""
    names = list(by_library)
    systems = list(dict.fromkeys(s for m in by_library.values() for s in m["systems"]))
    header = ["system", "library", *(label for label, _ in HEADLINE), "pair AUC (similarity)"]
    rows: list[list[Any]] = []
    for system in systems:
        values: list[list[Any]] = []
        for name in names:
            m = by_library[name]["systems"].get(system)
            if m is None:
                continue
            values.append([get(m) for _, get in HEADLINE])
            rows.append([system, name, *values[-1], _pair_auc(by_library[name], system)])
        if len(values) > 1:
            rows.append(
                [system, "mean", *(_mean(list(col)) for col in zip(*values, strict=True)), ""]
            )
    return _table(header, rows)


def _pair_auc(metrics: Mapping[str, Any], system: str) -> str:
    grader = metrics.get("grader") or {}
    if system != "crag" or grader.get("auc") is None:
        return ""
    similar = (grader.get("similarity") or {}).get("auc")
    return f"{fmt(grader['auc'])} ({fmt(similar)})"


def declines_table(systems: Mapping[str, Mapping[str, Any]]) -> str:
    """Per system and decline reason: declines, those of answerable questions, precision."""
    rows = [
        [s, reason, r["n"], r["answerable"], r["precision"]]
        for s, m in systems.items()
        for reason, r in (m.get("declines_by_reason") or {}).items()
    ]
    return _table(["system", "reason", "declines", "of answerable", "precision"], rows)


def category_table(systems: Mapping[str, Mapping[str, Any]]) -> str:
    names = list(systems)
    rows = []
    for cat in CATEGORIES:
        n = next(iter(systems.values()))["by_category"][cat]["n"]
        cells: list[Any] = [f"{cat} ({n})"]
        for s in names:
            c = systems[s]["by_category"][cat]
            cells.append(
                f"{fmt(c['verdict_accuracy'])} / {fmt(c['support_recall'])}"
                if cat in ANSWERABLE
                else fmt(c["verdict_accuracy"])
            )
        rows.append(cells)
    return _table(["category (n)", *(f"{s}: verdict acc / support" for s in names)], rows)


def confusion_table(system: str, matrix: Sequence[Sequence[int]]) -> str:
    rows = [[f"expected {v}", *matrix[i]] for i, v in enumerate(VERDICTS)]
    return f"**{system}**\n\n" + _table(["", *(f"→ {v}" for v in VERDICTS)], rows)


def latency_table(systems: Mapping[str, Mapping[str, Any]]) -> str:
    rows = []
    for s, m in systems.items():
        for route, lat in m["latency"]["by_route"].items():
            rows.append([s, route, lat["path"], lat["n"], lat["p50"], lat["p95"], lat["mean"]])
        for lane, lat in m["latency"].get("by_router", {}).items():
            rows.append([s, f"route: {lane}", "", lat["n"], lat["p50"], lat["p95"], lat["mean"]])
    return _table(
        ["system", "verdict / route", "path", "n", "p50 (s)", "p95 (s)", "mean (s)"], rows
    )


def grader_table(grader: Mapping[str, Any]) -> str:
    rows = [
        [name, c["threshold"], c["precision"], c["recall"], c["f1"], c["accuracy"]]
        for name, c in grader["at"].items()
    ]
    best = grader["best_accuracy"]
    rows.append(["best single cut", best["threshold"], None, None, None, best["accuracy"]])
    head = f"ROC AUC {fmt(grader['auc'])} on {grader['n']} pairs ({grader['positives']} relevant)"
    if grader.get("by_group"):
        head += "; by source: " + ", ".join(
            f"{g} {fmt(v['auc'])} (n={v['n']})" for g, v in grader["by_group"].items()
        )
    return (
        head
        + "\n\n"
        + _table(["threshold", "value", "precision", "recall", "F1", "accuracy"], rows)
    )


def surface_summary(surface: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    best = surface["best"]
    return (
        f"Best on this set: lower = {best['lower']:.2f}, upper = {best['upper']:.2f} → "
        f"verdict accuracy {best['accuracy']:.3f} (n = {surface['n']}); current lower = "
        f"{current['lower']:.2f}, upper = {current['upper']:.2f} → {fmt(current['accuracy'])}."
    )


def surface_grid(surface: Mapping[str, Any], every: int = 2) -> str:
    """The accuracy surface as a text table (every `every`-th grid line)."""
    lowers, uppers = surface["lowers"], surface["uppers"]
    cols = list(range(0, len(uppers), every))
    rows = []
    for i in range(0, len(lowers), every):
        row: list[Any] = [f"{lowers[i]:.2f}"]
        for j in cols:
            v = surface["accuracy"][i][j]
            row.append("" if v is None else f"{v:.2f}")
        rows.append(row)
    return _table(["lower \\ upper", *(f"{uppers[j]:.2f}" for j in cols)], rows)


def graders_table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ["grader", "AUC", "F1 at lower", "accuracy at lower", "best accuracy", "pairs/s"]
    header.append("verdict accuracy")
    keys = ("auc", "f1", "accuracy", "best_accuracy", "pairs_per_second", "verdict_accuracy")
    return _table(header, [[r["grader"], *(fmt(r.get(k)) for k in keys)] for r in rows])


def sources_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Per source: pair AUC, verdict accuracy at the run's thresholds (both in-sample
    for anything fitted on this set), and verdict accuracy with the thresholds refitted
    on the other sources; overall also with thresholds refitted on folds of questions."""
    header = [
        "grader",
        "source",
        "pair AUC",
        "verdict acc.",
        "verdict acc., source held out",
        "verdict acc., question folds",
    ]
    table = []
    for r in rows:
        held = (r.get("verdicts_leaving_each_source_out") or {}).get("by_source", {})
        by_verdict = r.get("verdict_accuracy_by_source") or {}
        for source in sorted({*(r.get("auc_by_source") or {}), *by_verdict}):
            out = held.get(source) or {}
            table.append(
                [
                    r["grader"],
                    source,
                    fmt((r.get("auc_by_source") or {}).get(source)),
                    fmt(by_verdict.get(source)),
                    f"{fmt(out.get('accuracy'))} at {fmt(out.get('lower'), 2)}/"
                    f"{fmt(out.get('upper'), 2)}"
                    if out
                    else "–",
                    "",
                ]
            )
        overall = (r.get("verdicts_leaving_each_source_out") or {}).get("overall")
        table.append(
            [
                r["grader"],
                "all",
                fmt(r.get("auc")),
                fmt(r.get("verdict_accuracy")),
                fmt(overall),
                fmt(r.get("verdict_accuracy_question_folds")),
            ]
        )
    return _table(header, table)


def markdown(metrics: Mapping[str, Any], plots: Mapping[str, str]) -> str:
    systems = metrics["systems"]
    cfg = metrics["config"]
    fitted = metrics.get("fitted_on")
    parts = [
        "# crag evaluation",
        f"{metrics['created']} · questions: `{metrics['questions_file']}` "
        f"({metrics['n_questions']} run) · pairs: `{metrics.get('pairs_file') or '–'}`",
        f"Held out: each system's grader weights and thresholds fitted on {', '.join(fitted)}; "
        "none of them on this set."
        if fitted
        else "crag's defaults: figures on a set the defaults were fitted on are in-sample.",
        "Configuration: " + ", ".join(f"{k} = `{v}`" for k, v in cfg.items() if k not in ("home",)),
        *(
            [
                "Fitted per system: "
                + "; ".join(
                    f"{s}: " + ", ".join(f"{k} = `{v}`" for k, v in c.items())
                    for s, c in metrics["system_config"].items()
                )
            ]
            if metrics.get("system_config")
            else []
        ),
        "## Systems side by side",
        systems_table(systems),
        "## By category",
        category_table(systems),
    ]
    graded = {s: m["confusion"]["matrix"] for s, m in systems.items() if m["confusion"]["matrix"]}
    if graded:
        parts.append("## Verdict confusion (rows expected, columns predicted)")
        parts += [confusion_table(s, mat) for s, mat in graded.items()]
    parts += ["## Declines by reason", declines_table(systems)]
    parts += ["## Latency by verdict path", latency_table(systems)]
    if metrics.get("grader"):
        parts += [f"## Grader on labelled pairs ({cfg['grader']})", grader_table(metrics["grader"])]
    if metrics.get("graders"):
        parts += [
            "## Graders side by side",
            graders_table(metrics["graders"]),
            "### By source (held out: thresholds fitted on the other sources)",
            sources_table(metrics["graders"]),
        ]
    if metrics.get("threshold_surface"):
        surface = metrics["threshold_surface"]
        parts += [
            "## Threshold surface (crag's document scores, replayed)",
            surface_summary(surface, metrics["threshold_current"]),
            surface_grid(surface),
        ]
    if plots:
        parts.append("## Plots")
        parts += [f"![{name}]({file})" for name, file in plots.items()]
    parts += ["## Definitions", DEFINITIONS]
    return "\n\n".join(parts) + "\n"


def write(
    out: Path,
    metrics: Mapping[str, Any],
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    plots: Mapping[str, str],
) -> Path:
    """Write metrics.json, records.jsonl and report.md into `out`; returns report.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    with (out / "records.jsonl").open("w", encoding="utf-8") as fh:
        for rows in records.values():
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    report = out / "report.md"
    report.write_text(markdown(metrics, plots))
    return report


def confidence_table(held: Mapping[str, Mapping[str, Any]]) -> str:
    """crag's confidence held out by library (`crag_lab.confidence.held_out`)."""
    rows = [
        [
            name,
            h["n"],
            fmt(h["right"]),
            fmt(h["ece"]),
            f"{fmt(h['ece_floor']['median'])} / {fmt(h['ece_floor']['p90'])}",
            f"{fmt(h['ece_refit']['p10'])} / {fmt(h['ece_refit']['p90'])}",
            fmt(h["brier"]),
            fmt(h["mean_right"]),
            fmt(h["mean_wrong"]),
            fmt(
                None
                if h["mean_right"] is None or h["mean_wrong"] is None
                else h["mean_right"] - h["mean_wrong"]
            ),
        ]
        for name, h in held.items()
    ]
    header = [
        "library",
        "outcomes",
        "share right",
        "ECE",
        "ECE of a calibrated model at this n (median / p90)",
        "ECE of refits on resampled runs of the others (p10 / p90)",
        "Brier",
        "mean confidence: right",
        "wrong",
        "gap",
    ]
    return _table(header, rows)


def write_set(
    out: Path,
    by_library: Mapping[str, Mapping[str, Any]],
    fitted: Mapping[str, Any],
    confidence: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """The report of several libraries: each library's metrics and their mean per system
    in metrics.json, and the side-by-side table in report.md (with crag's confidence held
    out by library, when measured); returns report.md."""
    out.mkdir(parents=True, exist_ok=True)
    systems = list(dict.fromkeys(s for m in by_library.values() for s in m["systems"]))
    mean = {
        s: {
            label: _mean([get(m["systems"][s]) for m in by_library.values() if s in m["systems"]])
            for label, get in HEADLINE
        }
        for s in systems
    }
    summary = {
        "libraries": {name: {"fitted_on": fitted.get(name) or []} for name in by_library},
        "systems": {
            s: {
                "decision_quality": mean[s]["decision quality"],
                "by_library": {
                    name: {
                        "decision_quality": m["systems"][s].get("decision_quality"),
                        "by_category": {
                            c: v.get("decision_quality")
                            for c, v in m["systems"][s]["by_category"].items()
                        },
                    }
                    for name, m in by_library.items()
                    if s in m["systems"]
                },
                "mean": mean[s],
            }
            for s in systems
        },
    }
    held = all(fitted.get(name) for name in by_library)
    lines = [
        "# crag evaluation over several libraries",
        "Held out by library: each system fitted on the other libraries, measured on this one."
        if held
        else "crag's defaults: a library the defaults were fitted on gives in-sample figures.",
        libraries_table(by_library),
        "Each library's own report: " + ", ".join(f"[{n}]({n}/report.md)" for n in by_library),
    ]
    if confidence:
        summary["confidence"] = confidence
        lines += [
            "## crag's confidence, held out by library",
            "Each library's runs scored by a model fitted on the other libraries' runs "
            "(`crag.grading.outcome`); a run is right when it answered from a context "
            "holding the evidence, or declined a question nothing answers. The model "
            "fitted on every library is `confidence.json`.",
            confidence_table(confidence),
            f"![reliability]({RELIABILITY_PNG})",
        ]
    lines += [
        "## Definitions",
        "**decision quality**: per question, an answerable question answered from a context "
        "that holds its evidence, an unanswerable one declined; the mean over the four "
        "categories (internal, external, partial, none).",
        DEFINITIONS,
    ]
    (out / "metrics.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    report = out / "report.md"
    report.write_text("\n\n".join(lines) + "\n")
    return report


def ablation_table(
    by_library: Mapping[str, Mapping[str, Any]], mechanisms: Mapping[str, str]
) -> str:
    """Per variant (a mechanism off): decision quality and verdict accuracy on each library
    and their mean, with the change from crag as it is (`crag`) in brackets."""
    names = list(by_library)
    header = ["mechanism off", "variant"]
    for name in [*names, "mean"]:
        header += [f"{name}: decision quality", f"{name}: verdict accuracy"]
    figures = {"decision quality": "decision_quality", "verdict accuracy": "verdict_accuracy"}

    def value(label: str, name: str, key: str) -> float | None:
        m = by_library[name]["systems"].get(label)
        return None if m is None else m.get(key)

    rows: list[list[Any]] = []
    for label, mechanism in mechanisms.items():
        if not all(label in m["systems"] for m in by_library.values()):
            continue
        row: list[Any] = [mechanism, label]
        for name in [*names, "mean"]:
            for key in figures.values():
                if name == "mean":
                    got = _mean([value(label, n, key) for n in names])
                    base = _mean([value("crag", n, key) for n in names])
                else:
                    got, base = value(label, name, key), value("crag", name, key)
                cell = fmt(got)
                if label != "crag" and got is not None and base is not None:
                    cell += f" ({got - base:+.3f})"
                row.append(cell)
        rows.append(row)
    return _table(header, rows)
