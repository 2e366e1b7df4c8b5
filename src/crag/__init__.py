"""crag: Corrective RAG over a folder of books, as a LangGraph agent."""

from __future__ import annotations

from typing import Any

from crag.offline import use_offline_defaults

use_offline_defaults()  # before any library that reads them is imported

__all__ = ["Context", "aask", "ask", "graph"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy: importing crag must not build the graph, load a model or open a store.
    if name == "graph":
        from crag.graph import graph

        return graph
    if name in ("ask", "aask"):
        from crag import api

        return getattr(api, name)
    if name == "Context":
        from crag.context import Context

        return Context
    raise AttributeError(f"module 'crag' has no attribute {name!r}")
