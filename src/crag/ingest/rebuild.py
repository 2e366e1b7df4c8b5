"""`--rebuild`: a collection dropped to be ingested again whole, the one repair for a
damaged index (a store whose database cannot be read is moved aside instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crag.context import Context
from crag.errors import CragError, DamagedStore, IngestError
from crag.ingest.discovery import Discovery
from crag.ingest.stored import scan
from crag.ingest.summary import describe_error
from crag.retrieval.clients import drop_collection, get_collection, open_client, set_aside_store
from crag.retrieval.tenancy import tenants_of

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from langchain_core.embeddings import Embeddings


def others_in(ctx: Context, name: str, found: Discovery) -> list[str]:
    """What else collection `name` holds, that a rebuild from `found` would drop and not
    ingest again: other tenants' libraries, and this tenant's files from other folders.
    A collection that cannot be read (the damage a rebuild repairs) names nothing."""
    try:
        collection = get_collection(open_client(ctx), name)
        libraries = {s.library for s in scan(collection, ctx.store.tenant).values() if s.library}
        tenants = tenants_of(collection) - {ctx.store.tenant}
    except (CragError, OSError, ValueError):
        return []
    own = found.within(libraries)
    others = [f"tenant {t!r}" for t in sorted(tenants)]
    others += [f"the files of {f}" for f in sorted(libraries - {own.library})]
    if own.prefix:  # a subfolder of an ingested folder: the rest of that folder
        others.append(f"the files of {own.library} outside {own.prefix}/")
    return others


def dropped(
    ctx: Context,
    name: str,
    embeddings: Embeddings,
    emit: Callable[..., None],
    found: Discovery,
    force: bool = False,
) -> ClientAPI:
    """The store's client once collection `name` is dropped. The embedder embeds a word
    first: a missing model or key fails before anything is dropped; and what else the
    collection holds is named, and kept, unless `force`."""
    if not force and (others := others_in(ctx, name, found)):
        raise IngestError(
            f"--rebuild drops all of collection {name!r}, which also holds "
            f"{', '.join(others)}: nothing was dropped. Add --force to rebuild anyway, then "
            "ingest those again",
            exit_code=2,
        )
    try:
        embeddings.embed_query("crag")
    except Exception as exc:
        raise IngestError(
            f"--rebuild: the embedder cannot embed ({describe_error(exc)}); nothing was dropped",
            exit_code=2,
        ) from exc
    try:
        client = open_client(ctx, create=True)
        gone = drop_collection(client, name)
    except DamagedStore as exc:
        if exc.part != "database" or ctx.store.chroma_url:
            raise
        moved = set_aside_store(ctx)
        emit("set_aside", store=str(ctx.store.chroma_path), to=str(moved), reason=str(exc))
        client = open_client(ctx, create=True)
        gone = False
    emit("rebuild", collection=name, dropped=gone)
    return client
