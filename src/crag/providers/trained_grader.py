"""crag's own trained retrieval evaluator, stored in CRAG_HOME/grader."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from crag.providers.errors import ProviderError

if TYPE_CHECKING:
    from crag.context import Context
    from crag.providers.graders import RelevanceGrader

log = logging.getLogger(__name__)


def load_trained_grader(ctx: Context, *, required: bool = False) -> RelevanceGrader | None:
    """The trained grader if one was saved; None (or an error if required) otherwise."""
    path = ctx.grader_dir / "grader.json"
    if not path.exists():
        if required:
            raise ProviderError(f"no trained grader at {path}: run `crag train-grader` first")
        return None
    raise ProviderError(f"{path}: trained graders are not supported by this version")
