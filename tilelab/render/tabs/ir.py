"""The IR passes tab: the TIR after each lowering pass, and what each pass changed.
Shown where the passes were recorded (``%%tilelang --passes``); drawn by :mod:`tilelab.render.machine`."""

from __future__ import annotations

from .. import machine
from ..page import Tab, register

register(Tab("ir", "IR passes", 120, lambda r, page: machine.ir_html(r, page.rid),
             shown=lambda r, page: r is None or r.passes is not None))
