"""What every OpenAI client of crag needs: a key, a timeout, a base URL."""

from __future__ import annotations

import hashlib
import ipaddress
import os
from typing import Any
from urllib.parse import urlsplit

from crag.errors import ProviderError


def openai_key(what: str) -> str:
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        raise ProviderError(
            f"{what} needs the OPENAI_API_KEY environment variable "
            "(and OPENAI_BASE_URL for an OpenAI-compatible server); or use `local`"
        )
    return key


def openai_kwargs(what: str, timeout_s: float) -> dict[str, Any]:
    """Client settings shared by the chat model and the embeddings, checked first."""
    openai_key(what)
    kwargs: dict[str, Any] = {"timeout": timeout_s, "max_retries": 1}
    if base_url := os.environ.get("OPENAI_BASE_URL"):
        kwargs["base_url"] = base_url
    return kwargs


def openai_identity(what: str) -> tuple[str | None, str]:
    """(base URL, key digest): a cached client is reused only for the same server and key."""
    secret = hashlib.sha256(openai_key(what).encode()).hexdigest()[:16]
    return os.environ.get("OPENAI_BASE_URL"), secret


def leaves_machine() -> bool:
    """Whether an OpenAI client's requests go to another machine: any server but one on
    loopback (OPENAI_BASE_URL unset means OpenAI's own)."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        return True
    try:
        host = urlsplit(base_url if "://" in base_url else f"http://{base_url}").hostname
    except ValueError:
        return True
    if not host:
        return True
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name: resolved elsewhere, so treated as remote
