"""Every provider a run's Context names exists: checked once, before a run starts, so
that a misspelt grader, source, chat model or embeddings name is one line naming the
knob (and the environment variable it came from), not a failure deep in a node."""

from __future__ import annotations

import os
from typing import Any

from crag.context import ENV_PREFIX, Context
from crag.errors import ProviderError
from crag.grading.registry import GRADERS
from crag.models.chat import CHAT_MODELS, EXTRACTIVE
from crag.models.embeddings import EMBEDDINGS
from crag.registry import Registry
from crag.retrieval.external import SOURCES, source_names

#: Knobs that name a provider, and the registry that knows the names.
PROVIDER_FIELDS: dict[str, Registry[Any]] = {
    "grader": GRADERS,
    "external": SOURCES,
    "chat_model": CHAT_MODELS,
    "judge_model": CHAT_MODELS,
    "embeddings": EMBEDDINGS,
}


def checked(ctx: Context) -> Context:
    """`ctx`, once every provider it names exists: a misspelt name fails before the run,
    naming the field (and the environment variable, if the value came from there)."""
    for field, registry in PROVIDER_FIELDS.items():
        value = ctx.get(field)
        if value is None or (value == EXTRACTIVE and registry is CHAT_MODELS):
            continue
        if str(value).partition(":")[0] not in registry:
            env = ENV_PREFIX + field.upper()
            origin = f" (from {env})" if os.environ.get(env) == value else ""
            raise ValueError(
                f"{field}={value!r}{origin}: unknown {registry.kind}; use "
                f"{', '.join(registry.names())}"
            )
    try:
        source_names(ctx)
    except ProviderError as exc:
        raise ValueError(str(exc)) from None
    return ctx
