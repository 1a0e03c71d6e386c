"""Showing a sweep's progress: one bar (tqdm when installed), and in a notebook the table growing
as rows finish."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ...records.launch import SweepTable

LIVE_TABLE_EVERY_S = 0.5


class Progress:
    """tqdm when installed (tqdm.auto: a widget in notebooks), else a line on stderr."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.bar = None
        self.total, self.done, self.desc, self.enabled = total, 0, desc, enabled
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, leave=False)
            except ImportError:
                self.bar = None

    def update(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            sys.stderr.write(f"\r{self.desc}: {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")



class LiveTable:
    """The partial table in a notebook output that is updated in place (nothing outside a kernel)."""

    def __init__(self, enabled: bool) -> None:
        self.handle = None
        self.last = 0.0
        if not enabled:
            return
        try:
            from IPython import get_ipython
            from IPython.display import HTML, display

            shell = get_ipython()
            if shell is None or not hasattr(shell, "kernel"):
                return
            self.handle = display(HTML(""), display_id=True)
        except Exception:
            self.handle = None

    def update(self, table: Callable[[], SweepTable], final: bool = False) -> None:
        if self.handle is None:
            return
        now = time.monotonic()
        if not final and now - self.last < LIVE_TABLE_EVERY_S:
            return
        self.last = now
        from IPython.display import HTML

        # the table's HTML only: its PNG plots are drawn once, for the table the cell returns
        self.handle.update(HTML("" if final else table()._repr_html_()))


