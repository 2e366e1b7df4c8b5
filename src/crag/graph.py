"""The CRAG graph: retrieve → grade → (refine | rewrite → web_search → refine) → generate.

A question the tenant's answer cache already answers takes the same path, each node
passing on the cached result's keys it owns.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from crag.aio import iterate_sync, run_sync
from crag.context import Context
from crag.nodes.generate import generate
from crag.nodes.grade import grade
from crag.nodes.refine import refine
from crag.nodes.retrieve import retrieve
from crag.nodes.rewrite import rewrite
from crag.nodes.trail import Node
from crag.nodes.web_search import web_search
from crag.state import InputState, State

NODES: dict[str, Node] = {
    "retrieve": retrieve,
    "grade": grade,
    "rewrite": rewrite,
    "web_search": web_search,
    "refine": refine,
    "generate": generate,
}


class Graph(CompiledStateGraph[State, Context, InputState, State]):
    """A compiled crag graph. The nodes are async; `invoke` and `stream` drive the async
    versions on crag's background loop, so sync callers and notebooks can use them."""

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        return run_sync(self.ainvoke(*args, **kwargs))

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return iterate_sync(self.astream(*args, **kwargs))


def compiled(builder: StateGraph[State, Context, InputState, State], **kwargs: Any) -> Graph:
    """`builder.compile(**kwargs)` as a `Graph` (same object, with the sync entry points)."""
    graph = builder.compile(**kwargs)
    graph.__class__ = Graph  # compile() has no hook for the class it builds
    return cast(Graph, graph)


def route_after_grade(state: State) -> Literal["refine", "rewrite"]:
    """correct → refine the library's good docs; incorrect and ambiguous → one web path."""
    return "refine" if state.get("verdict") == "correct" else "rewrite"


def build() -> StateGraph[State, Context, InputState, State]:
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    for name, node in NODES.items():
        builder.add_node(name, node)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "grade")
    builder.add_conditional_edges("grade", route_after_grade)
    builder.add_edge("rewrite", "web_search")
    builder.add_edge("web_search", "refine")
    builder.add_edge("refine", "generate")
    builder.add_edge("generate", END)
    return builder


# No checkpointer: `langgraph dev` adds its own persistence (and refuses one here).
graph: Graph = compiled(build(), name="crag")
