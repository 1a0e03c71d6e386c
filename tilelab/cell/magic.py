"""``%%tilelang``: run a cell, inspect (and on a GPU, compile) the kernels it defines, show them.

The magic is thin: it parses its line into a :class:`~tilelab.cell.options.CellOptions`
(``%%tilelang?`` prints the options), registers the cell's source with ``linecache`` (line
numbers as in the notebook cell, the ``%%tilelang`` line being line 1, so ``inspect.getsource``
works for kernels defined in it and tracebacks point at the cell's lines), and hands both to
:meth:`tilelab.cell.session.CellSession.run`, which runs the cell as a transaction, builds, binds,
launches and returns a :class:`~tilelab.cell.session.CellResult` (``TileLangMagics.last``). The magic
lends the run this shell's display, print and traceback colouring, and shows option errors as
IPython's UsageError.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

from ..records.errors import LoweringError, TilelabError
from .options import HELP, CellUsageError, parse_cell_line
from .session import CellHost, CellResult, CellSession, CellSource, CellSyntaxError, cell_identity


@magics_class
class TileLangMagics(Magics):
    """The ``%%tilelang`` cell magic; ``last`` is the :class:`CellResult` of the latest run."""

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.session = CellSession()

    @property
    def last(self) -> CellResult | None:
        return self.session.last

    @cell_magic
    def tilelang(self, line: str, cell: str) -> None:
        try:
            options = parse_cell_line(line)
            self.session.run(self._source(cell), options, self.shell.user_ns, self._host())
        except CellUsageError as err:  # its message names the option and what to give instead
            raise UsageError(str(err)) from None
        except LoweringError:
            raise  # shown short by the run: the message, the cell line and TileLang's trace folded
        except TilelabError as err:  # e.g. an --out-idx the kernel has no parameter for
            raise UsageError(f"%%tilelang: {err}") from None

    tilelang.__doc__ = HELP

    def _source(self, cell: str) -> CellSource:
        python = "\n" + self.shell.transform_cell(cell)  # a leading newline: line 1 is the magic's line
        filename = self.shell.compile.cache(python, self.shell.execution_count, raw_code="\n" + cell)
        return CellSource(cell, python, filename, cell_identity(self._parent_header(), cell))

    def _parent_header(self) -> Any:
        """The front end's message for this execution (ipykernel's; none in a terminal)."""
        getter = getattr(self.shell, "get_parent", None)
        try:
            parent = getter() if callable(getter) else None
        except Exception:
            parent = None
        return parent or getattr(self.shell, "parent_header", None) or {}

    def _host(self) -> CellHost:
        shell = self.shell
        return CellHost(
            display=self._display,
            traceback=lambda err, tb: shell.InteractiveTB.structured_traceback(type(err), err, tb),
            syntax_traceback=lambda err: shell.SyntaxTB.structured_traceback(type(err), err, None),
        )

    def _display(self, obj: Any) -> None:
        # Through this shell's own formatter and publisher (display() would use the global one).
        data, metadata = self.shell.display_formatter.format(obj)
        if data:
            self.shell.display_pub.publish(data=data, metadata=metadata)


__all__ = ["CellResult", "CellSyntaxError", "TileLangMagics"]
