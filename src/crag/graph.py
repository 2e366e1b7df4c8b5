"""The CRAG graph: condense → cache_lookup → split → retrieve → grade → (refine |
rewrite → web_search → refine) → generate → verify.

A question the tenant's answer cache already answers ends at cache_lookup. A question
of several parts goes from grade to one grade_part per part and back, then on.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send

from crag.aio import iterate_sync, run_sync
from crag.context import Context, served_schema
from crag.nodes.generate import generate
from crag.nodes.grade import grade, grade_part, part_sends
from crag.nodes.refine import refine
from crag.nodes.retrieve import after_lookup, cache_lookup, condense, retrieve, split
from crag.nodes.trail import Node
from crag.nodes.verify import verify
from crag.nodes.web_search import rewrite, web_search
from crag.state import InputState, State

NODES: dict[str, Node] = {
    "condense": condense,
    "cache_lookup": cache_lookup,
    "split": split,
    "retrieve": retrieve,
    "grade": grade,
    "grade_part": grade_part,
    "rewrite": rewrite,
    "web_search": web_search,
    "refine": refine,
    "generate": generate,
    "verify": verify,
}


class Graph(CompiledStateGraph[State, Context, InputState, State]):
    """A compiled crag graph. The nodes are async; `invoke` and `stream` drive the async
    versions on crag's background loop, so sync callers and notebooks can use them. A
    server reads every knob of its context by flat name (`served_schema`)."""

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        return run_sync(self.ainvoke(*args, **kwargs))

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        return iterate_sync(self.astream(*args, **kwargs))

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        return served_schema(super().get_context_jsonschema())


def compiled(builder: StateGraph[State, Context, InputState, State], **kwargs: Any) -> Graph:
    """`builder.compile(**kwargs)` as a `Graph` (same object, with the sync entry points)."""
    graph = builder.compile(**kwargs)
    graph.__class__ = Graph  # compile() has no hook for the class it builds
    return cast(Graph, graph)


def route_after_grade(state: State) -> Literal["refine", "rewrite"] | list[Send]:
    """correct → refine the library's good docs; incorrect and ambiguous → one web path.
    A question of several parts first has each part graded (`grade_part`)."""
    if sends := part_sends(state):
        return sends
    return "refine" if state.get("verdict") == "correct" else "rewrite"


def build() -> StateGraph[State, Context, InputState, State]:
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    for name, node in NODES.items():
        builder.add_node(name, node)
    builder.add_edge(START, "condense")
    builder.add_edge("condense", "cache_lookup")
    builder.add_conditional_edges("cache_lookup", after_lookup)
    builder.add_edge("split", "retrieve")
    builder.add_edge("retrieve", "grade")
    builder.add_conditional_edges("grade", route_after_grade, ["grade_part", "refine", "rewrite"])
    builder.add_edge("grade_part", "grade")
    builder.add_edge("rewrite", "web_search")
    builder.add_edge("web_search", "refine")
    builder.add_edge("refine", "generate")
    builder.add_edge("generate", "verify")
    builder.add_edge("verify", END)
    return builder


# No checkpointer: `langgraph dev` adds its own persistence (and refuses one here).
graph: Graph = compiled(build(), name="crag")
