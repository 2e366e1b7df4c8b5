"""The baselines crag is measured against, built from crag's own nodes and providers.

* naive RAG: retrieve → generate from the k chunks; no grading, no refinement.
* the tutorial rule (the common LangGraph "CRAG" tutorial): a binary yes/no grade per
  document (the LLM judge, or similarity >= 0.5 without an LLM), a web search if ANY
  document is graded irrelevant, no refinement; the context is the relevant
  documents plus the web results.

Same store, same models, same nodes: each is a small LangGraph graph of its own,
and returns a record shaped like crag's (`crag_lab.records`). They decline as a user
of those designs would see it: when the generator finds no answer in what it is given
(with a language model, its own "not found"), not through crag's verification.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from crag.context import Context
from crag.grading.graders import RelevanceGrader
from crag.grading.registry import make_grader
from crag.graph import NODES, Graph, compiled
from crag.nodes.refine import position
from crag.nodes.trail import context_of
from crag.state import InputState, Passage, State, Strip, Verdict
from crag_lab.partial import steps
from crag_lab.records import record_from_state

#: The tutorial's binary cut: P(yes) >= 0.5 for the judge, stretched cosine for similarity.
TUTORIAL_CUT = 0.5

Baseline = Callable[[str, Context], Awaitable[dict[str, Any]]]


def whole_documents(docs: Sequence[Passage]) -> list[Strip]:
    """Documents as they are, one strip each (no refinement), in rank order."""
    return [
        {
            "doc_id": d["id"],
            "position": position(rank, 0),
            "text": d["text"],
            "score": float(d.get("similarity", 0.0)),
        }
        for rank, d in enumerate(docs)
    ]


async def all_retrieved(state: State, *, runtime: Runtime[Context]) -> dict[str, Any]:
    """Naive RAG's context: every retrieved chunk, whole."""
    return {"kept_strips": whole_documents(state.get("retrieved") or [])}


async def relevant_and_web(state: State, *, runtime: Runtime[Context]) -> dict[str, Any]:
    """The tutorial's context: the documents graded relevant, then the web results."""
    docs = [*(state.get("good_docs") or []), *(state.get("web_docs") or [])]
    return {"kept_strips": whole_documents(docs)}


def tutorial_grader(ctx: Context) -> RelevanceGrader:
    """The LLM judge; embedding similarity when the run has no language model."""
    no_llm = ctx.grading.grader == "similarity" or (
        ctx.models.chat_model == "extractive" and not ctx.models.judge_model
    )
    grader = "similarity" if no_llm else "judge"
    return make_grader(ctx.with_overrides(grader=grader), library=True)


def tutorial_verdict(relevant: int, total: int) -> Verdict:
    """What the tutorial's route amounts to, on crag's scale: all relevant → library
    only (correct); some → library + web (ambiguous); none → web only (incorrect)."""
    if relevant == total and total:
        return "correct"
    return "ambiguous" if relevant else "incorrect"


async def binary_grade(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """A yes/no grade per document, recorded in the path as crag's grade step."""
    t0 = time.perf_counter()
    docs = state.get("retrieved") or []
    grader = tutorial_grader(context_of(runtime))
    scores = await grader.ascore(state["question"], [d["text"] for d in docs])
    scored = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    relevant = [d for d in scored if d["score"] >= TUTORIAL_CUT]
    detail = f"{len(relevant)}/{len(scored)} relevant by {grader.name} >= {TUTORIAL_CUT}"
    return {
        "docs": scored,
        "scores": [round(s, 4) for s in scores],
        "grader": f"{grader.name} (binary)",
        "verdict": tutorial_verdict(len(relevant), len(scored)),
        "good_docs": relevant,
        "path": [
            {"node": "grade", "seconds": round(time.perf_counter() - t0, 3), "detail": detail}
        ],
    }


def any_irrelevant(state: State) -> Literal["rewrite", "context"]:
    """The tutorial's route: the web as soon as ANY document fails (CRAG's rule is ALL)."""
    docs = state.get("docs") or []
    return "rewrite" if len(state.get("good_docs") or []) < len(docs) or not docs else "context"


def _tutorial() -> Graph:
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    for name in ("condense", "retrieve", "rewrite", "web_search", "generate", "verify"):
        builder.add_node(name, NODES[name])
    builder.add_node("grade", binary_grade)
    builder.add_node("context", relevant_and_web)
    builder.add_edge(START, "condense")
    builder.add_edge("condense", "retrieve")  # no split: the tutorial grades the question
    builder.add_edge("retrieve", "grade")
    builder.add_conditional_edges("grade", any_irrelevant)
    builder.add_edge("rewrite", "web_search")
    builder.add_edge("web_search", "context")
    builder.add_edge("context", "generate")
    builder.add_edge("generate", "verify")
    builder.add_edge("verify", END)
    return compiled(builder, name="tutorial-rag")


NAIVE = steps("retrieve", ("context", all_retrieved), "generate", "verify")
TUTORIAL = _tutorial()


async def naive_rag(question: str, ctx: Context) -> dict[str, Any]:
    """retrieve → generate from all k chunks."""
    started = time.perf_counter()
    plain = ctx.with_overrides(
        verify=False, candidates=ctx.retrieval.k
    )  # the k nearest, as they come
    state = cast(State, await NAIVE.ainvoke(InputState(question=question), context=plain))
    return record_from_state(state, time.perf_counter() - started, state.get("retrieved") or [])


async def tutorial_rag(question: str, ctx: Context) -> dict[str, Any]:
    """Binary grades; web search if ANY document fails; relevant docs + web docs."""
    started = time.perf_counter()
    plain = ctx.with_overrides(verify=False, candidates=ctx.retrieval.k)
    state = cast(State, await TUTORIAL.ainvoke(InputState(question=question), context=plain))
    retrieved = [*(state.get("docs") or []), *(state.get("web_docs") or [])]
    return record_from_state(state, time.perf_counter() - started, retrieved)


BASELINES: dict[str, Baseline] = {"naive": naive_rag, "tutorial": tutorial_rag}
