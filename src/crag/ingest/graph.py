"""`crag-ingest`: the ingest as a one-node LangGraph graph, for `langgraph dev`.

The node runs the (blocking, CPU-bound) ingest in a worker thread: under
`langgraph dev` blocking calls on the event loop raise `BlockingError`. Progress
events go to the custom stream (`stream_mode="custom"`).
"""

from __future__ import annotations

import asyncio
from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

# typing_extensions, not typing: on Python < 3.12 pydantic (used by langgraph-api
# for the input/output JSON schemas) rejects typing.TypedDict.
from typing_extensions import TypedDict

from crag.context import Context, context_from, served_schema
from crag.errors import CragError
from crag.ingest.indexer import ingest_path


class IngestInput(TypedDict):
    path: str
    prune: NotRequired[bool]
    collection: NotRequired[str]


class IngestOutput(TypedDict, total=False):
    summary: dict[str, Any]
    error: str


class IngestState(IngestInput, IngestOutput):
    pass


def _run_ingest(ctx: Context, state: IngestState, writer: Any) -> IngestOutput:
    try:
        summary = ingest_path(
            ctx,
            state["path"],
            collection=state.get("collection") or None,
            prune=bool(state.get("prune", False)),
            on_event=writer,
        )
    except CragError as exc:
        return {"error": str(exc)}
    result = summary.to_dict()
    out: IngestOutput = {"summary": result}
    if summary.error:
        out["error"] = summary.error
    return out


async def ingest(state: IngestState, runtime: Runtime[Context]) -> IngestOutput:
    """Ingest `path` into the library (or `collection`); returns the run's summary."""
    ctx = context_from(runtime.context)
    writer = runtime.stream_writer
    return await asyncio.to_thread(_run_ingest, ctx, state, writer)


class IngestGraph(CompiledStateGraph[IngestState, Context, IngestInput, IngestOutput]):
    """The compiled ingest graph: a server reads its context's knobs by flat name too."""

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        return served_schema(super().get_context_jsonschema())


def build() -> Any:
    builder = StateGraph(
        IngestState, context_schema=Context, input_schema=IngestInput, output_schema=IngestOutput
    )
    builder.add_node("ingest", ingest)
    builder.add_edge(START, "ingest")
    builder.add_edge("ingest", END)
    graph = builder.compile(name="crag-ingest")
    graph.__class__ = IngestGraph  # compile() has no hook for the class it builds
    return graph


graph = build()
