"""The lab's graders, plugged into crag's grader table by the `crag.graders` entry
point: loaded only when a run names one of them (or the saved grader `offline` reads),
so the runtime never imports the lab.

- `features`: the feature evaluator (answer types, consensus, lift), no LLM;
- `trained`: the feature evaluator refitted on a user's labels by `crag train-grader`;
- `mean`: the offline grader and the LLM judge, averaged on every passage;
- `reader`: a cross-encoder trained by `crag train-reader`.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from crag.context import Context
from crag.grading.graders import RelevanceGrader
from crag.grading.registry import GRADERS, judge_grader, offline_grader


@GRADERS.register("features", "crag's feature evaluator, no LLM (the lab's)")
def _features(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag_lab.graders.features import FeatureGrader

    return FeatureGrader(embeddings, library=library)


@GRADERS.register("trained", "the evaluator saved by `crag train-grader` (required)")
def _trained(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag_lab.graders.trained import load_trained_grader

    grader = load_trained_grader(ctx, embeddings, required=True, library=library)
    assert grader is not None  # required=True raises instead
    return grader


@GRADERS.register("mean", "offline and the LLM judge, averaged on every document (the lab's)")
def _mean(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag_lab.graders.mean import MeanGrader

    judge = judge_grader(ctx, embeddings, library)
    first = offline_grader(ctx, embeddings, library)
    return MeanGrader(first, judge, ctx.grading.judge_weight)


@GRADERS.register("reader", "a cross-encoder trained by `crag train-reader` (the lab's)")
def _reader(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag_lab.graders.reader import make_reader_grader

    return make_reader_grader(ctx)
