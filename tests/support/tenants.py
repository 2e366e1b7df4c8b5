"""Two tenants with disjoint, topically overlapping libraries (for tenant tests).

Both are handbooks of a fictional product with the same file names, the same kinds of
facts (a port, a refund window, prices) and different values, so that a missing filter
would show: the other tenant's chunks would rank high for the same questions. Every
chunk names its own product ("Orbix" or "Quillon"), which makes a leaked chunk visible
anywhere it ends up (state, answer, cache, logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fakes import build_pdf


@dataclass(frozen=True)
class Tenant:
    name: str
    product: str  # named in every chunk of this tenant's library
    pdfs: dict[str, list[str]]  # file name -> pages
    pages: dict[str, str]  # external collection: file name -> Markdown
    questions: list[str]


ACME = Tenant(
    name="acme",
    product="Orbix",
    pdfs={
        "handbook.pdf": [
            "Orbix Handbook. The Orbix server listens on TCP port 6150 by default. The Orbix "
            "setting port_number in orbix.conf changes the port of the Orbix server. Orbix "
            "writes its logs to the folder /var/log/orbix on every Orbix host.",
            "Orbix refunds. Orbix annual plans can be refunded in full within 45 days of the "
            "purchase. Orbix monthly plans can be refunded within 7 days of the first Orbix "
            "payment. After that, Orbix gives no refund.",
        ],
        "pricing.pdf": [
            "Orbix pricing. The Orbix Starter plan costs 9 euros per user per month. The Orbix "
            "Pro plan costs 19 euros per user per month and includes Orbix single sign-on.",
        ],
        "security.pdf": [
            "Orbix security. Orbix encrypts every backup with AES-256 before it leaves the "
            "Orbix host. Orbix rotates its token signing keys every 90 days. Orbix supports "
            "two-factor authentication with any TOTP app.",
        ],
    },
    pages={
        "orbix_forum.md": "# Orbix mobile app\n\nThe Orbix mobile app syncs with the Orbix "
        "server every 5 minutes on Wi-Fi and every 15 minutes on mobile data, Orbix users "
        "report in the Orbix forum.\n",
    },
    questions=[
        "Which TCP port does the server listen on by default?",
        "Which setting changes the port of the server?",
        "How long is the refund window for annual plans?",
        "Can monthly plans be refunded?",
        "What does the Pro plan cost per user per month?",
        "How are backups encrypted?",
        "How often are the token signing keys rotated?",
        "Is two-factor authentication supported?",
        "How often does the mobile app sync on Wi-Fi?",
        "How fast does support answer a ticket?",  # the other tenant's topic
    ],
)

GLOBEX = Tenant(
    name="globex",
    product="Quillon",
    pdfs={
        "handbook.pdf": [
            "Quillon Handbook. The Quillon gateway listens on TCP port 9310 by default. The "
            "Quillon setting gateway_port in quillon.yaml changes the port of the Quillon "
            "gateway. Quillon keeps its data in the folder /srv/quillon.",
            "Quillon refunds. Quillon annual subscriptions can be refunded within 21 days of "
            "the Quillon invoice date. Quillon monthly subscriptions cannot be refunded, "
            "Quillon billing says.",
        ],
        "pricing.pdf": [
            "Quillon pricing. The Quillon Basic tier costs 12 dollars per seat per month. The "
            "Quillon Scale tier costs 30 dollars per seat per month with Quillon audit logs.",
        ],
        "support.pdf": [
            "Quillon support. Quillon support answers every ticket within 4 business hours. "
            "The Quillon status page is status.quillon.example and shows every Quillon "
            "incident of the last 90 days.",
        ],
    },
    pages={
        "quillon_blog.md": "# Quillon offline mode\n\nThe Quillon blog announced that Quillon "
        "desktop keeps working offline for up to 30 days and syncs the Quillon workspace "
        "when it reconnects.\n",
    },
    questions=[
        "Which TCP port does the server listen on by default?",
        "Which configuration file holds the gateway port?",
        "How long is the refund window for annual plans?",
        "Can monthly plans be refunded?",
        "What does the Basic tier cost per seat per month?",
        "How fast does support answer a ticket?",
        "Where is the status page?",
        "How long does the desktop app keep working offline?",
        "How are backups encrypted?",  # the other tenant's topic
        "How often are the token signing keys rotated?",  # the other tenant's topic
    ],
)

TENANTS = (ACME, GLOBEX)


def write_tenant(root: Path, tenant: Tenant) -> tuple[Path, Path]:
    """The tenant's library (PDFs) and external pages (Markdown) under `root`."""
    library, external = root / tenant.name / "library", root / tenant.name / "external"
    library.mkdir(parents=True, exist_ok=True)
    external.mkdir(parents=True, exist_ok=True)
    for name, pages in tenant.pdfs.items():
        (library / name).write_bytes(build_pdf(pages, title=f"{tenant.product} {name}"))
    for name, text in tenant.pages.items():
        (external / name).write_text(text, encoding="utf-8")
    return library, external


def other(tenant: Tenant) -> Tenant:
    return GLOBEX if tenant is ACME else ACME
