"""split: a question of several parts (a comparison, two questions in one) cut into the
parts grade grades each on its own: by the rules of its form, or by the chat model
where its form suggests parts. Interrupted before `retrieve`, the parts can be read
and edited."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from crag.context import Context
from crag.grading.decompose import Split, decompose
from crag.nodes.trail import context_of, note, recorded
from crag.state import QuestionSplit, State


@recorded
async def split(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = context_of(runtime)
    found = await decompose(state["question"], ctx) if ctx.retrieval.decompose else Split([], "off")
    if found.parts:
        detail = f"{len(found.parts)} parts, by {found.how}: " + "; ".join(found.parts)
    else:
        detail = "decomposition off" if found.how == "off" else "one part"
    made = QuestionSplit(parts=list(found.parts), how=found.how, compares=found.compares)
    return {"split": made, **note(detail)}


def split_of(state: State) -> Split:
    """The run's split as `crag.grading.decompose` reads it (no parts before `split`)."""
    made = state.get("split")
    return Split(made["parts"], made["how"], made["compares"]) if made else Split([], "off")
