"""crag writes only into its data folder (and its model cache): nothing else under HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_ingest_and_ask_write_nothing_outside_crag_home(tmp_path: Path) -> None:
    home, data = tmp_path / "home", tmp_path / "crag"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAG_", "ORT_", "XDG_"))}
    env["HOME"] = str(home)
    crag = [sys.executable, "-m", "crag.cli.main"]
    for argv in (
        ["ingest", str(SAMPLES / "library"), "--home", str(data), "-q"],
        ["ask", "How long is the refund window?", "--home", str(data), "--no-llm", "--quiet"],
    ):
        run = subprocess.run([*crag, *argv], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert written == [], written
    assert any(data.rglob("chroma.sqlite3"))
