"""The row cache: every finished row of a sweep over devices on disk
(``$TILELAB_CACHE_DIR/sweeps``), under a key of the factory's source, the size, the configuration,
the bench options and the GPU model, so an interrupted sweep resumes when called again."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect as _pyinspect
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...records.launch import SweepRow
from ._plan import Config, SweepOptions

# Failed rows from these stages are cached: the same code fails the same way. Bench failures
# (a timeout, a lost context) are measured again.
CACHED_FAILURES = ("elaborate", "compile", "check")


def _source_of(fn: Any) -> str:
    fn = getattr(fn, "func", fn)  # functools.partial
    name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
    try:
        return name + "\n" + _pyinspect.getsource(fn)
    except (OSError, TypeError):
        return name


def sweep_identity(factory: Any, opts: SweepOptions, *, model: str, bench_kwargs: Mapping[str, Any]) -> str:
    """What every row key of one sweep shares: the code that makes and measures a row, and the GPU
    (how a launch is isolated, and its timeout, say how it is measured, not what: not part of it)."""
    def code(fn: Any) -> str | None:
        return fn and _source_of(fn)

    parts = {
        "factory": _source_of(factory), "compile_fn": code(opts.compile_fn), "bench_fn": code(opts.bench_fn),
        "check_fn": code(opts.check_fn), "ref": code(opts.ref), "flops": code(opts.flops), "bytes": code(opts.bytes),
        "backend": opts.backend, "out_idx": repr(opts.out_idx), "model": model,
        "bench": {k: repr(v) for k, v in sorted(bench_kwargs.items()) if k not in ("isolate", "timeout")},
        "versions": _versions(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


def _versions() -> str:
    from ..._version import __version__

    try:
        from importlib.metadata import version

        tilelang = version("tilelang")
    except Exception:
        tilelang = "?"
    return f"tilelab {__version__}, tilelang {tilelang}"


def row_key(identity: str, size: Config, config: Config) -> str:
    text = json.dumps([identity, sorted((k, repr(v)) for k, v in size.items()),
                       sorted((k, repr(v)) for k, v in config.items())])
    return hashlib.sha256(text.encode()).hexdigest()


class RowCache:
    """Finished rows on disk, one JSON file per key (written whole, then renamed into place)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def default(cls) -> RowCache:
        from ...engine.cache import cache_dir

        return cls(cache_dir() / "sweeps")

    def get(self, key: str) -> SweepRow | None:
        try:
            return SweepRow.from_dict(json.loads((self.root / f"{key}.json").read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, row: SweepRow) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps(dataclasses.replace(row, best=False, cached=False, final_ms=None,
                                                        final_device=None, final_ratio=None,
                                                        final_ratio_ci=None).to_dict(), default=str))
            os.replace(tmp, self.root / f"{key}.json")
        except OSError:
            pass  # a read-only cache costs resuming, not the sweep


