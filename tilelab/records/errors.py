"""Exceptions tilelab raises, each carrying a short explanation a user can act on."""

from __future__ import annotations


class TilelabError(Exception):
    """Base class: ``str(err)`` is one clear sentence (or a few) that says what to change."""


class TargetError(TilelabError, ValueError):
    """A target tilelab cannot use; the message lists the valid forms."""


class NotAKernelError(TilelabError, TypeError):
    """The object given is not a TileLang kernel tilelab can inspect."""


class LoweringError(TilelabError):
    """TileLang failed to lower or compile a kernel.

    ``summary`` is the one-line explanation, ``kernel_line`` the (filename, lineno, text) of the
    user's kernel line the failure points at when it can be found, ``trace`` the full TileLang
    output (to be folded away in displays). ``python_error`` is (type name, message) when the
    failure is a plain Python error in the kernel's own code (a ``NameError``), which TileLang
    only happened to be running: displays name that error, not TileLang.
    ``diagnosis`` is what tilelab's catalogue of known
    compile failures makes of it (:class:`tilelab._tilelang.doctor.Diagnosis`): ``cause`` (the catalogue id,
    None when the failure is not in it), ``advice`` (what to change), ``pass_name`` (TileLang's
    pass that failed, or ``"elaboration"``) and ``tile_op`` read through from it.
    """

    def __init__(self, summary: str, *, kernel: str | None = None,
                 kernel_line: tuple[str, int, str] | None = None, trace: str = "",
                 python_error: tuple[str, str] | None = None, diagnosis: object | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.kernel = kernel
        self.kernel_line = kernel_line
        self.trace = trace
        self.python_error = python_error
        self.diagnosis = diagnosis

    @property
    def cause(self) -> str | None:
        return getattr(self.diagnosis, "cause", None)

    @property
    def advice(self) -> str:
        return getattr(self.diagnosis, "advice", "")

    @property
    def pass_name(self) -> str | None:
        return getattr(self.diagnosis, "pass_name", None)

    @property
    def tile_op(self) -> str | None:
        return getattr(self.diagnosis, "tile_op", None)

    def diagnosis_lines(self) -> list[str]:
        """The diagnosis as short lines (the pass, the tile op, the cause and what to change)."""
        lines = getattr(self.diagnosis, "lines", None)
        return list(lines()) if callable(lines) else []

    def __str__(self) -> str:
        where = ""
        if self.kernel_line:
            filename, lineno, text = self.kernel_line
            where = f"\n  at {filename}:{lineno}: {text.strip()}"
        name = f"{self.kernel}: " if self.kernel else ""
        more = "".join(f"\n  {line}" for line in self.diagnosis_lines())
        return f"{name}{self.summary}{where}{more}"


class OptionError(TilelabError, ValueError):
    """An option given with a kernel (``out_idx``, ``args``) that does not fit it."""


class PassConfigError(OptionError):
    """A pass config TileLang does not know, or a value of the wrong type; names the key."""


class KernelFactoryError(TilelabError, TypeError):
    """The user's kernel factory raised while building the kernel (its own error, not the call's).

    ``where`` is the (filename, lineno, text) of the factory's line that raised, when found.
    """

    def __init__(self, message: str, *, where: tuple[str, int, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        if not self.where:
            return self.message
        filename, lineno, text = self.where
        return f"{self.message}\n  at {filename}:{lineno}: {text.strip()}"


class ReportFileError(TilelabError, ValueError):
    """A saved report that cannot be read; the message names the file and what is wrong."""


class NoGpuError(TilelabError, RuntimeError):
    """Launching needs a CUDA GPU; inspection still works without one."""


class BaselineError(TilelabError, ValueError):
    """A ``baseline=`` of :func:`tilelab.bench` (or a sweep's ratio baseline) that cannot be timed
    beside the kernel: it is not callable, it raised, or its inputs do not match the kernel's."""
