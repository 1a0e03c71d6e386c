"""The Lines tab (toolchain tier): each cell line with the device lines and SASS instructions it became.
Shown where the toolchain tier was computed (``%%tilelang --sass``); drawn by
:mod:`tilelab.render.machine`."""

from __future__ import annotations

from .. import machine
from ..page import Tab, register

register(Tab("lines", "Lines", 90,
             lambda r, page: machine.lines_html(r, page.rid, page.has("cuda") and page.has("sass")),
             shown=lambda r, page: r is None or r.machine is not None))
