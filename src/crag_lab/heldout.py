"""The generalisation protocol across libraries: fit on one, measure on another.

A user's library has no labels: what they get are crag's defaults, fitted on libraries
someone labelled. So the honest figure of a default is the one on a library it was not
fitted on. For each system, whatever can be fitted (the grader's weights on labelled
pairs, the verdict thresholds on labelled questions) is fitted on the training
libraries and frozen; the held-out library is then run end to end with it. This sits
above the held-out-by-source protocol (`crag_lab.protocol`), which judges the same
things within one library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crag.context import Context
from crag.models.embeddings import embeddings_for
from crag_lab import fit
from crag_lab.dataset import load_pairs, load_questions, stratified
from crag_lab.evaluate import Evaluation, evaluate
from crag_lab.graders.features import FeatureGrader
from crag_lab.graders.trained import save_trained_grader
from crag_lab.libraries import Library
from crag_lab.protocol import pair_sources
from crag_lab.runner import base_system, system_context, warm_up
from crag_lab.tuning import Graded, grade_all, tune

#: Graders whose weights are fitted on labelled pairs (the feature evaluator's); the
#: default (`auto`, similarity unless a user trained a grader) has none.
WEIGHTED_GRADERS = ("features", "trained")
#: Systems with verdict thresholds to fit; naive RAG grades nothing, and the tutorial's
#: binary cut (0.5) is the tutorial's own.
THRESHOLDED = ("crag", "crag-relevance", "similarity", "features")


@dataclass(frozen=True)
class Variant:
    """A system as the protocol runs it: its label and settings of its own (an
    ablation switches a mechanism off through them)."""

    label: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def context(self, ctx: Context) -> Context:
        return system_context(self.label, ctx).with_overrides(**self.overrides)


@dataclass
class Fit:
    """What was fitted for one system on the training libraries."""

    label: str
    on: list[str]
    # grader, grader_file, lower, upper, strip_threshold: what the test run gets
    overrides: dict[str, Any]
    in_sample: float | None  # verdict accuracy on the training questions at the fit


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)


async def fit_variant(
    variant: Variant,
    train: Sequence[Library],
    ctx: Context,
    out: Path,
    *,
    step: float = 0.05,
    limit: int | None = None,
    on_question: Callable[[str], None] | None = None,
) -> Fit:
    """Fit a system on `train`: its grader's weights on their labelled pairs (a feature
    grader), then its verdict thresholds by verdict accuracy on their questions (at most
    `limit` of each library's, stratified as a test run's), graded with those weights,
    and its strip threshold by the share of questions handled right
    (`crag_lab.tuning.tune`). Nothing of a held-out library is read."""
    names = [lib.name for lib in train]
    vctx = variant.context(ctx)
    if base_system(variant.label) not in THRESHOLDED:
        return Fit(variant.label, names, {}, None)
    overrides: dict[str, Any] = {}
    if vctx.grading.grader in WEIGHTED_GRADERS:
        pairs = [pair for lib in train if lib.pairs for pair in load_pairs(lib.pairs)]
        if not pairs:
            raise ValueError(f"no labelled pairs in {', '.join(names)} to fit the grader on")
        data = fit.featurize(FeatureGrader(embeddings_for(vctx)), pairs)
        model = fit.train(data)
        path = save_trained_grader(
            vctx,
            model.to_dict(),
            {
                "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "fitted_on": names,
                "pairs": len(pairs),
            },
            path=out / f"grader-{_slug(variant.label)}-on-{'+'.join(names)}.json",
        )
        overrides.update(grader="trained", grader_file=path)
    graded: list[Graded] = []
    for lib in train:
        lctx = lib.context(vctx).with_overrides(**overrides)
        questions = stratified(load_questions(lib.questions), limit)
        done = (lambda q: on_question(q["id"])) if on_question else None
        graded += await grade_all(questions, lctx, on_done=done)
    tuned = await tune(graded, vctx.with_overrides(**overrides), step=step)
    best = tuned["best"]
    overrides.update(
        lower=best["lower"], upper=best["upper"], strip_threshold=best["strip"]["strip_threshold"]
    )
    return Fit(variant.label, names, overrides, best["accuracy"])


def held_out_splits(libraries: Sequence[Library]) -> list[tuple[Library, list[Library]]]:
    """Each library in turn as the test library, fitted on all the others."""
    if len(libraries) < 2:
        raise ValueError("holding out by library needs at least two libraries")
    return [(lib, [other for other in libraries if other is not lib]) for lib in libraries]


async def measure(
    libraries: Sequence[Library],
    variants: Sequence[Variant],
    ctx: Context,
    out: Path,
    *,
    held_out: bool,
    limit: int | None = None,
    quiet: bool = False,
    grid_step: float = 0.05,
    graders: Sequence[str] = (),
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, Evaluation]:
    """Each library measured in its own home, every variant side by side; `held_out`:
    each variant fitted on the other libraries first, nothing fitted on the one measured."""
    splits = held_out_splits(libraries) if held_out else [(lib, []) for lib in libraries]
    # every library's files and store, read before the first is measured
    every = {lib.name: load_questions(lib.questions) for lib in libraries}
    labelled = {lib.name: load_pairs(lib.pairs) if lib.pairs else None for lib in libraries}
    for lib in libraries:
        warm_up(lib.context(ctx))
    results: dict[str, Evaluation] = {}
    for test, train in splits:
        tctx = test.context(ctx)
        contexts = {v.label: v.context(tctx) for v in variants}
        if train:
            log(f"{test.name}: fitting each system on {', '.join(t.name for t in train)}")
            for v in variants:
                fitted = await fit_variant(
                    v, train, ctx, out / "fitted", step=grid_step, limit=limit
                )
                contexts[v.label] = contexts[v.label].with_overrides(**fitted.overrides)
        every_question, pairs = every[test.name], labelled[test.name]
        questions = stratified(every_question, limit)
        log(
            f"{test.name}: {len(questions)} questions"
            + (f", {len(pairs)} pairs" if pairs else "")
            + f" → {out / test.name}"
        )
        results[test.name] = await evaluate(
            questions,
            contexts.get("crag", tctx),
            systems=[v.label for v in variants],
            out=out / test.name,
            pairs=pairs,
            pair_sources=pair_sources(pairs or [], every_question),
            questions_file=str(test.questions),
            pairs_file=str(test.pairs or ""),
            quiet=quiet,
            grid_step=grid_step,
            graders=graders,
            contexts=contexts,
            fitted_on=[t.name for t in train],
        )
    return results
