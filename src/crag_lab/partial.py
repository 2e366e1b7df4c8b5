"""Part of crag's graph, for the lab's runs that need only some of its nodes (tuning,
grader comparison, baselines). The runtime never builds one."""

from __future__ import annotations

import functools

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from crag.context import Context
from crag.graph import NODES, Graph, compiled
from crag.nodes.grade import part_sends
from crag.nodes.trail import Node
from crag.state import InputState, State


@functools.cache
def steps(*nodes: str | tuple[str, Node]) -> Graph:
    """Nodes in a line after crag's `condense` (the run's start), each crag's by name or
    a (name, node) pair: the same nodes and state as the full graph, for runs that need
    part of it (tuning, baselines). E.g. `steps("split", "retrieve", "grade")`."""
    named = [(n, NODES[n]) if isinstance(n, str) else n for n in ("condense", *nodes)]
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    for name, node in named:
        builder.add_node(name, node)
    order = [name for name, _ in named]
    for a, b in zip([START, *order], [*order, END], strict=True):
        if a == "grade":  # a question of several parts has each graded, as in crag's graph
            builder.add_node("grade_part", NODES["grade_part"])
            builder.add_conditional_edges(
                "grade", functools.partial(_parts_or, b), ["grade_part", b]
            )
            builder.add_edge("grade_part", "grade")
        else:
            builder.add_edge(a, b)
    return compiled(builder, name="+".join(order))


def _parts_or(then: str, state: State) -> list[Send] | str:
    """Each part of a question of several to grade_part, else the next node."""
    return part_sends(state) or then
