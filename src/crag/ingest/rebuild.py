"""`--rebuild`: a collection dropped to be ingested again whole, the one repair for a
damaged index (a store whose database cannot be read is moved aside instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crag.context import Context
from crag.errors import DamagedStore, IngestError
from crag.ingest.summary import describe_error
from crag.retrieval.clients import drop_collection, open_client, set_aside_store

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from langchain_core.embeddings import Embeddings


def dropped(
    ctx: Context, name: str, embeddings: Embeddings, emit: Callable[..., None]
) -> ClientAPI:
    """The store's client once collection `name` is dropped. The embedder embeds a word
    first: a missing model or key fails before anything is dropped."""
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
