"""Build the conflict set: small documents of invented products whose sources disagree.

Each question has a stale and a fresh source of the same kind (an old and a new manual),
or an official and a forum (or blog) source of about the same date, that give different
values for what it asks; a few control questions have sources that agree, or ask for
no single value. Which source is right follows from how the set was written (the newer
manual, the vendor's documentation), never from what crag answers.

    python scripts/make_conflicts.py            # (re)write samples/conflicts/
    python scripts/make_conflicts.py --check    # the files are what this script writes

Every product, company, person, number and address here is invented for crag; the web
pages use the reserved `.example` domain. PDFs use fpdf2's core fonts and fixed dates,
so the output is byte-identical from run to run (fpdf2 2.8.9).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF
from fpdf.enums import XPos, YPos

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "samples" / "conflicts"


@dataclass
class Doc:
    path: str  # under samples/conflicts/
    title: str
    paragraphs: list[str]
    byline: str = ""  # a dated line under the title ("Last updated: 3 May 2026.")
    created: datetime | None = None  # PDF metadata
    url: str = ""  # a saved web page's address, declared in its head

    def markdown(self) -> str:
        head = f"<!-- source: {self.url} (fictional) -->\n\n" if self.url else ""
        byline = f"*{self.byline}*\n\n" if self.byline else ""
        return f"{head}# {self.title}\n\n{byline}" + "\n\n".join(self.paragraphs) + "\n"

    def text(self) -> str:
        byline = f"{self.byline}\n\n" if self.byline else ""
        return f"{self.title}\n\n{byline}" + "\n\n".join(self.paragraphs) + "\n"


def _at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 9, 0, 0, tzinfo=UTC)


DOCS = [
    # --- Tessaro: a message broker; the 2022 and 2026 administration guides (PDF) -------
    Doc(
        "library/tessaro/tessaro_2_admin_guide.pdf",
        "Tessaro Broker 2 Administration Guide",
        [
            "Tessaro is a message broker for small teams, made by Fenwick Relay Ltd. This "
            "guide covers installing and running a Tessaro 2 broker on a single server or "
            "a small cluster.",
            "Listeners. Clients connect to the Tessaro broker on TCP port 5570, the default "
            "listener port. The port can be changed with the listener.port setting in "
            "tessaro.conf.",
            "Message size. The maximum message size that Tessaro accepts is 1 MB; a larger "
            "message is refused with the error TOO_LARGE and the producer must split it.",
            "Retention. By default Tessaro retains messages for 7 days, after which they "
            "are deleted whether or not a consumer has read them.",
            "Clusters. Cluster nodes send heartbeats to each other every 10 seconds; a node "
            "that misses three heartbeats in a row is taken out of the cluster.",
            "Licences. The free Community licence allows up to 10 users per broker.",
        ],
        byline="Last updated: 14 September 2022.",
        created=_at(2022, 9, 14),
    ),
    Doc(
        "library/tessaro/tessaro_4_admin_guide.pdf",
        "Tessaro Broker 4 Administration Guide",
        [
            "Tessaro is a message broker for small teams, made by Fenwick Relay Ltd. This "
            "guide covers installing, configuring and upgrading a Tessaro 4 broker.",
            "Listeners. The Tessaro broker listens for clients on TCP port 5680, its default "
            "listener port since Tessaro 4. Set listener.port in tessaro.conf to use "
            "another one.",
            "Message size. Tessaro accepts messages of up to 4 MB, its maximum message "
            "size; producers of larger payloads should store them elsewhere and send a "
            "reference.",
            "Retention. Messages are retained for 14 days by default; set retention.days "
            "to keep them longer or shorter.",
            "Clusters. Every cluster node sends a heartbeat every 10 seconds, and a node "
            "that misses three in a row leaves the cluster until it answers again.",
            "Upgrading. A Tessaro 2 broker can be upgraded in place; clients must then "
            "connect to the new listener port.",
        ],
        byline="Last updated: 20 May 2026.",
        created=_at(2026, 5, 20),
    ),
    # --- Orbitline: a backup tool; a 2023 manual (PDF, dated by its metadata only) and
    # the 2026 release notes (text) ----------------------------------------------------------
    Doc(
        "library/orbitline/orbitline_user_manual.pdf",
        "Orbitline Backup User Manual",
        [
            "Orbitline is a command-line backup tool made by Quarry Lane Software. It "
            "takes snapshots of folders and sends them to S3 buckets or SFTP servers.",
            "Compression. Orbitline compresses every snapshot with zstd at compression "
            "level 3 by default, a setting that favours speed over size.",
            "Snapshots. Orbitline takes a snapshot every 6 hours by default and keeps 30 "
            "snapshots; the oldest one is deleted when a new one is taken.",
            "Restoring. Run orbitline restore with a snapshot id and a target folder to "
            "restore a snapshot; the target folder must be empty.",
            "Orbitline 4.2 is the latest version of the tool.",
        ],
        created=_at(2023, 2, 10),
    ),
    Doc(
        "library/orbitline/orbitline_5_release_notes.txt",
        "Orbitline 5.0 release notes",
        [
            "Orbitline 5.0 is the latest version of the Orbitline backup tool by Quarry "
            "Lane Software.",
            "Compression. Snapshots are now compressed with zstd at compression level 6 by "
            "default, which makes them about a fifth smaller.",
            "Snapshots. Orbitline keeps 90 snapshots by default, so that three weeks of "
            "snapshots stay available. It still takes a snapshot every 6 hours by default.",
            "Other changes. Restores can now write into a folder that is not empty when "
            "--overwrite is given.",
        ],
        byline="Released on 2 March 2026.",
    ),
    # --- Vantry: a key-value store; official documentation and a forum thread of the
    # same weeks, both saved in the library (Markdown) -------------------------------------
    Doc(
        "library/docs/vantry_configuration.md",
        "Vantry configuration reference",
        [
            "Vantry is an embedded key-value store by Osk Data. This page lists the "
            "settings of vantry.toml and their defaults.",
            "Cache. The default cache size of Vantry is 256 MB; raise cache.size on "
            "machines with plenty of memory.",
            "Eviction. When the cache is full, Vantry uses the LRU eviction policy by "
            "default: the least recently used entries leave first.",
            "Project. Vantry is maintained by Ines Moravec, with releases every quarter.",
        ],
        byline="Updated on 15 January 2025.",
    ),
    Doc(
        "library/forum/vantry_cache_thread.md",
        "Forum: Vantry cache keeps growing?",
        [
            "Question: my Vantry process uses more memory than I expected. Is that normal?",
            "Answer from a forum member: yes, the default cache size of Vantry is 512 MB, "
            "so it will grow to that before evicting anything.",
            "Another member: and the default eviction policy of Vantry is LFU, the least "
            "frequently used entries are evicted first.",
        ],
        byline="Posted on 20 January 2025.",
    ),
    Doc(
        "library/blog/vantry_origins.md",
        "How Vantry started",
        [
            "Vantry began as a weekend project of Tomas Reyes, who maintains the Vantry "
            "project to this day and reviews every change himself.",
            "The store was written for a point-of-sale system that had to keep working "
            "without a network connection.",
        ],
        byline="Posted on 8 April 2021.",
    ),
    # --- Quillmark: a document converter; limits page, a forum post and an old blog ---
    Doc(
        "library/docs/quillmark_limits.txt",
        "Quillmark limits and ports",
        [
            "Quillmark converts Markdown and word-processor files to PDF and HTML.",
            "File size. Quillmark can convert files of up to 200 MB; larger files are "
            "refused before conversion starts.",
            "Preview. The Quillmark preview server uses port 8088 on the local machine.",
        ],
        byline="Last updated: 4 August 2025.",
    ),
    Doc(
        "library/forum/quillmark_large_files.md",
        "Forum: converting a large manual with Quillmark",
        [
            "I tried to convert our 120 MB manual and it failed. Someone said Quillmark "
            "can convert files of up to 50 MB only, is that right?",
            "Reply: yes, the maximum file size Quillmark can convert is 50 MB, split the "
            "manual into chapters.",
        ],
        byline="Posted on 9 August 2025.",
    ),
    Doc(
        "library/blog/quillmark_preview.md",
        "Trying the Quillmark preview server",
        [
            "The preview server of Quillmark renders a document in the browser while you "
            "write it. The Quillmark preview server uses port 8000 on your machine, so "
            "open localhost:8000 after starting it.",
        ],
        byline="Posted on 30 June 2022.",
    ),
    # --- Polder (web): a static site generator ---------------------------------------------
    Doc(
        "external/polder_docs_install.md",
        "Installing Polder",
        [
            "Polder is a static site generator by Brackwater Labs.",
            "The latest stable version of Polder is 3.1; install it with the package "
            "manager of your system or download it from the releases page.",
            "Builds. The default build timeout in Polder is 120 seconds; a build that takes "
            "longer is stopped and reported as failed.",
        ],
        byline="Last updated: 11 September 2026.",
        url="https://docs.polder.example/install",
    ),
    Doc(
        "external/polder_blog_release.md",
        "Polder 2.3 is out",
        [
            "Polder 2.3 is the latest stable version of Polder, the static site generator, "
            "and it brings faster image resizing.",
        ],
        byline="Posted on 2 May 2023.",
        url="https://blog.brackwater.example/polder-2-3",
    ),
    Doc(
        "external/polder_forum_timeout.md",
        "Polder build stops after a few minutes",
        [
            "My site build is stopped after a while. Answer: the default build timeout in "
            "Polder is 300 seconds, raise it with --timeout for large sites.",
        ],
        byline="Posted on 15 September 2026.",
        url="https://community.polder.example/t/build-stops/2231",
    ),
    # --- Kestrel Pay (web): a payments API --------------------------------------------------
    Doc(
        "external/kestrel_docs_webhooks.md",
        "Kestrel Pay webhooks",
        [
            "Kestrel Pay sends a webhook for every payment event.",
            "Retries. Kestrel Pay retries a failed webhook 5 times, waiting longer before "
            "each retry.",
            "Payouts. Kestrel Pay settles payouts in euros. The minimum payout amount is EUR 10.",
        ],
        byline="Last updated: 3 June 2025.",
        url="https://docs.kestrelpay.example/webhooks",
    ),
    Doc(
        "external/kestrel_forum_webhooks.md",
        "Webhook retries in Kestrel Pay?",
        [
            "How often does Kestrel Pay retry a failed webhook? Answer: Kestrel Pay retries "
            "a failed webhook 3 times, then gives up.",
            "Also note that Kestrel Pay settles payouts in euros only.",
        ],
        byline="Posted on 6 June 2025.",
        url="https://community.kestrelpay.example/t/webhook-retries/881",
    ),
    Doc(
        "external/kestrel_forum_payouts.md",
        "Minimum payout in Kestrel Pay",
        [
            "What is the minimum payout amount in Kestrel Pay? Answer: the minimum payout "
            "amount is EUR 25, smaller balances wait for the next payout.",
        ],
        byline="Posted on 12 March 2023.",
        url="https://community.kestrelpay.example/t/minimum-payout/412",
    ),
    Doc(
        "external/kestrel_docs_limits.md",
        "Kestrel Pay API limits",
        [
            "The Kestrel Pay API rate limit is 250 requests per second for each account.",
            "Version 1 of the Kestrel Pay API will be switched off on 1 December 2026; "
            "move to version 2 before then.",
        ],
        byline="Last updated: 7 January 2026.",
        url="https://docs.kestrelpay.example/limits",
    ),
    Doc(
        "external/kestrel_blog_api.md",
        "Building on the Kestrel Pay API",
        [
            "The Kestrel Pay API rate limit is 100 requests per second for each account, "
            "plenty for a small shop.",
            "Version 1 of the Kestrel Pay API will be switched off on 1 June 2025, the "
            "company says.",
        ],
        byline="Posted on 18 October 2022.",
        url="https://blog.shopbuilders.example/kestrel-pay-api",
    ),
    Doc(
        "external/kestrel_news_2022.md",
        "Kestrel Pay names a new chief executive",
        [
            "Kestrel Pay, the payments company, named Amara Okafor its chief executive.",
        ],
        byline="Published 2 February 2022.",
        url="https://news.fintechdaily.example/2022/kestrel-pay-ceo",
    ),
    Doc(
        "external/kestrel_news_2026.md",
        "Kestrel Pay changes its leadership",
        [
            "Kestrel Pay, the payments company, named Lucas Brandt its chief executive.",
        ],
        byline="Published 9 July 2026.",
        url="https://news.fintechdaily.example/2026/kestrel-pay-leadership",
    ),
    # --- Tessaro on the web: a newer licence page than the library's guide -----------------
    Doc(
        "external/tessaro_pricing.md",
        "Tessaro licences",
        [
            "The free Tessaro Community licence allows up to 25 users per broker.",
        ],
        byline="Last updated: 1 October 2026.",
        url="https://www.fenwickrelay.example/tessaro/pricing",
    ),
]


def render_pdf(doc: Doc) -> bytes:
    pdf = FPDF(orientation="portrait", unit="mm", format="A4")
    pdf.set_margins(20, 20, 20)
    pdf.set_title(doc.title)
    pdf.set_author("crag conflict set (fictional)")
    pdf.set_creator("crag scripts/make_conflicts.py")
    if doc.created is not None:
        pdf.set_creation_date(doc.created)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 8, doc.title, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.ln(2)
    pdf.set_font("Helvetica", "", 11)
    for text in ([doc.byline] if doc.byline else []) + doc.paragraphs:
        pdf.multi_cell(0, 5.5, text, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        pdf.ln(2)
    return bytes(pdf.output())


def content(doc: Doc) -> bytes:
    if doc.path.endswith(".pdf"):
        return render_pdf(doc)
    return (doc.markdown() if doc.path.endswith(".md") else doc.text()).encode("ascii")


def write(out: Path) -> None:
    for doc in DOCS:
        path = out / doc.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content(doc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    if not args.check:
        write(OUT)
        print(f"wrote {len(DOCS)} documents under {OUT}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp))
        differ = [
            d.path
            for d in DOCS
            if not (OUT / d.path).is_file()
            or (OUT / d.path).read_bytes() != (Path(tmp) / d.path).read_bytes()
        ]
    for path in differ:
        print(f"differs from what the script writes: {path}", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
