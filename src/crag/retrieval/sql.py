"""The SQL source: a SQLite database the user names, for structured questions.

A question about a price, a limit or a count is often answered by a table, not by
prose. The chat model writes one SELECT from the database's schema; with no model,
crag selects the rows of the best-matching table whose names the question mentions.
Either way the statement runs read-only: the file is opened read-only, an authorizer
allows nothing but reading, there is one statement, a row cap and a timeout. The
statement is kept on every result, so it is shown and cited as the source.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from langchain_core.messages import HumanMessage, SystemMessage

from crag import prompts
from crag.context import Context
from crag.errors import SearchError
from crag.models.chat import EXTRACTIVE, UNSTREAMED, make_chat_model
from crag.text import STOPWORDS, folded_words, stems

if TYPE_CHECKING:
    from crag.state import Passage

log = logging.getLogger(__name__)

# What a read-only query may do; anything else (a write, ATTACH, PRAGMA) is denied.
_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_SELECT = re.compile(r"^\s*(?:select|with)\b", re.IGNORECASE)
#: The longest text or blob a query may make (bytes): the timeout is checked between
#: steps, so one call such as randomblob() or replace() must itself stay small.
MAX_VALUE_BYTES = 10_000_000


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, declared type)

    @property
    def text_columns(self) -> list[str]:
        return [
            c for c, kind in self.columns if not re.search(r"int|real|num|dec|float", kind, re.I)
        ]


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    if not path.is_file():
        raise SearchError(f"sql: no database at {path}")
    try:
        conn = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=timeout_s
        )
    except sqlite3.Error as exc:
        raise SearchError(f"sql: cannot open {path.name}: {exc}") from exc
    conn.execute("PRAGMA query_only = ON")
    return conn


def schema(path: Path, timeout_s: float) -> list[Table]:
    """The database's tables and their columns."""
    conn = _connect(path, timeout_s)
    try:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        return [
            Table(n, tuple((c[1], c[2] or "") for c in conn.execute(f'PRAGMA table_info("{n}")')))
            for n in names
        ]
    except sqlite3.Error as exc:
        raise SearchError(f"sql: cannot read the schema of {path.name}: {exc}") from exc
    finally:
        conn.close()


