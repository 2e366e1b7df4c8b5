"""crag: Corrective RAG over a folder of books, as a LangGraph agent."""

from __future__ import annotations

from crag.offline import use_offline_defaults
from crag.redact import scrub_logs

use_offline_defaults()  # before any library that reads them is imported
scrub_logs()  # no API key in crag's log records

from crag.api import aask, ask  # noqa: E402
from crag.context import Context  # noqa: E402
from crag.graph import graph  # noqa: E402  (the compiled graph, not the module)

__all__ = ["Context", "aask", "ask", "graph"]
__version__ = "0.1.0"
