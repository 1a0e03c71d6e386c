"""The stable id of a report's inspector page, the prefix of every anchor on it (shared by the page
and the tabs drawn apart from it)."""

from __future__ import annotations

import hashlib
from typing import Any


def report_id(report: Any) -> str:
    """A stable id prefix for the report's anchors (same report, same ids)."""
    digest = hashlib.sha1(
        (report.name + "\0" + report.target + "\0" + (report.cache_key or "") + "\0" + report.sources.device).encode()
    ).hexdigest()
    return f"tl-{digest[:10]}"
