"""The SASS tab (toolchain tier): the machine code ptxas made, linked to the device lines it came from.
Shown where the toolchain tier was computed (``%%tilelang --sass``); drawn by
:mod:`tilelab.render.machine`."""

from __future__ import annotations

from .. import machine
from ..page import Tab, register

register(Tab("sass", "SASS", 110, lambda r, page: machine.sass_html(r, page.rid, page.has("cuda")),
             shown=lambda r, page: r is None or r.machine is not None))
