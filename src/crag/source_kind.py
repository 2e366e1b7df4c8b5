"""What kind of source a document is (official documentation, news, a blog, a forum),
read from its web address or the words of its file path. Ingest stores the kind of each
library file; grading weighs a source's authority by its kind."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# Kinds by the words of a web address or file path: general conventions of the web
# (forum.x, /t/123, /questions/, blog.x, /blog/, docs.x, /docs/, readthedocs) and of how
# people name folders of saved pages. Checked in this order: a forum under /docs/ is a forum.
_KIND_WORDS: list[tuple[str, frozenset[str]]] = [
    (
        "forum",
        frozenset(
            "forum forums community discuss discussion discussions discourse thread threads "
            "questions answers qa t topic topics talk board boards".split()
        ),
    ),
    ("blog", frozenset("blog blogs weblog posts".split())),
    ("news", frozenset("news press newsroom".split())),
    (
        "official",
        frozenset(
            "docs doc documentation manual manuals handbook reference guide guides spec "
            "specification official developer developers learn kb".split()
        ),
    ),
]
_KIND_HOSTS = {
    "forum": tuple(
        "stackoverflow.com stackexchange.com superuser.com serverfault.com reddit.com "
        "quora.com discord.com".split()
    ),
    "blog": ("medium.com", "substack.com", "wordpress.com", "blogspot.com", "dev.to"),
    "official": ("readthedocs.io", "readthedocs.org"),
}
# A file's own words are split at these; "t" and "qa" count only as whole path parts.
_SPLIT = re.compile(r"[/_\-.\s]+")


def detect_kind(source: str = "", url: str = "") -> str | None:
    """A source's kind from its web address (host labels and path parts), else from the
    words of its file path; None when neither says."""
    if url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host = (parts.hostname or "").lower()
        for kind, hosts in _KIND_HOSTS.items():
            if any(host == h or host.endswith("." + h) for h in hosts):
                return kind
        labels = host.split(".")[:-2] if host.count(".") >= 2 else []  # forum.x.com: "forum"
        segments = [s for s in parts.path.lower().split("/") if s]
        for kind, names in _KIND_WORDS:
            if any(label in names for label in labels) or any(s in names for s in segments):
                return kind
        return None
    if not source:
        return None
    path = source.lower().rsplit(".", 1)[0] if "." in source.rsplit("/", 1)[-1] else source
    words = [w for w in _SPLIT.split(path.lower()) if len(w) > 2]  # "t", "qa": web paths only
    for kind, names in _KIND_WORDS:
        if any(w in names for w in words):
            return kind
    return None
