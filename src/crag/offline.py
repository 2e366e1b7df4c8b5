"""Defaults that keep crag offline: no tracing, telemetry or hub downloads."""

from __future__ import annotations

import os

OFFLINE_ENV = {
    "LANGSMITH_TRACING": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
}


def use_offline_defaults() -> None:
    """Set each variable unless the user set it: an explicit choice still wins."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
