"""Who gets the local model next: its slots, handed out first come, first served by
graph run. The model decodes `n` calls together; the rest wait in line, and a run that
came first keeps its place for all of its calls."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import weakref


class Slots:
    """A model's free slots, handed out first come, first served by run: a freed slot goes
    to the waiting call of the run that came first (the run whose first call asked
    earliest), then to the call that asked first. A run's later calls (verify after
    generate, a grade after a rewrite) so go before the first calls of runs that came
    after it, and runs finish in the order they came instead of all together."""

    def __init__(self, n: int = 1) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._waiting: list[tuple[float, int, threading.Event]] = []  # a heap
        self._asked = itertools.count()

    def acquire(self, timeout: float | None = None, *, came: float | None = None) -> bool:
        """Take a slot; False if none came free within `timeout` seconds. `came`: when
        the caller's run came (time.monotonic()); the call itself, if not given."""
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return True
            turn = threading.Event()
            entry = (time.monotonic() if came is None else came, next(self._asked), turn)
            heapq.heappush(self._waiting, entry)
        if turn.wait(timeout):
            return True
        with self._lock:
            if turn.is_set():  # handed over just as the wait ran out
                return True
            self._waiting.remove(entry)
            heapq.heapify(self._waiting)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiting:  # the slot passes straight to the first come
                heapq.heappop(self._waiting)[2].set()
            else:
                self._free += 1


class _Arrivals:
    """When each graph run first asked the model, keyed by the run's context object
    (LangGraph hands one object to every node of a run, another to the next run)."""

    def __init__(self) -> None:
        self._came: dict[int, float] = {}
        # Re-entrant: the garbage collector may run a dead run's `_forget` inside `came`.
        self._lock = threading.RLock()

    def came(self) -> float | None:
        """The current run's arrival; None outside a graph run."""
        try:
            from langgraph.runtime import get_runtime

            run = get_runtime().context
        except (ImportError, RuntimeError):
            return None
        if run is None:
            return None
        key = id(run)
        with self._lock:
            if key not in self._came:
                self._came[key] = time.monotonic()
                weakref.finalize(run, self._forget, key)
            return self._came[key]

    def _forget(self, key: int) -> None:
        with self._lock:
            self._came.pop(key, None)


ARRIVALS = _Arrivals()
