"""Part of crag's graph, for the lab's runs that need only some of its nodes (tuning,
grader comparison, baselines). The runtime never builds one."""

from __future__ import annotations

import functools

from langgraph.graph import END, START, StateGraph

from crag.context import Context
from crag.graph import NODES, Graph, compiled
from crag.nodes.trail import Node
from crag.state import InputState, State


@functools.cache
def steps(*nodes: str | tuple[str, Node]) -> Graph:
    """Nodes in a line, each crag's by name or a (name, node) pair: the same nodes and
    state as the full graph, for runs that need part of it (tuning, baselines).
    E.g. `steps("retrieve", "grade")`."""
    named = [(n, NODES[n]) if isinstance(n, str) else n for n in nodes]
    builder = StateGraph(State, context_schema=Context, input_schema=InputState)
    for name, node in named:
        builder.add_node(name, node)
    order = [name for name, _ in named]
    for a, b in zip([START, *order], [*order, END], strict=True):
        builder.add_edge(a, b)
    return compiled(builder, name="+".join(order))
