"""The stable id of a report's inspector page, the prefix of every anchor on it (shared by the page
and the tabs drawn apart from it)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any


def report_id(report: Any) -> str:
    """A stable id prefix for the report's anchors (same report, same ids)."""
    digest = hashlib.sha1(
        (report.name + "\0" + report.target + "\0" + (report.cache_key or "") + "\0" + report.sources.device).encode()
    ).hexdigest()
    return f"tl-{digest[:10]}"


def display_id(base: str) -> str:
    """``base`` with a random suffix: the ids of one displayed page. A notebook can show one kernel
    twice (a re-run in another cell, the same report displayed again); each page's tabs, links and
    zoom boxes must stay its own, in this session and beside the outputs saved by earlier ones."""
    return base + secrets.token_hex(3)
