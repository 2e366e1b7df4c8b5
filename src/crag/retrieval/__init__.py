"""Retrieval: where crag's knowledge comes from.

- `library`: the only Chroma adapter (clients, collections, similarity search,
  paged reading, hits as passages);
- `external`: the external sources of the web path, chosen by name.
"""
