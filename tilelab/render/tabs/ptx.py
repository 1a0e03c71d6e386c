"""The PTX tab (toolchain tier): the PTX nvcc made of the device code, its lines linked to the CUDA tab.
Shown where the toolchain tier was computed (``%%tilelang --sass``); drawn by
:mod:`tilelab.render.machine`."""

from __future__ import annotations

from .. import machine
from ..page import Tab, register

register(Tab("ptx", "PTX", 100, lambda r, page: machine.ptx_html(r, page.rid, page.has("cuda")),
             shown=lambda r, page: r is None or r.machine is not None))