def run_select(
    path: Path, statement: str, params: tuple[Any, ...], max_rows: int, timeout_s: float
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and at most `max_rows` rows of one read-only SELECT statement;
    anything else is refused with a SearchError that says why."""
    statement = statement.strip().rstrip(";").strip()
    if not _SELECT.match(statement):
        first = statement.split()[0] if statement.split() else "nothing"
        raise SearchError(f"sql: only SELECT statements are allowed, got {first[:20]!r}")
    conn = _connect(path, timeout_s)
    deadline = time.monotonic() + timeout_s
    conn.set_authorizer(_authorize)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 1000)  # non-zero: abort
    try:
        cursor = conn.execute(statement, params)
        columns = [d[0] for d in cursor.description or []]
        return columns, cursor.fetchmany(max_rows)
    except sqlite3.Warning as exc:  # more than one statement
        raise SearchError(f"sql: refused: {exc}") from exc
    except sqlite3.Error as exc:
        if time.monotonic() > deadline:
            raise SearchError(f"sql: no result within {timeout_s:g} s") from exc
        raise SearchError(f"sql: refused or failed: {exc}") from exc
    finally:
        conn.close()


def _stems(text: str) -> set[str]:
    return stems(text) - STOPWORDS


def rule_query(question: str, tables: list[Table]) -> tuple[str, tuple[Any, ...]] | None:
    """With no model: the rows of the table whose name and columns the question shares
    most words with, narrowed to the rows whose text cells the question names."""
    asked = _stems(question)
    ranked = sorted(
        tables,
        key=lambda t: (
            -(
                2 * len(asked & _stems(t.name))
                + len(asked & _stems(" ".join(c for c, _ in t.columns)))
            )
        ),
    )
    if not ranked or not asked & _stems(
        " ".join([ranked[0].name, *(c for c, _ in ranked[0].columns)])
    ):
        return None
    table = ranked[0]
    named = " OR ".join(
        f'(length(t."{c}") > 1 AND instr(q.text, lower(t."{c}")) > 0)' for c in table.text_columns
    )
    if not named:
        return f'SELECT * FROM "{table.name}"', ()
    statement = f'WITH q(text) AS (SELECT ?) SELECT t.* FROM "{table.name}" AS t, q WHERE {named}'
    return statement, (" ".join(folded_words(question)),)


def _model_query(raw: str) -> str:
    match = re.search(r"\{.*\}", raw, re.DOTALL)
    try:
        sql = json.loads(match.group(0))["sql"] if match else ""
    except (ValueError, KeyError, TypeError):
        sql = ""
    return str(sql or "").strip()


def shown(statement: str, params: tuple[Any, ...]) -> str:
    """The statement as a reader would run it: parameters written in."""
    for value in params:
        statement = statement.replace("?", "'" + str(value).replace("'", "''") + "'", 1)
    return " ".join(statement.split())


class SqlSearch:
    """sources=...sql...: structured questions answered from a SQLite file."""

    name = "sql"
    leaves_machine = False
    # A row is no passage of prose, which the grader is made for: its relevance is how
    # much of the question its table, columns and values name (`similarity`).
    self_scored = True

    def __init__(self, ctx: Context) -> None:
        if ctx.search.sql_path is None:
            raise SearchError(
                "sql: no database named (set sql_path: --set sql_path=FILE, or CRAG_SQL_PATH)"
            )
        self.ctx = ctx
        self.path = Path(ctx.search.sql_path)

    async def statement(self, question: str) -> tuple[str, tuple[Any, ...], str]:
        """The SELECT to run for the question, its parameters, and who wrote it."""
        tables = await asyncio.to_thread(schema, self.path, self.ctx.search.sql_timeout_s)
        if self.ctx.models.chat_model != EXTRACTIVE:
            listing = "\n".join(
                f"{t.name}({', '.join(f'{c} {k}'.strip() for c, k in t.columns)})" for t in tables
            )
            model = make_chat_model(self.ctx.models.chat_model, self.ctx, max_tokens=200)
            try:
                reply = await model.ainvoke(
                    [
                        SystemMessage(prompts.SQL_SYSTEM),
                        HumanMessage(prompts.SQL_USER.format(schema=listing, question=question)),
                    ],
                    config=UNSTREAMED,
                )
                if sql := _model_query(str(reply.content)):
                    return sql, (), "model"
            except Exception as exc:  # the rules below still answer
                log.warning("text-to-SQL by the model failed (%s); using the rules", exc)
        rule = rule_query(question, tables)
        if rule is None:
            raise SearchError("sql: no table of the database matches the question")
        return *rule, "rules"

    async def asearch(self, queries: list[str], k: int) -> list[Passage]:
        statement, params, _ = await self.statement(queries[0])
        columns, rows = await asyncio.to_thread(
            run_select,
            self.path,
            statement,
            params,
            self.ctx.search.sql_max_rows,
            self.ctx.search.sql_timeout_s,
        )
        query = shown(statement, params)
        digest = hashlib.sha1(query.encode()).hexdigest()[:10]
        asked = _stems(queries[0])
        passages: list[Passage] = []
        for i, row in enumerate(rows):
            cells = "; ".join(f"{c}: {v}" for c, v in zip(columns, row, strict=True))
            named = asked & _stems(f"{cells} {statement}")
            passages.append(
                {
                    "id": f"sql:{self.path.name}:{digest}:{i}",
                    "text": f"{cells}.",
                    "origin": "external",
                    "source": self.path.name,
                    "query": query,
                    "similarity": round(len(named) / len(asked), 4) if asked else 0.0,
                }
            )
        return passages
