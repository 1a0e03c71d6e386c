"""tilelab: an interactive lab for TileLang GPU kernels.

``%load_ext tilelab`` registers the ``%%tilelang`` cell magic. ``tilelab.inspect(kernel)`` returns
a :class:`KernelReport` of everything TileLang generated. Importing tilelab does not import
TileLang, torch or IPython: each is loaded on first use.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__ as __version__
from .records.display import load_renderers_with
from .records.errors import (
    KernelFactoryError,
    LoweringError,
    NoGpuError,
    NotAKernelError,
    OptionError,
    PassConfigError,
    ReportFileError,
    TargetError,
    TilelabError,
)
from .records.kernel import (
    Argument,
    DeviceKernel,
    KernelReport,
    L2Window,
    LauncherSource,
    Layout,
    LdsRead,
    MfmaInstruction,
    Sources,
    TmaDescriptor,
    WgmmaInstruction,
    WgmmaOperand,
)
from .targets import Target, parse_target

# Public names that live in modules with heavy imports, loaded on first access.
_LAZY = {
    "inspect": (".engine.inspect", "inspect"),
    "run": (".launch", "run"),
    "bench": (".launch", "bench"),
    "BenchOptions": (".launch", "BenchOptions"),
    "SweepOptions": (".launch", "SweepOptions"),
    "sweep": (".launch", "sweep"),
    "sanitize": (".launch", "sanitize"),
    "swizzle_explorer": (".widgets.explorer", "swizzle_explorer"),
    "draw": (".render.svg", "draw"),
    "Inspector": (".widgets.inspector", "Inspector"),
    "has_gpu": ("._tilelang", "has_gpu"),
    "CacheEntryWarning": (".engine.cache", "CacheEntryWarning"),
    "CacheWriteWarning": (".engine.cache", "CacheWriteWarning"),
    "profile": (".launch._profile", "profile"),
    "timeline": (".launch._timeline", "timeline"),
    "Timeline": (".records.timeline", "Timeline"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tilelab' has no attribute {name!r}")


def _load_renderers() -> None:
    """The render layer, imported when the first record is shown: its modules register what they
    draw with the records' registry (the records themselves import no renderer)."""
    from . import render  # noqa: F401


load_renderers_with(_load_renderers)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tilelab``: registers ``%%tilelang`` and nothing else."""
    from .cell.magic import TileLangMagics

    ipython.register_magics(TileLangMagics)


__all__ = [
    "Argument",
    "BenchOptions",
    "CacheEntryWarning",
    "CacheWriteWarning",
    "DeviceKernel",
    "Inspector",
    "KernelFactoryError",
    "KernelReport",
    "L2Window",
    "LauncherSource",
    "Layout",
    "LdsRead",
    "LoweringError",
    "MfmaInstruction",
    "NoGpuError",
    "NotAKernelError",
    "OptionError",
    "PassConfigError",
    "ReportFileError",
    "Sources",
    "SweepOptions",
    "Target",
    "TargetError",
    "TilelabError",
    "TmaDescriptor",
    "WgmmaInstruction",
    "WgmmaOperand",
    "bench",
    "draw",
    "has_gpu",
    "inspect",
    "load_ipython_extension",
    "profile",
    "parse_target",
    "run",
    "sanitize",
    "sweep",
    "swizzle_explorer",
    "Timeline",
    "timeline",
]

# tilelab.trace_tiles: which elements each block of a CPU launch read and wrote.
_LAZY.update({
    "trace_tiles": (".launch._api", "trace_tiles"),
    "TileTrace": (".records.tile_trace", "TileTrace"),
    "TraceError": (".launch._tile_trace", "TraceError"),
})
__all__ += ["TileTrace", "TraceError", "trace_tiles"]

# tilelab.run(kernel, device="cpu"): a GPU kernel's tile program on the CPU; what cannot run there.
_LAZY.update({"EmulationError": (".launch._emulate", "EmulationError")})
__all__ += ["EmulationError"]

from .records.errors import BaselineError as BaselineError  # noqa: E402  (bench(..., baseline=...) that cannot be timed)

__all__.append("BaselineError")

# The timeline's named regions, and two timelines side by side.
_LAZY.update({
    "region": (".instrument.regions", "region"),
    "region_begin": (".instrument.regions", "region_begin"),
    "region_end": (".instrument.regions", "region_end"),
    "compare_timelines": (".records.timeline", "compare_timelines"),
})
__all__ += ["compare_timelines", "region", "region_begin", "region_end"]


def _reproduce(err: LoweringError, **options: Any) -> Any:
    """err.reproducer() of a LoweringError: the shrinking lives above the errors module (it lowers
    candidates), and is imported only when asked for."""
    from .engine.reproducer import reproduce

    return reproduce(err, **options)


LoweringError._reproduce = staticmethod(_reproduce)
