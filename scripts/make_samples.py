"""Build the sample library of crag: three short PDF handbooks of a fictional product.

The product, *Lumen* (a self-hosted note-sync server) and its maker *Halcyon Lattice
Ltd.* are invented for this project; every fact in the handbooks is fictional. The PDFs
are written with fpdf2's core fonts (text kept ASCII), a fixed creation date and fixed
metadata, so re-running the script produces byte-identical files (for a given fpdf2
version; tested with 2.8.9).

    python scripts/make_samples.py            # (re)write samples/library/*.pdf and the database
    python scripts/make_samples.py --check    # also verify everything under samples/

``--check`` rebuilds the PDFs in a temporary folder and compares the bytes with the
committed ones, re-reads every PDF with pypdf (title metadata, 2-4 pages, page labels,
the "page N of M" footers, every section heading, clean text per page), checks the
headers of ``samples/external/*.md`` and resolves every ``support`` hint of
``samples/questions.jsonl`` to its document (and page, for PDFs).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF
from fpdf.enums import XPos, YPos

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CREATED = datetime(2024, 3, 12, 9, 0, 0, tzinfo=UTC)
COMPANY = "Halcyon Lattice Ltd."
NOTICE = (
    "Sample document for the crag project. Lumen and Halcyon Lattice are fictional; "
    "all names, numbers and policies in this handbook are invented."
)


# --- content model ---------------------------------------------------------------------


@dataclass
class Code:
    """A preformatted block (a configuration excerpt), set in Courier."""

    text: str


@dataclass
class Section:
    number: str  # "4" or "4.1"
    title: str
    body: list[str | Code] = field(default_factory=list)

    @property
    def heading(self) -> str:
        return f"{self.number} {self.title}"

    @property
    def level(self) -> int:
        return self.number.count(".")


@dataclass
class Book:
    filename: str
    title: str
    subtitle: str
    subject: str
    keywords: str
    footer: str
    sections: list[Section]


INSTALL = Book(
    filename="01_lumen_installation_guide.pdf",
    title="Lumen Server 2.4 Installation Guide",
    subtitle="Lumen Handbook, part 1 of 3 - document revision 2.4.1-A, March 2024",
    subject="Installing, configuring, backing up and upgrading Lumen Server 2.4",
    keywords="Lumen, installation, lumen.toml, ports, backup, upgrade, fictional sample",
    footer="Lumen Server 2.4 Installation Guide",
    sections=[
        Section(
            "1",
            "About Lumen Server",
            [
                "Lumen is a self-hosted note synchronisation server made by Halcyon Lattice "
                "Ltd. It keeps notebooks, notes and their attachments in step across the Lumen "
                "desktop, mobile and web clients, while the data stays on a machine that you "
                "control. This guide covers Lumen Server 2.4.1, released on 12 March 2024. It "
                "describes how to install the server on a single Linux host, how to configure "
                "it, and how to keep it backed up and up to date. The other two parts of the "
                "Lumen Handbook describe the HTTP API with its rate limits, and the billing and "
                "refund policy for paid licences.",
                "A Lumen installation consists of two programs. The daemon, lumend, serves the "
                "web client and the HTTP API and runs the synchronisation channel that clients "
                "keep open while they are online. The command-line tool, lumenctl, is used by "
                "administrators to initialise the server, create backups, apply licence keys "
                "and run database migrations. Both programs are shipped in the same package and "
                "always carry the same version number.",
            ],
        ),
        Section(
            "2",
            "System Requirements",
            [
                "Lumen Server 2.4 runs on 64-bit Linux, on x86_64 as well as arm64 processors, "
                "with kernel 5.10 or later. The smallest supported machine has 2 GB of memory "
                "and one virtual CPU; Halcyon Lattice recommends 4 GB of memory and one "
                "additional CPU for every 250 active users. Plan for 10 GB of disk space for the "
                "program and the database, plus one and a half times the total size of the "
                "attachments your users are expected to store, because attachment uploads are "
                "staged on disk before they are committed.",
                "Notes are kept in a database. The default storage backend is an embedded SQLite "
                "database, which needs no separate service and is the right choice for "
                "households and small teams of up to 50 users. Installations with more than 50 "
                "users should use PostgreSQL; versions 13 to 16 are supported by Lumen 2.4. "
                "Moving from SQLite to PostgreSQL later is possible with the command lumenctl "
                "storage migrate, but it needs a maintenance window of roughly ten minutes per "
                "gigabyte of notes.",
            ],
        ),
        Section(
            "3",
            "Installing the Package",
            [
                "Halcyon Lattice publishes signed packages for Debian 12 and Ubuntu 22.04 "
                "(lumen-server_2.4.1_amd64.deb and the matching arm64 build), an RPM for Red Hat "
                "Enterprise Linux 9 and compatible distributions, and a container image named "
                "registry.halcyonlattice.example/lumen/server:2.4.1. The packages can be "
                "installed from the apt or dnf repository at "
                "https://packages.halcyonlattice.example, which also delivers later updates "
                "through the normal system package manager.",
                "Installing the package creates a system user and group named lumen, the "
                "configuration directory /etc/lumen, the data directory /var/lib/lumen and the "
                "log directory /var/log/lumen. It also installs a systemd unit called "
                "lumend.service, which is enabled but not started, because the server must be "
                "initialised first (see section 5). If you use the container image instead, "
                "mount a volume at /var/lib/lumen and pass the configuration file in as "
                "/etc/lumen/lumen.toml; the image runs as the unprivileged user ID 1500.",
            ],
        ),
        Section(
            "4",
            "Configuration File",
            [
                "All settings live in one TOML file, /etc/lumen/lumen.toml. The package installs "
                "a commented example with the default values, and any setting that is left out "
                "keeps its default. Every key can also be overridden by an environment variable "
                "built from the section and key names, for example LUMEN_SERVER__LISTEN_PORT for "
                "the key listen_port in the [server] section, which is convenient in containers.",
            ],
        ),
        Section(
            "4.1",
            "Network Ports",
            [
                "By default the HTTPS API and the web client listen on TCP port 7420, which is "
                "set by the listen_port key in the [server] section. Clients open their "
                "long-lived WebSocket synchronisation channel on a second port, 7421, set by "
                "sync_port. A third port, 7429 (admin_port), serves health checks and metrics; "
                "it is bound to 127.0.0.1 unless admin_bind says otherwise, and it must never be "
                "exposed to the internet. Open ports 7420 and 7421 in your firewall, and set "
                "public_url to the address your users will type, so that links in e-mails and "
                "shared notebooks point to the right place. A minimal configuration looks like "
                "this:",
                Code(
                    "[server]\n"
                    "listen_port = 7420\n"
                    "sync_port   = 7421\n"
                    "admin_port  = 7429\n"
                    'admin_bind  = "127.0.0.1"\n'
                    'public_url  = "https://notes.example.org:7420"\n'
                    "\n"
                    "[storage]\n"
                    'backend           = "sqlite"\n'
                    'data_dir          = "/var/lib/lumen"\n'
                    "max_attachment_mb = 25"
                ),
            ],
        ),
        Section(
            "4.2",
            "Storage and Attachments",
            [
                "The [storage] section chooses the database backend (sqlite or postgres), the "
                "data directory and, for PostgreSQL, the connection string in postgres_dsn. The "
                "max_attachment_mb key limits the size of a single attachment. The default is "
                "25 MB, and larger uploads are refused with the error code LMN-413. Raising the "
                "limit also raises the staging space the server needs, as described in "
                "section 2.",
            ],
        ),
        Section(
            "4.3",
            "TLS Certificates",
            [
                "Lumen serves HTTPS only. Point cert_file and key_file in the [tls] section to a "
                "certificate and its private key in PEM format. If both keys are empty, lumend "
                "generates a self-signed certificate valid for 365 days at the first start and "
                "stores it in /var/lib/lumen/tls; desktop clients then ask each user to confirm "
                "the certificate fingerprint once. The daemon reloads the certificate files when "
                "it receives the SIGHUP signal, so a renewed certificate does not require a "
                "restart.",
            ],
        ),
        Section(
            "5",
            "First Start and the Administrator Account",
            [
                "Before the first start, run sudo lumenctl init --admin-email you@example.org. "
                "The command creates the database schema, writes a random 64-character server "
                "secret to /etc/lumen/secret.key and prints a one-time setup token. Then start "
                "the service with systemctl start lumend and open https://your-host:7420/setup "
                "in a browser. The setup page asks for the token, which is valid for 30 minutes, "
                "and lets you choose the administrator password. If the token expires, run "
                "lumenctl init --reissue-token to print a new one; existing data is not touched.",
                "Further users are invited from the Administration page of the web client, and "
                "each invitation link is valid for 7 days. Until a licence key is applied, the "
                "server runs under the free Community plan, which allows up to five user "
                "accounts. Plans and licence keys are described in part 3 of the handbook, the "
                "billing and refund policy.",
            ],
        ),
        Section(
            "6",
            "Backups and Restore",
            [
                "The command lumenctl backup create writes a consistent snapshot of the "
                "database, the attachments and the configuration into a single archive, for "
                "example lumenctl backup create --dest /srv/lumen-backups. The package installs "
                "a systemd timer, lumen-backup.timer, that runs this command every night at "
                "02:30 server time. Archives older than the number of days given by keep_days in "
                "the [backup] section are removed automatically; by default Lumen keeps 14 days "
                "of backups.",
                "To restore, stop the daemon, run lumenctl backup restore with the path of the "
                "archive, and start the daemon again. A restore replaces all notes and accounts "
                "with the content of the archive, so users who synchronised after the backup was "
                "taken will see their newer changes offered as conflicts the next time their "
                "clients connect. Test a restore on a spare machine at least once a quarter.",
            ],
        ),
        Section(
            "7",
            "Upgrading",
            [
                "Lumen supports upgrades from the previous minor release only: a server on 2.3 "
                "can go directly to 2.4, while a server on 2.2 must first be upgraded to 2.3. To "
                "upgrade, take a backup, stop lumend, install the new package, run lumenctl "
                "migrate to update the database schema, and start lumend again. Downgrades are "
                "not supported. If an upgrade has to be rolled back, reinstall the old package "
                "and restore the backup that was taken before the upgrade.",
            ],
        ),
        Section(
            "8",
            "Troubleshooting",
            [
                "The daemon writes its log to /var/log/lumen/lumend.log, and lumenctl doctor "
                "checks the configuration, the certificate, the database connection and the "
                "free disk space in one go. If lumend refuses to start with error LMN-104, "
                "another program is already using port 7420 or 7421; change listen_port or "
                "sync_port, or stop the other program.",
                "If clients report error LMN-217, the clock of the server or of the client is "
                "off by more than 90 seconds, the tolerance set by max_clock_skew_s in the "
                "[sync] section. Install an NTP client such as chrony on the server instead of "
                "raising the tolerance, because a larger tolerance makes edit conflicts more "
                "likely to be resolved in the wrong order.",
            ],
        ),
    ],
)

API = Book(
    filename="02_lumen_api_rate_limits.pdf",
    title="Lumen Server 2.4 API and Rate Limits Reference",
    subtitle="Lumen Handbook, part 2 of 3 - API version 2, document revision 2.4.1-A, March 2024",
    subject="The HTTP API of Lumen Server 2.4: authentication, endpoints, rate limits, webhooks",
    keywords="Lumen, API, access tokens, rate limits, HTTP 429, webhooks, fictional sample",
    footer="Lumen Server 2.4 API and Rate Limits Reference",
    sections=[
        Section(
            "1",
            "Introduction",
            [
                "Lumen Server exposes an HTTP API that the official clients use and that "
                "administrators and developers can use for scripts and integrations. This "
                "reference describes version 2 of the API as shipped with Lumen Server 2.4. All "
                "endpoints live under the base path /api/v2/ on the HTTPS port of the server, so "
                "on a default installation the base URL is https://your-host:7420/api/v2/. "
                "Requests and responses use JSON encoded as UTF-8, and timestamps are written in "
                "RFC 3339 format in UTC. Version 1 of the API was removed in Lumen 2.0 and is not "
                "described here.",
            ],
        ),
        Section(
            "2",
            "Authentication and Scopes",
            [
                "Every request must carry a personal access token in the Authorization header, "
                "written as the word Bearer followed by the token. Users create tokens in the "
                "web client under Settings, Developer, Access tokens. A token starts with the "
                "prefix lmn_pat_ followed by 40 random characters, and it is shown only once, "
                "when it is created. Tokens expire after 90 days unless the administrator "
                "changes token_ttl_days in the [auth] section of lumen.toml; the longest "
                "lifetime allowed is 365 days.",
                "Each token carries one or more scopes that limit what it may do. The scope "
                "notes:read allows listing and reading notes and notebooks, notes:write allows "
                "creating, changing and deleting them, attachments:write allows uploads, and "
                "admin unlocks the user-management endpoints and is only available to "
                "administrators. A request outside the scopes of its token fails with HTTP "
                "status 403 and the error code LMN-403.",
            ],
        ),
        Section(
            "3",
            "Endpoints and Pagination",
            [
                "Notes are listed with GET /api/v2/notes and created with POST /api/v2/notes; a "
                "single note is read, changed or deleted with GET, PATCH or DELETE on "
                "/api/v2/notes/{id}. Notebooks are managed the same way under /api/v2/notebooks. "
                "Attachments are uploaded with POST /api/v2/attachments as multipart form data "
                "and are then referenced from a note by their attachment ID. Deleted notes stay "
                "in the trash for 30 days and can be listed with GET /api/v2/trash.",
                "List endpoints are paginated with cursors. A response contains at most limit "
                "items, 50 by default and 200 at most, together with a next_cursor value; pass it "
                "as the cursor parameter to fetch the next page. A response without next_cursor "
                "is the last page. Cursors stay valid for 24 hours.",
            ],
        ),
        Section(
            "4",
            "Rate Limits",
            [
                "To keep one busy integration from slowing down a whole server, Lumen 2.4 limits "
                "how fast each access token may call the API. The limit is a token bucket: every "
                "access token may make 120 requests per minute on average, with bursts of up to "
                "30 requests at once. Attachment uploads have a separate, stricter bucket of 20 "
                "uploads per hour per token. Requests that carry no token, such as the login and "
                "setup pages, are limited to 10 requests per minute per client IP address. The "
                "WebSocket synchronisation channel on port 7421 does not count against any of "
                "these limits.",
                "Every API response reports the state of the caller's bucket in three headers. "
                "X-Lumen-RateLimit-Limit gives the number of requests allowed per minute, "
                "X-Lumen-RateLimit-Remaining the requests left in the current window, and "
                "X-Lumen-RateLimit-Reset the Unix time in seconds at which the bucket is full "
                "again. A request over the limit is answered with HTTP status 429 and the error "
                "code LMN-429, together with a Retry-After header that says how many seconds to "
                "wait. Clients should wait at least that long and then retry with exponential "
                "backoff; retrying at once only extends the wait.",
                "Administrators can change the per-token limit with requests_per_minute and "
                "burst in the [ratelimit] section of lumen.toml, for example to give a trusted "
                "import job more room. Lumen 2.4 does not accept values above 600 requests per "
                "minute, and the upload limit cannot be changed in this version.",
            ],
        ),
        Section(
            "5",
            "Errors",
            [
                "Errors are returned with a suitable HTTP status and a JSON body of the form "
                '{"error": {"code": "LMN-404", "message": "...", "request_id": "..."}}. The code '
                "is stable across releases and is the value to test in scripts; the message is "
                "meant for people and may change. Quote the request_id when you contact support, "
                "because it identifies the matching line in the server log. Common codes are "
                "LMN-401 for a missing or expired token, LMN-403 for a missing scope, LMN-404 for "
                "an unknown note or notebook, LMN-409 for an edit conflict, LMN-413 for an "
                "attachment that is too large, and LMN-429 for a request over the rate limit.",
            ],
        ),
        Section(
            "6",
            "Webhooks",
            [
                "Instead of polling, an integration can register a webhook with POST "
                "/api/v2/webhooks, giving a target URL and the events it wants to receive: "
                "note.created, note.updated, note.deleted and notebook.shared. Lumen sends each "
                "event as an HTTPS POST with a JSON body and signs it with HMAC-SHA256, using the "
                "secret returned at registration. The hex-encoded signature is sent in the "
                "X-Lumen-Signature header, and receivers should reject events whose signature "
                "does not match.",
                "The receiver must answer within 5 seconds with a 2xx status. Failed deliveries "
                "are retried up to 6 times with exponential backoff, starting 15 seconds after "
                "the first attempt. A webhook whose deliveries have failed without a break for 3 "
                "days is disabled, and the user who registered it is notified by e-mail.",
            ],
        ),
        Section(
            "7",
            "Versioning and Deprecation",
            [
                "Endpoints of API version 2 are not removed or changed in incompatible ways "
                "within the 2.x releases of Lumen Server. When an endpoint is going to be retired "
                "in a later major release, its responses carry a Sunset header with the "
                "retirement date at least six months in advance, and the change is announced in "
                "the release notes.",
            ],
        ),
    ],
)

BILLING = Book(
    filename="03_lumen_billing_refunds.pdf",
    title="Lumen Billing and Refund Policy",
    subtitle="Lumen Handbook, part 3 of 3 - policy version 2024-03, effective 1 April 2024",
    subject="Plans, prices, invoices, seats, refunds and cancellation for Lumen licences",
    keywords="Lumen, billing, pricing, refund policy, licence, invoices, fictional sample",
    footer="Lumen Billing and Refund Policy",
    sections=[
        Section(
            "1",
            "Scope of this Policy",
            [
                "This policy explains how Halcyon Lattice Ltd. charges for Lumen Server "
                "licences, how invoices and payments work, and when you can get your money back. "
                "It applies to all licences bought directly from Halcyon Lattice on or after 1 "
                "April 2024, through the online store or by invoice. Licences bought from a "
                "reseller are billed under the reseller's terms, although the licence itself "
                "works the same way. Because Lumen is self-hosted, you always run the software on "
                "your own machines: a licence unlocks features and user seats, but it does not "
                "include hosting.",
            ],
        ),
        Section(
            "2",
            "Plans and Prices",
            [
                "Lumen is offered in three plans. The Community plan is free of charge and "
                "allows up to five user accounts, with help from the community forum only. The "
                "Team plan costs USD 6 per user per month when billed monthly, or USD 60 per user "
                "per year when billed annually; it adds notebooks shared between users and "
                "e-mail support with a response target of two business days. The Business plan "
                "costs USD 11 per user per month, or USD 110 per user per year, and adds SAML "
                "single sign-on, an audit log and priority support with a response target of 8 "
                "business hours.",
                "Prices are given without value added tax or sales tax. Invoices can be issued "
                "in US dollars, euros or pounds sterling; the euro and sterling prices are set "
                "once a year, on 1 January, from the dollar prices. Registered schools and "
                "universities receive a 40 percent discount on the Team and Business plans, and "
                "registered non-profit organisations receive 25 percent. The two discounts "
                "cannot be combined.",
            ],
        ),
        Section(
            "3",
            "Licence Keys",
            [
                "After the purchase you receive a licence key by e-mail, which you apply on the "
                "server with lumenctl license apply followed by the key. The key records the "
                "plan, the number of seats and the end of the paid term. Lumen checks the licence "
                "with license.halcyonlattice.example once every 7 days. If the server cannot "
                "reach the licence service, it keeps working normally for a grace period of 21 "
                "days, and installations behind strict firewalls can be validated with an "
                "offline licence file from the customer portal instead.",
            ],
        ),
        Section(
            "4",
            "Billing Cycle and Payment",
            [
                "Monthly subscriptions renew on the same day each month, and annual "
                "subscriptions on the anniversary of the purchase. Each renewal produces an "
                "invoice numbered in the form INV-2024-00123, which is e-mailed to the billing "
                "contact and can also be downloaded from the customer portal. Payment is taken "
                "by credit card or SEPA direct debit; annual subscriptions of 25 seats or more "
                "may instead be paid by bank transfer within 30 days of the invoice date.",
                "If a payment fails, Halcyon Lattice tries again three times over the following "
                "ten days and informs the billing contact each time. When the last attempt "
                "fails, the licence enters a grace period of 14 days in which everything keeps "
                "working and a banner reminds administrators to update the payment details. "
                "After the grace period the server switches to read-only mode: users can still "
                "read and export their notes, but no changes are synchronised until the payment "
                "has been received.",
            ],
        ),
        Section(
            "5",
            "Changing the Number of Seats",
            [
                "Seats can be added at any time from the customer portal. Added seats are "
                "charged pro rata to the day for the rest of the current term, and they take "
                "effect as soon as the updated licence key is applied. Seats can also be removed "
                "at any time, but the reduction takes effect at the next renewal, and no credit "
                "or refund is given for removed seats in the current term. Moving up from the "
                "Team plan to the Business plan is charged pro rata in the same way, while "
                "moving down from Business to Team takes effect at the next renewal.",
            ],
        ),
        Section(
            "6",
            "Refund Policy",
            [
                "New monthly subscriptions can be refunded in full if you ask within 14 days of "
                "the first payment. Later monthly renewals are not refundable, but you can cancel "
                "at any time so that the next renewal does not take place.",
                "Annual subscriptions can be refunded in full within 30 days of the purchase or "
                "of an annual renewal. From day 31 until the end of the sixth month of the term, "
                "you can still receive a prorated refund for the whole months that remain "
                "unused, minus a processing fee of 10 percent of the refunded amount. After the "
                "sixth month of an annual term no refund is given, and the licence stays valid "
                "until the end of the term.",
                "Professional services, such as the Priority Migration Pack and on-site "
                "training, are not refundable once the work has started, and the free Community "
                "plan has nothing to refund. To request a refund, write to "
                "billing@halcyonlattice.example from the address of the billing contact and give "
                "the invoice number. Approved refunds are paid to the original payment method "
                "within 10 business days. The licence key is revoked on the day the refund is "
                "approved, and the server falls back to the Community plan.",
            ],
        ),
        Section(
            "7",
            "Cancellation and Your Data",
            [
                "Cancelling a subscription stops future renewals; the licence remains valid until "
                "the end of the term that has been paid for. When the term ends, the server "
                "falls back to the Community plan: the five accounts that signed in most "
                "recently stay fully usable, and all other accounts become read-only until seats "
                "are bought again. Halcyon Lattice never deletes notes, because they are stored "
                "only on your own server. The billing records of your account are kept for seven "
                "years to meet accounting rules and can be viewed in the customer portal during "
                "that time.",
            ],
        ),
    ],
)

BOOKS = [INSTALL, API, BILLING]


# --- rendering ---------------------------------------------------------------------------

BODY_PT = 10.5
LINE_MM = 5.4
MARGIN_MM = 20.0


class HandbookPDF(FPDF):
    def __init__(self, book: Book) -> None:
        super().__init__(orientation="portrait", unit="mm", format="A4")
        self.book = book
        self.set_margins(MARGIN_MM, MARGIN_MM, MARGIN_MM)
        self.set_auto_page_break(auto=True, margin=22)
        self.set_title(book.title)
        self.set_author(f"{COMPANY} (fictional)")
        self.set_subject(book.subject)
        self.set_keywords(book.keywords)
        self.set_creator("crag scripts/make_samples.py")
        self.set_lang("en")
        self.set_creation_date(CREATED)
        self.set_display_mode(zoom="fullwidth", layout="single")

    def footer(self) -> None:
        self.set_y(-14)
        self.set_draw_color(180, 180, 180)
        self.line(MARGIN_MM, self.get_y(), self.w - MARGIN_MM, self.get_y())
        self.set_y(-12)
        self.set_font("Helvetica", "", 8.5)
        self.set_text_color(90, 90, 90)
        self.cell(0, 5, f"{self.book.footer} - page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0, 0, 0)

    def title_block(self) -> None:
        self.set_font("Helvetica", "B", 19)
        self.multi_cell(0, 9, self.book.title, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(1)
        self.set_font("Helvetica", "", 11)
        self.multi_cell(0, 6, self.book.subtitle, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.multi_cell(0, 6, COMPANY, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(1)
        self.set_font("Helvetica", "I", 8.5)
        self.set_text_color(90, 90, 90)
        self.multi_cell(0, 4.5, NOTICE, align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_text_color(0, 0, 0)
        self.ln(2)
        self.set_draw_color(60, 60, 60)
        self.line(MARGIN_MM, self.get_y(), self.w - MARGIN_MM, self.get_y())
        self.ln(4)

    def _room_left(self) -> float:
        return self.page_break_trigger - self.get_y()

    def heading(self, section: Section) -> None:
        size = 13.5 if section.level == 0 else 11.5
        if self._room_left() < 28:  # keep a heading with the first lines of its text
            self.add_page()
        self.ln(2.5 if section.level == 0 else 1)
        self.start_section(section.heading, level=section.level)
        self.set_font("Helvetica", "B", size)
        self.multi_cell(0, size * 0.5, section.heading, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(1.5)

    def paragraph(self, text: str) -> None:
        self.set_font("Helvetica", "", BODY_PT)
        self.multi_cell(0, LINE_MM, text, align="L", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.ln(2.2)

    def code(self, block: Code) -> None:
        lines = block.text.split("\n")
        line_h = 4.4
        height = line_h * len(lines) + 3
        if self._room_left() < height:
            self.add_page()
        self.set_font("Courier", "", 9)
        self.set_fill_color(242, 242, 242)
        self.ln(0.5)
        y0 = self.get_y()
        self.rect(MARGIN_MM, y0, self.epw, height, style="F")
        self.set_y(y0 + 1.5)
        for line in lines:
            self.set_x(MARGIN_MM + 4)
            self.cell(0, line_h, line, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.set_y(y0 + height)
        self.ln(3)


def _check_text(book: Book) -> None:
    """Core fonts only carry latin-1; keep the handbook plain ASCII."""
    chunks = [book.title, book.subtitle, book.subject, book.keywords, book.footer, NOTICE]
    for section in book.sections:
        chunks.append(section.heading)
        chunks.extend(b.text if isinstance(b, Code) else b for b in section.body)
    for chunk in chunks:
        bad = sorted({c for c in chunk if not (c == "\n" or 32 <= ord(c) < 127)})
        if bad:
            raise ValueError(f"{book.filename}: non-ASCII characters {bad!r} in {chunk[:60]!r}")


def render(book: Book) -> bytes:
    _check_text(book)
    pdf = HandbookPDF(book)
    pdf.add_page()
    pdf.set_page_label(label_style="D", label_start=1)
    pdf.title_block()
    for section in book.sections:
        pdf.heading(section)
        for block in section.body:
            if isinstance(block, Code):
                pdf.code(block)
            else:
                pdf.paragraph(block)
    return bytes(pdf.output())


def build(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for book in BOOKS:
        path = out_dir / book.filename
        path.write_bytes(render(book))
        paths.append(path)
    return paths


# --- checks -------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _pdf_pages(path: Path) -> list[str]:
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def check_pdf(book: Book, path: Path) -> list[str]:
    from pypdf import PdfReader

    problems: list[str] = []
    reader = PdfReader(path)
    n = len(reader.pages)
    meta = reader.metadata or {}
    if meta.get("/Title") != book.title:
        problems.append(f"{path.name}: title metadata {meta.get('/Title')!r}")
    if not 2 <= n <= 4:
        problems.append(f"{path.name}: {n} pages (want 2-4)")
    labels = list(reader.page_labels)
    if labels != [str(i + 1) for i in range(n)]:
        problems.append(f"{path.name}: page labels {labels}")
    if "/PageLabels" not in reader.trailer["/Root"]:
        problems.append(f"{path.name}: no /PageLabels in the catalog")
    outline = [o.title for o in _flatten(reader.outline)]
    if outline != [s.heading for s in book.sections]:
        problems.append(f"{path.name}: outline {outline}")
    pages = [page.extract_text() or "" for page in reader.pages]
    for i, text in enumerate(pages):
        footer = f"{book.footer} - page {i + 1} of {n}"
        if footer not in text:
            problems.append(f"{path.name} page {i + 1}: footer {footer!r} not extracted")
        if len(text.split()) < 150:
            problems.append(f"{path.name} page {i + 1}: only {len(text.split())} words")
        odd = sorted({c for c in text if not (c in "\n\t" or 32 <= ord(c) < 127)})
        if odd:
            problems.append(f"{path.name} page {i + 1}: unexpected characters {odd!r}")
    # Paragraphs may cross a page break: drop the footer lines before joining the pages.
    body = [t.replace(f"{book.footer} - page {i + 1} of {n}", " ") for i, t in enumerate(pages)]
    whole = _norm(" ".join(body))
    for section in book.sections:
        if _norm(section.heading) not in whole:
            problems.append(f"{path.name}: heading {section.heading!r} not in extracted text")
        for block in section.body:
            if isinstance(block, str) and _norm(block) not in whole:
                problems.append(f"{path.name}: paragraph not extracted verbatim: {block[:50]!r}")
    return problems


def _flatten(outline: list) -> list:
    out = []
    for item in outline:
        if isinstance(item, list):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out


def check_external(folder: Path) -> list[str]:
    problems = []
    files = sorted(folder.glob("*.md"))
    if not 3 <= len(files) <= 5:
        problems.append(f"{folder}: {len(files)} markdown files (want 3-5)")
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        if not re.fullmatch(r"<!-- source: https://\S+ \(fictional\) -->", lines[0]):
            problems.append(f"{path.name}: first line is not a '<!-- source: ... -->' comment")
        titles = [ln for ln in lines[1:] if ln.strip()]
        if not titles or not titles[0].startswith("# "):
            problems.append(f"{path.name}: no '# Title' after the source comment")
    return problems


QUESTION_KEYS = {
    "id",
    "question",
    "category",
    "expected_verdict",
    "answers",
    "reference_answer",
    "support",
    "origin",
    "notes",
}
# category -> (expected verdict, corpora its support must name); see eval/d2l/README.md
CATEGORIES: dict[str, tuple[str, set[str]]] = {
    "internal": ("correct", {"books"}),
    "external": ("incorrect", {"external"}),
    "partial": ("ambiguous", {"books", "external"}),
    "none": ("incorrect", set()),
}


def check_questions(path: Path, library: Path, external: Path) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    report: list[str] = []
    pdf_pages = {p.name: [_norm(t) for t in _pdf_pages(p)] for p in sorted(library.glob("*.pdf"))}
    md_text = {p.name: _norm(p.read_text(encoding="utf-8")) for p in sorted(external.glob("*.md"))}
    all_text = " ".join([*md_text.values(), *(" ".join(v) for v in pdf_pages.values())])
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        item = json.loads(line)
        qid = item.get("id", f"line {n}")
        if set(item) != QUESTION_KEYS:
            problems.append(f"{qid}: keys {sorted(item)}")
            continue
        if item["category"] not in CATEGORIES:
            problems.append(f"{qid}: unknown category {item['category']!r}")
            continue
        verdict, want = CATEGORIES[item["category"]]
        if item["expected_verdict"] != verdict:
            problems.append(f"{qid}: category {item['category']} must expect {verdict}")
        corpora = {s["corpus"] for s in item["support"]}
        if corpora != want:
            problems.append(f"{qid}: support corpora {sorted(corpora)}, want {sorted(want)}")
        where = []
        for s in item["support"]:
            hint = _norm(s["hint"])
            if s["corpus"] == "books":
                pages = pdf_pages.get(s["doc"])
                hit = [i + 1 for i, t in enumerate(pages or []) if hint in t]
                if not hit:
                    problems.append(f"{qid}: hint {s['hint']!r} not on a page of {s['doc']}")
                where.append(f"{s['doc']} p.{','.join(map(str, hit)) or '?'}")
            else:
                if hint not in md_text.get(s["doc"], ""):
                    problems.append(f"{qid}: hint {s['hint']!r} not in {s['doc']}")
                where.append(s["doc"])
        aliases = item["answers"]
        if aliases and not any(_norm(a) in all_text for a in aliases):
            problems.append(f"{qid}: no alias of {aliases!r} appears in any document")
        report.append(f"{qid:28} {item['expected_verdict']:10} {'; '.join(where) or '-'}")
    return problems, report


def check(samples: Path) -> int:
    problems: list[str] = []
    library = samples / "library"
    with tempfile.TemporaryDirectory() as tmp:
        for fresh in build(Path(tmp)):
            committed = library / fresh.name
            if not committed.exists() or not filecmp.cmp(fresh, committed, shallow=False):
                problems.append(f"{committed}: differs from a fresh build (re-run the script)")
    for book in BOOKS:
        path = library / book.filename
        if path.exists():
            problems.extend(check_pdf(book, path))
    problems.extend(check_external(samples / "external"))
    q_problems, report = check_questions(samples / "questions.jsonl", library, samples / "external")
    problems.extend(q_problems)
    for line in report:
        print(line)
    for book in BOOKS:
        path = library / book.filename
        if path.exists():
            print(f"{book.filename}: {len(_pdf_pages(path))} pages, {path.stat().st_size} bytes")
    for problem in problems:
        print("PROBLEM:", problem)
    print("check:", "OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


# The price list as a table, for questions a database answers better than prose
# (crag's `sql` source): the plans of the 2025 price change, one row per billing period.
PLANS = [
    ("Community", "monthly", 0, 10, "2025-02-01"),
    ("Team", "monthly", 8, 250, "2025-02-01"),
    ("Team", "annual", 80, 250, "2025-02-01"),
    ("Business", "monthly", 11, 5000, "2025-02-01"),
    ("Business", "annual", 110, 5000, "2025-02-01"),
]


def write_database(folder: Path) -> Path:
    """samples/database/lumen_plans.sqlite: Lumen's plans and prices (fictional)."""
    import sqlite3

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lumen_plans.sqlite"
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE plans (plan TEXT, billing TEXT, price_usd_per_user REAL, "
            "max_users INTEGER, effective_from TEXT)"
        )
        conn.executemany("INSERT INTO plans VALUES (?, ?, ?, ?, ?)", PLANS)
    conn.close()
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=SAMPLES, help="samples folder (default: samples/)"
    )
    parser.add_argument(
        "--check", action="store_true", help="verify the samples after writing them"
    )
    args = parser.parse_args(argv)
    for path in [*build(args.out / "library"), write_database(args.out / "database")]:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return check(args.out) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
