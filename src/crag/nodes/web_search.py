"""web_search: ask the external source; a failure is recorded, never fatal."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.errors import ProviderError, SearchError
from crag.grading.registry import make_grader
from crag.nodes.trail import context_of, note, recorded
from crag.redact import redact
from crag.retrieval.external import make_search
from crag.state import Passage, State


@recorded
async def web_search(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    queries = [state.get("web_query") or state["question"], state["question"]]
    masked = list(state.get("redacted") or [])  # what rewrite already masked
    try:
        search = make_search(ctx)
        # secrets stay on this machine (a source that does not say where it goes: masked)
        if getattr(search, "leaves_machine", True) and ctx.redact_queries:
            cleaned = [redact(q) for q in queries]
            queries = [c.text for c in cleaned]
            masked = list(dict.fromkeys([*masked, *(k for c in cleaned for k in c.removed)]))
        docs = await search.asearch(queries, ctx.web_k)
        # External results are graded like library chunks (one batch): refine keeps
        # only those >= lower, so off-topic results never reach the answer.
        scores = await make_grader(ctx).ascore(state["question"], [d["text"] for d in docs])
    except (SearchError, ProviderError) as exc:
        return {
            "web_docs": [],
            "web_error": str(exc),
            "redacted": masked,
            **note(f"failed: {exc}"),
        }
    except Exception as exc:  # ungraded results must not reach the answer either
        error = f"grading the external results failed: {type(exc).__name__}: {exc}"
        return {"web_docs": [], "web_error": error, "redacted": masked, **note(error)}
    graded = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    detail = f"{len(docs)} results from {search.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    if masked:
        detail += f"; masked in the query: {', '.join(masked)}"
    return {"web_docs": graded, "web_error": "", "redacted": masked, **note(detail)}
