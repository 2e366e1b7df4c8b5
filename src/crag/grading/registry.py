"""The graders by name (`grading.grader`), and the two questions every node asks:
which grader scores this question's documents, and which scores its strips.

Adding a grader is one module and one `GRADERS.register` entry below. Each factory
imports its grader when called: naming the graders (help, checks) loads none of them.
The lab's graders (`features`, `trained`, `mean`, `reader`) plug in through the
`crag.graders` entry point (`crag_lab.graders`), loaded only when a run names one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from crag.context import Context
from crag.errors import ProviderError
from crag.models.chat import EXTRACTIVE, judges_by_default, make_chat_model
from crag.models.embeddings import embeddings_for
from crag.registry import Registry

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from crag.grading.graders import RelevanceGrader

#: (context, embeddings, library): `library` is true when the passages are the user's
#: library's chunks, false for search results (independent pages that repeat a fact).
Factory = Callable[[Context, "Embeddings", bool], "RelevanceGrader"]
GRADERS: Registry[Factory] = Registry("grader", plugins="crag.graders")
#: The graders named with a model after a colon.
WITH_MODEL = ("cross-encoder",)
FORMS = "a grader's name, or cross-encoder:<hub model or path>"
#: The grader `crag train-grader` saves, in the tenant's grader folder.
TRAINED_FILE = "grader.json"

log = logging.getLogger(__name__)


def trained_path(ctx: Context) -> Path:
    """Where the run's trained grader is saved (`grader_file`, or the tenant's)."""
    return ctx.grading.grader_file or ctx.store.grader_dir / TRAINED_FILE


@GRADERS.register(
    "auto",
    "offline; with a chat model on a server (openai:<model>) as judge_model or chat_model, "
    "the cascade: that model judges the uncertain band",
)
def _auto(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    if _server_judge(ctx):
        return _cascade(ctx, embeddings, library)
    return offline_grader(ctx, embeddings, library)


@GRADERS.register(
    "offline", "the trained grader if `crag train-grader` saved one, else embedding similarity"
)
def offline_grader(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    # Held out by library, plain similarity decides better than the feature grader with
    # weights fitted on another library (docs/evaluation.md): it has nothing to fit.
    if trained_path(ctx).exists() and "trained" in GRADERS:
        try:
            return GRADERS["trained"](ctx, embeddings, library)
        except ProviderError as exc:
            log.warning("ignoring unusable trained grader %s", exc)
    return _similarity(ctx, embeddings, library)


@GRADERS.register("similarity", "embedding similarity alone")
def _similarity(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag.grading.graders import SimilarityGrader

    return SimilarityGrader(embeddings, ctx.grading.strip_weight, ctx.refinement.strip_sentences)


def _cross_encoder_ready() -> None:
    from crag.grading.cross_encoder import check_installed

    check_installed()


@GRADERS.register(
    "cross-encoder",
    "cross-encoder:<model>: a hub cross-encoder or reranker (sentence-transformers; "
    "quality not measured here)",
    ready=_cross_encoder_ready,
)
def _cross_encoder(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag.grading.cross_encoder import make_cross_encoder_grader

    _, model = GRADERS.split(ctx.grading.grader, FORMS)
    return make_cross_encoder_grader(model)


@GRADERS.register("judge", "the LLM judge (judge_model) on every document")
def judge_grader(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag.grading.judge import JudgeGrader

    spec = ctx.models.judge
    if spec == EXTRACTIVE:
        raise ProviderError(
            f"grader={ctx.grading.grader} needs a chat model (chat_model is 'extractive')"
        )
    # The in-process llama.cpp engine runs one request at a time, and interleaved
    # requests lose its prompt-prefix cache: measured 2.7x slower than one by one.
    return JudgeGrader(make_chat_model(spec, ctx), max_concurrency=1 if spec == "local" else 4)


@GRADERS.register("cascade", "offline for clear cases, the LLM judge for the uncertain band")
def _cascade(ctx: Context, embeddings: Embeddings, library: bool) -> RelevanceGrader:
    from crag.grading.graders import CascadeGrader

    judge = judge_grader(ctx, embeddings, library)
    first = offline_grader(ctx, embeddings, library)
    return CascadeGrader(first, judge, ctx.grading.cascade_low, ctx.grading.cascade_high)


def _server_judge(ctx: Context) -> bool:
    """Whether the judge would be a chat model that `auto` lets judge (a server's)."""
    return judges_by_default(ctx.models.judge)


#: The graders that ask the LLM judge, and those that score with the offline grader (so
#: with a grader `crag train-grader` saved, where there is one).
_JUDGED = ("judge", "cascade", "mean")
_OFFLINE_FIRST = ("auto", "offline", "trained", "cascade", "mean")


def uses_llm(ctx: Context) -> bool:
    """Whether the run's grader asks a chat model (and so can fail when its server does)."""
    return ctx.grading.grader in _JUDGED or (ctx.grading.grader == "auto" and _server_judge(ctx))


def judge_spec(ctx: Context) -> str | None:
    """The chat model the run's grader asks, if it asks one."""
    return ctx.models.judge if uses_llm(ctx) else None


def reads_trained(ctx: Context) -> bool:
    """Whether the run's scores depend on the trained grader saved in the home."""
    return ctx.grading.grader in _OFFLINE_FIRST


def without_llm(ctx: Context) -> Context:
    """`ctx` grading with no chat model: the offline grader where its grader asks one."""
    return ctx.with_overrides(grader="offline") if uses_llm(ctx) else ctx


def _build(ctx: Context, name: str, library: bool = False) -> RelevanceGrader:
    base, model = GRADERS.split(name, FORMS)  # an unknown name fails here, before any load
    if model and base not in WITH_MODEL:
        raise ProviderError(f"grader {name!r}: only {', '.join(WITH_MODEL)} take a :<model>")
    return GRADERS[base](ctx, embeddings_for(ctx), library)


def make_grader(ctx: Context, *, library: bool) -> RelevanceGrader:
    """The grader that scores a question's documents: the library's chunks
    (`library`), or results of an external search."""
    return _build(ctx, ctx.grading.grader, library)


def make_strip_grader(ctx: Context) -> RelevanceGrader:
    """The grader that scores a question's strips in refinement. Never the LLM judge: a
    question has dozens of strips, and the judge costs about a second each."""
    offline = without_llm(ctx)
    return _build(offline, offline.grading.grader)
