"""Errors as HTML: TileLang's full trace of a failed lowering, folded under one line."""

from __future__ import annotations

import html


def folded_trace_html(kernel: str | None, trace: str) -> str:
    """A ``<details>`` box holding ``trace``, titled with the kernel's name; both escaped."""
    esc = html.escape
    return (
        '<div class="tilelab-report tl-error" style="color:var(--jp-ui-font-color1,#222);'
        'border-left:3px solid var(--jp-error-color1,#d32f2f);padding:2px 8px">'
        f'<details><summary style="cursor:pointer">Full TileLang trace of <b>{esc(kernel or "the kernel")}</b>'
        f'</summary><pre style="white-space:pre-wrap">{esc(trace)}</pre></details></div>'
    )
