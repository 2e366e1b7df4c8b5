"""web_search: ask the external source; a failure is recorded, never fatal."""

from __future__ import annotations

from crag.context import Context
from crag.providers.errors import ProviderError
from crag.providers.search import SearchError, make_search
from crag.state import State
from crag.trail import NodeResult, recorded


@recorded("web_search")
async def web_search(state: State, ctx: Context) -> NodeResult:
    queries = [state.get("web_query") or state["question"], state["question"]]
    try:
        search = make_search(ctx)
        docs = await search.asearch(queries, ctx.web_k)
    except (SearchError, ProviderError) as exc:
        return {"web_docs": [], "web_error": str(exc)}, f"failed: {exc}"
    return {"web_docs": docs, "web_error": ""}, f"{len(docs)} results from {search.name}"
