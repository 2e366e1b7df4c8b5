"""A run's arrival is forgotten when its context dies, even in the middle of another's."""

from __future__ import annotations

import threading

from crag.models import _Arrivals


def test_a_run_forgotten_inside_another_arrival_does_not_deadlock() -> None:
    """`came` makes a finalizer while it holds its lock; making it can set the garbage
    collector off, which runs a dead run's `_forget` on the same thread."""
    arrivals = _Arrivals()
    arrivals._came[7] = 1.0

    def collector_inside_came() -> None:
        with arrivals._lock:
            arrivals._forget(7)

    worker = threading.Thread(target=collector_inside_came, daemon=True)
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert 7 not in arrivals._came
