"""web_search: ask the external source; a failure is recorded, never fatal."""

from __future__ import annotations

from crag.context import Context
from crag.providers.errors import ProviderError
from crag.providers.graders import make_grader
from crag.providers.search import SearchError, make_search
from crag.state import Passage, State
from crag.trail import NodeResult, recorded


@recorded("web_search")
async def web_search(state: State, ctx: Context) -> NodeResult:
    queries = [state.get("web_query") or state["question"], state["question"]]
    try:
        search = make_search(ctx)
        docs = await search.asearch(queries, ctx.web_k)
    except (SearchError, ProviderError) as exc:
        return {"web_docs": [], "web_error": str(exc)}, f"failed: {exc}"
    # External results are graded like library chunks (one batch): refine keeps only
    # those >= lower, so off-topic results never reach the answer.
    scores = await make_grader(ctx).ascore(state["question"], [d["text"] for d in docs])
    graded = [Passage(**d, score=round(s, 4)) for d, s in zip(docs, scores, strict=True)]
    detail = f"{len(docs)} results from {search.name}: " + ", ".join(f"{s:.2f}" for s in scores)
    return {"web_docs": graded, "web_error": ""}, detail
