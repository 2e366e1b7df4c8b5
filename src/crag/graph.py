"""The CRAG graph: retrieve → grade → (refine | rewrite → web_search → refine) → generate."""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph

from crag.context import Context
from crag.nodes.generate import generate
from crag.nodes.grade import grade
from crag.nodes.refine import refine
from crag.nodes.retrieve import retrieve
from crag.nodes.rewrite import rewrite
from crag.nodes.web_search import web_search
from crag.state import InputState, State


def route_after_grade(state: State) -> Literal["refine", "rewrite"]:
    """correct → refine the library's good docs; incorrect and ambiguous → one web path."""
    return "refine" if state.get("verdict") == "correct" else "rewrite"


def build() -> StateGraph[State, Context, InputState, State]:
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    builder.add_node("retrieve", retrieve)
    builder.add_node("grade", grade)
    builder.add_node("rewrite", rewrite)
    builder.add_node("web_search", web_search)
    builder.add_node("refine", refine)
    builder.add_node("generate", generate)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "grade")
    builder.add_conditional_edges("grade", route_after_grade)
    builder.add_edge("rewrite", "web_search")
    builder.add_edge("web_search", "refine")
    builder.add_edge("refine", "generate")
    builder.add_edge("generate", END)
    return builder


# No checkpointer: `langgraph dev` adds its own persistence (and refuses one here).
graph = build().compile(name="crag")
