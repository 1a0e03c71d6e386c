"""The inspector page's folded blocks opened, as the page's click handler opens them: a block
that travels compressed (``<details class="... tl-lazy" data-z="...">``) gets its markup back, so
string tests read what a reader sees once the block is unfolded."""

from __future__ import annotations

import base64
import gzip
import re

_LAZY = re.compile(r'<details class="([^"]*?) tl-lazy" data-z="([^"]+)"><summary>(.*?)</summary>'
                   r'<div class="tl-lazy-body"></div></details>', re.S)


def unfold(page: str) -> str:
    """``page`` with every compressed folded block's content in place."""
    def opened(m: re.Match) -> str:
        inner = gzip.decompress(base64.b64decode(m.group(2))).decode()
        return f'<details class="{m.group(1)}"><summary>{m.group(3)}</summary>{inner}</details>'

    return _LAZY.sub(opened, page)
