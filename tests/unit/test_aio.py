"""Sync callers of async code: crag's background loop."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator

import pytest

from crag.aio import iterate_sync, run_sync, synchronous


async def double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


async def interrupted() -> None:
    raise KeyboardInterrupt


async def failing() -> None:
    raise ValueError("bad")


def test_results_errors_and_interrupts_reach_the_caller_and_the_loop_lives_on() -> None:
    assert run_sync(double(2)) == 4
    with pytest.raises(ValueError, match="bad"):
        run_sync(failing())
    with pytest.raises(KeyboardInterrupt):
        run_sync(interrupted())
    assert run_sync(double(3)) == 6  # the loop survived the interrupt


def test_it_works_from_inside_a_running_loop() -> None:
    async def cell() -> int:
        return run_sync(double(5))

    assert asyncio.run(cell()) == 10


async def counting(seen: list[int], fail_at: int | None = None) -> AsyncIterator[int]:
    for i in range(100):
        if i == fail_at:
            raise ValueError(f"item {i}")
        seen.append(i)
        yield i


def test_items_arrive_in_order_and_errors_are_raised_where_they_are_read() -> None:
    assert list(iterate_sync(counting([]))) == list(range(100))
    got = []
    with pytest.raises(ValueError, match="item 3"):
        for item in iterate_sync(counting([], fail_at=3)):
            got.append(item)
    assert got == [0, 1, 2]


def test_leaving_early_stops_the_producer() -> None:
    seen: list[int] = []
    for item in iterate_sync(counting(seen)):
        if item == 2:
            break
    run_sync(asyncio.sleep(0.3))  # let a producer that was not stopped run on
    assert len(seen) <= 4  # at most the item in hand and one waiting to be handed over


def test_a_synchronous_call_takes_the_coroutine_functions_arguments_and_errors() -> None:
    call = synchronous(double, "twice", "Double x, without await.")
    assert call(21) == 42 and call(x=3) == 6
    assert call.__name__ == "twice" and call.__doc__ == "Double x, without await."
    assert inspect.signature(call) == inspect.signature(double)
    with pytest.raises(ValueError, match="bad"):
        synchronous(failing, "failing", "")()
