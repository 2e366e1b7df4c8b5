"""Where `langgraph dev` keeps a run's checkpoints: SQLite in crag's home.

The dev server's own in-memory checkpoints keep a deleted thread's channel values, so a
long-lived server grows with every run it served (docs/operations.md). `langgraph.json`
names `checkpointer` below instead: deleting a thread frees what it held, the server's
memory stays flat, and threads outlive a restart. Its file sits beside the library it
answers from (`home`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from crag.context import Context

log = logging.getLogger(__name__)

#: The server's checkpoints, in crag's home (the command line's threads: `threads.sqlite`).
SERVER_THREADS_FILE = "server_threads.sqlite"


class ServerSaver(AsyncSqliteSaver):
    """SQLite checkpoints that can also forget a cancelled run: the server asks for it
    when a new run on a thread rolls back the one before (`multitask_strategy=rollback`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deleting: set[asyncio.Task[None]] = set()

    async def adelete_thread(self, thread_id: str) -> None:
        """Start deleting the thread's checkpoints and return without waiting. The dev
        server finds the thread's place in its list, awaits this, then removes what
        stands at that place: had this waited, deletions meanwhile would shift the list,
        and another thread would go in its stead (or none, with a 500)."""
        task = asyncio.get_running_loop().create_task(super().adelete_thread(thread_id))
        self._deleting.add(task)
        task.add_done_callback(self._deleted)

    def _deleted(self, task: asyncio.Task[None]) -> None:
        self._deleting.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("deleting a thread's checkpoints failed: %s", exc)

    async def drain(self) -> None:
        """Wait for the deletions started."""
        while self._deleting:
            await asyncio.gather(*self._deleting, return_exceptions=True)

    async def adelete_for_runs(self, run_ids: Iterable[str]) -> None:
        ids = [str(run_id) for run_id in run_ids]
        if not ids:
            return
        await self.setup()
        marks = ",".join("?" * len(ids))
        async with self.lock, self.conn.cursor() as cur:
            await cur.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE "
                f"json_extract(CAST(metadata AS TEXT), '$.run_id') IN ({marks})",
                ids,
            )
            keys = list(await cur.fetchall())
            for table in ("writes", "checkpoints"):
                await cur.executemany(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? "
                    "AND checkpoint_id = ?",
                    keys,
                )
            await self.conn.commit()


@asynccontextmanager
async def checkpointer() -> AsyncIterator[ServerSaver]:
    """The server's checkpointer, open for as long as the server runs."""
    home = Context().store.home
    home.mkdir(parents=True, exist_ok=True)
    async with ServerSaver.from_conn_string(str(home / SERVER_THREADS_FILE)) as saver:
        assert isinstance(saver, ServerSaver)  # from_conn_string builds its own class
        try:
            yield saver
        finally:
            await saver.drain()
