"""crag: Corrective RAG over a folder of books, as a LangGraph agent.

`ask`, `aask`, `Context` and `graph` load on first use, so that `crag --help` and
other light callers do not pay for LangGraph, Chroma and the models.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from crag.offline import use_offline_defaults
from crag.redact import scrub_logs

use_offline_defaults()  # before any library that reads them is imported
scrub_logs()  # no API key in crag's log records

if TYPE_CHECKING:
    from crag.api import aask, ask
    from crag.context import Context
    from crag.graph import graph

__all__ = ["Context", "aask", "ask", "graph"]
__version__ = "0.1.0"
_HOMES = {"ask": "crag.api", "aask": "crag.api", "Context": "crag.context"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'crag' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


class _Package(types.ModuleType):
    """`crag.graph` is the compiled graph, as `from crag import graph` promises, in any
    import order: importing the submodule `crag.graph` binds the module to the package's
    attribute, and this property keeps answering with the graph the module compiles."""

    @property
    def graph(self) -> Any:
        return importlib.import_module("crag.graph").graph

    @graph.setter
    def graph(self, value: Any) -> None:
        pass  # the import system binding the submodule


sys.modules[__name__].__class__ = _Package
