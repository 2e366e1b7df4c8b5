"""Retrieval: where crag's knowledge comes from.

- the store, the only modules that talk to Chroma: `library` (similarity search, paged
  reading and writing, hits as passages) and `tenancy` (whose chunks are whose, each
  tenant's library version) over `clients` (clients, collections, their metadata
  keys), `integrity` (vector indexes checked before Chroma loads them) and
  `store_errors` (Chroma's failures as one line each);
- `library_index`: the library's words in any usual spelling, and its boilerplate;
- `external`: the external sources of the web path, chosen by name; `sql`: the
  read-only SQLite source.
"""
