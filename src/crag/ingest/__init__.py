"""Ingest: a folder of PDFs (and .md/.txt) → page-cited chunks → Chroma.

Exports are lazy: importing `crag.ingest` loads neither pypdf nor chromadb.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "IngestError",
    "IngestSummary",
    "Ingestor",
    "LoadError",
    "chunk_pages",
    "ingest_path",
    "load_document",
]

_WHERE = {
    "IngestError": "crag.ingest.indexer",
    "IngestSummary": "crag.ingest.indexer",
    "Ingestor": "crag.ingest.indexer",
    "ingest_path": "crag.ingest.indexer",
    "LoadError": "crag.ingest.loaders",
    "load_document": "crag.ingest.loaders",
    "chunk_pages": "crag.ingest.chunking",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'crag.ingest' has no attribute {name!r}")
