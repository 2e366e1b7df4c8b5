"""Tenants in a shared collection, and each tenant's library version.

Every chunk names its tenant in its metadata (`TENANT_KEY`); a collection written
before tenants existed has none, and its chunks are the default tenant's. Each tenant's
part of a collection has a version that changes with every write, so what was derived
from its text (the coverage index, cached answers) is known to be stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crag.context import DEFAULT_TENANT, Context
from crag.errors import StoreError
from crag.retrieval import clients
from crag.retrieval.store_errors import guard

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection


def version_key(tenant: str) -> str:
    """The collection metadata key of a tenant's library version."""
    return f"{clients.VERSION_KEY}:{tenant}"


def mark_changed(collection: Collection, tenant: str) -> None:
    """Give the tenant's part of the collection a new version: what was derived from its
    text (the coverage index, cached answers) is stale. The collection's own version
    changes too."""
    version = uuid.uuid4().hex
    metadata = {
        **(collection.metadata or {}),
        clients.VERSION_KEY: version,
        version_key(tenant): version,
    }
    clients.modify_metadata(collection, metadata)


def library_version(ctx: Context, collection_name: str) -> str:
    """Changes whenever the tenant's chunks in the collection do (for the default tenant
    of a collection written before tenants, the collection's version, or its chunk count
    before versions were kept)."""
    collection = clients.get_collection(clients.open_client(ctx), collection_name)
    metadata = collection.metadata or {}
    version = metadata.get(version_key(ctx.store.tenant))
    if version:
        return str(version)
    if ctx.store.tenant != DEFAULT_TENANT or not is_untagged(collection):
        return "empty"  # the tenant never ingested into this collection
    if metadata.get(clients.VERSION_KEY):
        return str(metadata[clients.VERSION_KEY])
    with guard(collection, collection_name):
        return f"count:{collection.count()}"


def check_tenant(ctx: Context) -> None:
    """The run's tenant must have written to the library collection: a misspelt tenant
    would otherwise see an empty library and decline every question."""
    if library_version(ctx, ctx.store.collection) != "empty":
        return
    collection = clients.get_collection(clients.open_client(ctx), ctx.store.collection)
    name, tenant = ctx.store.collection, ctx.store.tenant
    if not (known := sorted(tenants_of(collection))):
        raise StoreError(f"collection {name!r} holds nothing yet: ingest a folder into it first")
    raise StoreError(
        f"tenant {tenant!r} has no library in collection {name!r} (its tenants: "
        f"{', '.join(known)}): use one of them, or ingest with --tenant {tenant} first"
    )


def is_untagged(collection: Collection) -> bool:
    """A collection written before tenants existed: its chunks name no tenant."""
    return not (collection.metadata or {}).get(clients.TENANTS_KEY)


def tenants_of(collection: Collection) -> set[str]:
    """The tenants that ever wrote to the collection (each records a version before its
    first chunk is written)."""
    prefix = version_key("")
    return {k[len(prefix) :] for k in collection.metadata or {} if k.startswith(prefix)}


def tenant_where(collection: Collection, tenant: str) -> dict[str, Any] | None:
    """The filter that keeps `tenant`'s chunks in queries, or None where it would keep
    every chunk: for the default tenant of a collection written before tenants, and for
    the only tenant that ever wrote to the collection (a filter that matches every chunk
    makes a query 10-20 times slower). `belongs` checks every hit either way."""
    if is_untagged(collection):
        return None if tenant == DEFAULT_TENANT else {clients.TENANT_KEY: tenant}
    if tenants_of(collection) == {tenant}:
        return None
    return {clients.TENANT_KEY: tenant}


def belongs(metadata: Mapping[str, Any] | None, collection: Collection, tenant: str) -> bool:
    """Whether a chunk with this metadata is `tenant`'s."""
    owner = (metadata or {}).get(clients.TENANT_KEY)
    if owner is None:  # only in a collection written before tenants: the default's
        return tenant == DEFAULT_TENANT and is_untagged(collection)
    return owner == tenant
