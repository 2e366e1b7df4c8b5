"""Defaults that keep crag offline: no tracing, telemetry or hub downloads, and no
writes outside crag's own folders. Importing crag applies them (a variable you set
yourself wins)."""

from __future__ import annotations

import os

OFFLINE_ENV = {
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "1",
    # onnxruntime otherwise writes a device id and an event log under ~/.cache/Microsoft
    "ORT_DISABLE_TELEMETRY": "1",
}


def use_offline_defaults() -> None:
    """Set each variable unless the user set it: an explicit choice still wins."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
