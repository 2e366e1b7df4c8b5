"""Async code for sync callers: a script, a notebook's running loop, `graph.invoke`.

crag's nodes are async. Sync callers get one background event loop per process,
so cached async clients (an OpenAI connection pool) always live in the same loop,
and a caller that already runs a loop (a notebook) is never asked to nest one.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar, cast

T = TypeVar("T")
P = ParamSpec("P")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="crag-loop", daemon=True).start()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result, run on the background loop; safe inside a running loop."""

    async def caught() -> tuple[bool, Any]:
        try:
            return True, await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a KeyboardInterrupt must reach the caller, not end the loop
            return False, exc

    future = asyncio.run_coroutine_threadsafe(caught(), _background_loop())
    try:
        ok, value = future.result()
    except BaseException:  # the caller gave up (Ctrl-C): stop the work too
        future.cancel()
        raise
    if not ok:
        raise value
    return cast(T, value)


def synchronous(
    function: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str
) -> Callable[P, T]:
    """`function` as a plain call with the same arguments, run by `run_sync`."""

    @functools.wraps(function)  # its signature, for help() and editors
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(function(*args, **kwargs))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    return call


def iterate_sync(items: AsyncIterator[T]) -> Iterator[T]:
    """An async iterator's items, produced on the background loop as they come.

    Leaving the loop early (break, an exception) cancels the producer.
    """
    handoff: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stopped = threading.Event()

    def hand(entry: tuple[str, Any]) -> None:
        while not stopped.is_set():  # a consumer that left never takes it
            try:
                handoff.put(entry, timeout=0.1)
                return
            except queue.Full:
                continue

    async def produce() -> None:
        outcome: tuple[str, Any] = ("done", None)
        try:
            async for item in items:
                await asyncio.to_thread(hand, ("item", item))
        except asyncio.CancelledError:
            return
        except BaseException as exc:  # handed to the consumer, raised there
            outcome = ("error", exc)
        await asyncio.to_thread(hand, outcome)

    future = asyncio.run_coroutine_threadsafe(produce(), _background_loop())
    try:
        while True:
            kind, value = handoff.get()
            if kind == "error":
                raise value
            if kind == "done":
                return
            yield value
    finally:
        stopped.set()
        future.cancel()
