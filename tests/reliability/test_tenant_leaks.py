"""Two tenants in one store: no chunk of one ever reaches the other's runs.

Both tenants' libraries (same file names, same kinds of facts, other values) and
external pages live in one Chroma collection each, embedded and behind a `chroma run`
server on loopback. Every question of each tenant is asked twice (the second may come
from the answer cache); everything the run produced is searched for the other tenant:
its chunk ids in the retrieved, graded and refined documents, and its product name
(which every one of its chunks contains) in the state, the answer, the citations, the
path, the tenant's cache rows and the log records. The counts end `make test`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tenants import TENANTS, Tenant, other, write_tenant

from crag.api import ask, summary
from crag.cache import CACHE_FILE
from crag.context import Context
from crag.ingest.indexer import ingest_path
from crag.retrieval.clients import forget_clients
from crag.retrieval.library import tenant_records


def _context(home: Path, tenant: Tenant, url: str | None) -> Context:
    return Context(
        home=home,
        chroma_url=url,
        tenant=tenant.name,
        chat_model="extractive",
        grader="features",
        external="local",
        cache=True,
    )


def _ingested(root: Path, url: str | None) -> Path:
    home = root / "home"
    for tenant in TENANTS:
        library, external = write_tenant(root / "docs", tenant)
        ctx = _context(home, tenant, url)
        assert ingest_path(ctx, library).exit_code == 0
        assert ingest_path(ctx, external, collection="external").exit_code == 0
    return home


def _leaks(state: dict[str, Any], logs: str, rows: str, theirs: set[str], product: str) -> int:
    """How many places of a run hold something of the other tenant."""
    docs = [*(state.get("docs") or []), *(state.get("good_docs") or [])]
    docs += state.get("web_docs") or []
    found = sum(d["id"] in theirs for d in docs)
    found += sum(s["doc_id"] in theirs for s in state.get("kept_strips") or [])
    seen = {k: v for k, v in state.items() if k != "messages"}
    texts = [
        json.dumps(seen, default=str),
        json.dumps(summary(state)),  # type: ignore[arg-type]
        " ".join(str(m.content) for m in state.get("messages") or []),
        logs,
        rows,
    ]
    return found + sum(text.count(product) + text.count(product.lower()) for text in texts)


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_no_chunk_of_one_tenant_reaches_another(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
    tally: Any,
) -> None:
    url = request.getfixturevalue("chroma_url") if backend == "server" else None
    if url:  # a collection name of its own on the shared server
        forget_clients()
    home = _ingested(tmp_path, url)
    ids = {
        t.name: {
            r.id
            for name in ("books", "external")
            for r in tenant_records(_context(home, t, url), name)
        }
        for t in TENANTS
    }
    assert all(ids.values()) and not (ids["acme"] & ids["globex"])
    caplog.set_level(logging.DEBUG, logger="crag")
    cached = 0
    for turn in ("first", "again"):
        for tenant in TENANTS:
            ctx, stranger = _context(home, tenant, url), other(tenant)
            for question in tenant.questions:
                caplog.clear()
                state = dict(ask(question, context=ctx))
                assert state["tenant"] == tenant.name
                cached += bool(state.get("cached"))
                with sqlite3.connect(home / CACHE_FILE) as db:
                    rows = db.execute(
                        "SELECT question, result FROM answers WHERE tenant = ?", (tenant.name,)
                    ).fetchall()
                logs = "\n".join(r.getMessage() for r in caplog.records)
                found = _leaks(state, logs, json.dumps(rows), ids[stranger.name], stranger.product)
                tally.add("chunks leaked", found)
                tally("tenant run", f"{backend} {turn} {tenant.name}: {question}", found == 0)
                assert found == 0, (tenant.name, question, state.get("answer"))
    assert cached >= 4  # the second turn's confident answers came from each tenant's cache
    if url:
        forget_clients()
