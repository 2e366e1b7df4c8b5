"""What every node shares: the run's Context, and the audit trail of the path taken."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from crag.context import Context, context_from
from crag.redact import collecting, scrub, secret_values
from crag.state import PartTask, State, Step

#: What a node reads: the state, or what a `Send` gave it (a part of a question).
In = TypeVar("In", State, PartTask)
_Read = TypeVar("_Read", contravariant=True)


class Node(Protocol[_Read]):
    """A graph node as LangGraph calls it: the state, and the runtime by keyword."""

    def __call__(self, state: _Read, *, runtime: Runtime[Context]) -> Awaitable[dict[str, Any]]: ...


NodeBody = Callable[[In, Runtime[Context]], Awaitable[dict[str, Any]]]


def context_of(runtime: Runtime[Context] | None) -> Context:
    """The run's Context; a default one (env-configured) when the caller gave none."""
    return context_from(getattr(runtime, "context", None))


def note(detail: str) -> dict[str, list[Step]]:
    """A node's line in the path; `recorded` stamps it with the node's name and time."""
    return {"path": [{"node": "", "seconds": 0.0, "detail": detail}]}


def with_masked(update: dict[str, Any], kinds: list[str]) -> dict[str, Any]:
    """The update, with the kinds of data a model client masked added to `redacted`."""
    if not kinds:
        return update
    said = update.get("redacted")
    if isinstance(said, Overwrite):  # a run starting afresh
        return {**update, "redacted": Overwrite([*said.value, *kinds])}
    return {**update, "redacted": list(dict.fromkeys([*(said or []), *kinds]))}


def scrubbed(value: Any, secrets: Sequence[str] | None = None) -> Any:
    """A state value without the machine's secrets (see `crag.redact.scrub`); the
    environment is read once per value, not once per string in it."""
    if secrets is None:
        secrets = secret_values()
    if isinstance(value, str):
        return scrub(value, shapes=False, secrets=secrets)
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: scrubbed(v, secrets) for k, v in value.items()}
    return value


#: State fields written from errors: a server's error message may quote a key of any kind.
_FROM_ERRORS = ("web_error",)


def recorded(fn: NodeBody[In]) -> Node[In]:
    """Time a node and record (name, seconds, detail) in the state's path, and what its
    model calls masked (`redacted`). No secret of the machine's reaches the state."""

    async def node(state: In, runtime: Runtime[Context]) -> dict[str, Any]:
        start = time.perf_counter()
        with collecting() as kinds:
            update = with_masked(await fn(state, runtime), kinds)
        secrets = secret_values()
        update = {k: v if k == "messages" else scrubbed(v, secrets) for k, v in update.items()}
        for name in _FROM_ERRORS:
            if isinstance(update.get(name), str):
                update[name] = scrub(update[name], secrets=secrets)
        detail = scrub((update.get("path") or [{"detail": ""}])[0]["detail"], secrets=secrets)
        step: Step = {
            "node": fn.__name__,
            "seconds": round(time.perf_counter() - start, 3),
            "detail": detail,
        }
        return {**update, "path": [step]}

    # Not functools.wraps: __wrapped__ would make LangGraph read the inner signature.
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(node, attr, getattr(fn, attr))
    return node
