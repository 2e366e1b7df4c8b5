"""Retrieval: where crag's knowledge comes from.

- the store, the only modules that talk to Chroma: `library` (similarity search, paged
  reading and writing, tenants, hits as passages) over `clients` (clients,
  collections, their metadata keys), `integrity` (vector indexes checked before Chroma
  loads them) and `store_errors` (Chroma's failures as one line each);
- `external`: the external sources of the web path, chosen by name.
"""
