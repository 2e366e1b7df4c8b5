"""web_search: ask the external source; a failure is recorded, never fatal."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.grading.registry import make_grader
from crag.nodes.trail import context_of, note, recorded
from crag.retrieval.external import make_search
from crag.state import Passage, State


@recorded
async def web_search(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    queries = [state.get("web_query") or state["question"], state["question"]]
    try:
        search = make_search(ctx)
        docs = await search.asearch(queries, ctx.web_k)
        # External results are graded like library chunks (one batch): refine keeps
        # only those >= lower, so off-topic results never reach the answer.
        scores = await make_grader(ctx).ascore(state["question"], [d["text"] for d in docs])
    except (SearchError, ProviderError) as exc:
        return {"web_docs": [], "web_error": str(exc), **note(f"failed: {exc}")}
    except Exception as exc:  # ungraded results must not reach the answer either
        error = f"grading the external results failed: {type(exc).__name__}: {exc}"
        return {"web_docs": [], "web_error": error, **note(error)}
    graded = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    detail = f"{len(docs)} results from {search.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    return {"web_docs": graded, "web_error": "", **note(detail)}
