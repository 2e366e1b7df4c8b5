"""The one error type providers raise for configuration problems.

Callers (CLI, graph nodes) catch `ProviderError` to print a short, actionable
message instead of a traceback: a missing key or package is a user problem,
not a bug.
"""

from __future__ import annotations


class ProviderError(RuntimeError):
    """A model provider cannot be built: missing package, env var, file or bad spec."""
