"""The product runs without the lab (the import contracts themselves are checked by
`lint-imports` in `make lint`)."""

from __future__ import annotations

import subprocess
import sys


def test_the_product_runs_without_the_lab() -> None:
    """Importing crag's CLI, graph and ingest loads no lab module."""
    code = (
        "import sys, crag.cli.main, crag.graph, crag.ingest.graph;"
        "sys.exit(any(m.split('.')[0] == 'crag_lab' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
