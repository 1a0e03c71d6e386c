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
    output (to be folded away in displays).
    """

    def __init__(self, summary: str, *, kernel: str | None = None,
                 kernel_line: tuple[str, int, str] | None = None, trace: str = "") -> None:
        super().__init__(summary)
        self.summary = summary
        self.kernel = kernel
        self.kernel_line = kernel_line
        self.trace = trace

    def __str__(self) -> str:
        where = ""
        if self.kernel_line:
            filename, lineno, text = self.kernel_line
            where = f"\n  at {filename}:{lineno}: {text.strip()}"
        name = f"{self.kernel}: " if self.kernel else ""
        return f"{name}{self.summary}{where}"


class NoGpuError(TilelabError, RuntimeError):
    """Launching needs a CUDA GPU; inspection still works without one."""
