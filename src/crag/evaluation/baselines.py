"""The baselines crag is measured against, built from crag's own nodes and providers.

* naive RAG: retrieve → generate from the k chunks; no grading, no refinement.
* the tutorial rule (the common LangGraph "CRAG" tutorial): a binary yes/no grade per
  document (the LLM judge, or similarity >= 0.5 without an LLM), a web search if ANY
  document is graded irrelevant, no refinement; the context is the relevant
  documents plus the web results.

Same store, same models, same generate node: each returns a record shaped like
`crag.api.summary(state)` plus the context strips (`crag.evaluation.records`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from crag.context import Context
from crag.evaluation.nodecall import apply, call_node, step
from crag.evaluation.records import record_from_state
from crag.nodes.generate import generate
from crag.nodes.refine import STRIDE
from crag.nodes.retrieve import retrieve
from crag.nodes.rewrite import rewrite
from crag.nodes.web_search import web_search
from crag.providers.graders import RelevanceGrader, make_grader
from crag.state import Passage, State, Strip, Verdict

#: The tutorial's binary cut: P(yes) >= 0.5 for the judge, stretched cosine for similarity.
TUTORIAL_CUT = 0.5

Baseline = Callable[[str, Context], Awaitable[dict[str, Any]]]


def whole_documents(docs: Sequence[Passage]) -> list[Strip]:
    """Documents as they are, one strip each (no refinement), in rank order."""
    return [
        {
            "doc_id": d["id"],
            "position": rank * STRIDE,
            "text": d["text"],
            "score": float(d.get("similarity", 0.0)),
        }
        for rank, d in enumerate(docs)
    ]


async def _answer(state: State, context_docs: Sequence[Passage], ctx: Context) -> State:
    kept = whole_documents(context_docs)
    state = apply(state, {"kept_strips": kept})
    return apply(state, await call_node(generate, state, ctx))


def _record(state: State, retrieved: Sequence[Passage], started: float) -> dict[str, Any]:
    return record_from_state(state, time.perf_counter() - started, retrieved)


async def naive_rag(question: str, ctx: Context) -> dict[str, Any]:
    """retrieve → generate from all k chunks."""
    started = time.perf_counter()
    state: State = {"question": question}
    state = apply(state, await call_node(retrieve, state, ctx))
    docs = state.get("docs") or []
    state = await _answer(state, docs, ctx)
    return _record(state, docs, started)


def tutorial_grader(ctx: Context) -> RelevanceGrader:
    """The LLM judge; embedding similarity when the run has no language model."""
    no_llm = ctx.grader == "similarity" or (ctx.chat_model == "extractive" and not ctx.judge_model)
    return make_grader(ctx.with_overrides(grader="similarity" if no_llm else "judge"))


def tutorial_verdict(relevant: int, total: int) -> Verdict:
    """What the tutorial's route amounts to, on crag's scale: all relevant → library
    only (correct); some → library + web (ambiguous); none → web only (incorrect)."""
    if relevant == total and total:
        return "correct"
    return "ambiguous" if relevant else "incorrect"


async def tutorial_rag(question: str, ctx: Context) -> dict[str, Any]:
    """Binary grades; web search if ANY document fails; relevant docs + web docs."""
    started = time.perf_counter()
    state: State = {"question": question}
    state = apply(state, await call_node(retrieve, state, ctx))
    docs = state.get("docs") or []

    t0 = time.perf_counter()
    grader = tutorial_grader(ctx)
    scores = await grader.ascore(question, [d["text"] for d in docs])
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    relevant = [d for d in scored if d["score"] >= TUTORIAL_CUT]
    verdict = tutorial_verdict(len(relevant), len(scored))
    detail = f"{len(relevant)}/{len(scored)} relevant by {grader.name} >= {TUTORIAL_CUT}"
    state = apply(
        state,
        {
            "docs": scored,
            "scores": [round(s, 4) for s in scores],
            "grader": f"{grader.name} (binary)",
            "verdict": verdict,
            "good_docs": relevant,
            "path": [step("grade", time.perf_counter() - t0, detail)],
        },
    )
    if len(relevant) < len(scored) or not scored:
        state = apply(state, await call_node(rewrite, state, ctx))
        state = apply(state, await call_node(web_search, state, ctx))
    web = state.get("web_docs") or []
    state = await _answer(state, [*relevant, *web], ctx)
    return _record(state, [*scored, *web], started)


BASELINES: dict[str, Baseline] = {"naive": naive_rag, "tutorial": tutorial_rag}
