"""The feature evaluator trained on a user's labels (`grader=trained`, the lab's), stored
in CRAG_HOME/grader.

`crag train-grader` refits the feature evaluator's weights on the user's labels and
saves them here with their training metadata; `grade` and `refine` then use it.
A missing file means "not trained"; a corrupt one is reported and skipped.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from crag.context import Context
from crag.errors import ProviderError
from crag.grading.registry import trained_path as model_path
from crag_lab.graders.features import FeatureGrader, FeatureModel

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def save_trained_grader(
    ctx: Context, model: dict[str, Any], metadata: dict[str, Any], path: Path | None = None
) -> Path:
    """Save where `ctx` grades from (or at `path`), atomically."""
    path = path or model_path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    payload = {"version": FORMAT_VERSION, "model": model, "metadata": metadata}
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)
    return path


def load_trained_grader(
    ctx: Context, embeddings: Embeddings, *, required: bool = False, library: bool = False
) -> FeatureGrader | None:
    """The trained grader if one was saved; None (or an error if required) otherwise."""
    path = model_path(ctx)
    if not path.exists():
        if required:
            raise ProviderError(f"no trained grader at {path}: run `crag train-grader` first")
        return None
    try:
        payload = json.loads(path.read_text())
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object, got {type(payload).__name__}")
        if payload.get("version") != FORMAT_VERSION:
            raise ValueError(f"format version {payload.get('version')!r}")
        model = FeatureModel.from_dict(payload["model"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if required:
            raise ProviderError(f"{path}: unusable trained grader ({exc})") from exc
        log.warning("ignoring unusable trained grader %s (%s)", path, exc)
        return None
    grader = FeatureGrader(embeddings, model, library=library)
    grader.name = "trained"
    return grader
