"""The inspector's tabs, one module each; importing this package registers them all.

Each module defines its tab and registers it (:func:`tilelab.render.page.register`) with its
title, its place in the row, whether a page shows it by default, its HTML and its text. The page
(:func:`tilelab.render.html.render_html`) and the plain text (:func:`tilelab.render.text.render_text`)
read that one registry: a new inspector section is one new module here, imported below.
"""

from __future__ import annotations

from . import arguments, cell, cuda, ir, launcher, layouts, lines, mfma, ptx, sass, summary, timeline, tma, wgmma
from .arguments import arguments_html
from .cell import cell_html
from .cuda import cuda_html
from .launcher import launch_links, launcher_html
from .layouts import layouts_html
from .mfma import mfma_html
from .summary import summary_html
from .tma import tma_html
from .wgmma import wgmma_html

__all__ = [
    "arguments", "arguments_html", "cell", "cell_html", "cuda", "cuda_html", "ir", "launch_links", "launcher",
    "launcher_html", "layouts", "layouts_html", "lines", "mfma", "mfma_html", "ptx", "sass", "summary",
    "summary_html", "timeline", "tma", "tma_html", "wgmma", "wgmma_html",
]
