"""Where `langgraph dev` keeps a run's checkpoints: SQLite in crag's home.

The dev server's own in-memory checkpoints keep a deleted thread's channel values, so a
long-lived server grows with every run it served (docs/operations.md). `langgraph.json`
names `checkpointer` below instead: deleting a thread frees what it held, the server's
memory stays flat, and threads outlive a restart. Its file sits beside the library it
answers from (`home`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from crag.context import Context

#: The server's checkpoints, in crag's home (the command line's threads: `threads.sqlite`).
SERVER_THREADS_FILE = "server_threads.sqlite"


class ServerSaver(AsyncSqliteSaver):
    """SQLite checkpoints that can also forget a cancelled run: the server asks for it
    when a new run on a thread rolls back the one before (`multitask_strategy=rollback`)."""

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
        yield saver
