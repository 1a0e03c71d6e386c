"""Named regions of a kernel for the intra-kernel timeline: ``with tilelab.region("softmax"):``
inside a ``T.prim_func`` (or ``tilelab.region_begin("softmax")`` ... ``tilelab.region_end("softmax")``).

A region leaves a marker in the kernel that TileLang's own passes drop: an ordinary compile has
no trace of it (the same device code, no cost). ``tilelab.timeline`` turns the markers into marks,
so the region's statements show as one span named after it (kind ``region``), on the user's line
of the ``with``. A region is a phase like the others: a phase tilelab marks inside it (a barrier
wait, a WGMMA) ends it; name the code between such phases (a softmax, a dequantisation, an
epilogue's arithmetic). Regions are marked in CUDA source (the tvm_ffi, cython and nvrtc backends).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..records.errors import TilelabError


class RegionError(TilelabError, ValueError):
    """A region name that cannot be used (empty, or not a string)."""


def _check(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise RegionError(f"a region needs a non-empty name (a string such as \"softmax\"), not {name!r}")
    return name.strip()


def region_begin(name: str) -> None:
    """Open the named region here (inside a ``T.prim_func`` body)."""
    from .._tilelang import region_marker

    region_marker(_check(name), True)


def region_end(name: str) -> None:
    """Close the named region here (inside a ``T.prim_func`` body)."""
    from .._tilelang import region_marker

    region_marker(_check(name), False)


@contextlib.contextmanager
def region(name: str) -> Iterator[None]:
    """``with tilelab.region("softmax"):`` around statements of a ``T.prim_func``: a named span in
    ``tilelab.timeline``, nothing in an ordinary compile."""
    name = _check(name)
    region_begin(name)
    yield
    region_end(name)


__all__ = ["RegionError", "region", "region_begin", "region_end"]
