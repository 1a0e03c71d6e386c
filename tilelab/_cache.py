"""The report cache: one store, one policy, one validating read path.

An entry answers only for what it was made for. Its file holds the key material (the kernel's
script digest and name, the target, the options, TileLang's and tilelab's versions, the engine's
source digest) next to the report, and a read compares that material with the caller's before it
returns anything. An entry that cannot be read, holds no report, or was made for something else
(a file copied or swapped by hand, a half-written file, ``null``) is discarded with a warning and
the caller recomputes it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from . import __version__ as TILELAB_VERSION
from ._model import SCHEMA_VERSION, KernelReport

# The layout of an entry file; a change here makes older entries unreadable, hence discarded.
ENTRY_FORMAT = 2

# The engine's own sources: a report is only as current as the code that built it, and tilelab's
# version string does not change with every edit.
ENGINE_SOURCES = ("_adapter.py", "_cache.py", "_inspect.py", "_model.py", "_tma_rules.py", "_machine.py",
                  "_toolchain.py", "occupancy.py", "cuda_facts.py", "_explain.py", "mfma.py", "targets.py")


class CacheEntryWarning(UserWarning):
    """A cache entry was discarded (unreadable, or made for another kernel, target or version)."""


_MEMORY: dict[str, KernelReport] = {}  # this process's entries, keyed like the files


def cache_dir() -> Path:
    root = os.environ.get("TILELAB_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "tilelab" / "reports"


@functools.lru_cache(maxsize=None)
def engine_fingerprint() -> str:
    """SHA-256 over the engine's source files, computed once per process."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ENGINE_SOURCES:
        digest.update(name.encode() + b"\0")
        try:
            digest.update((here / name).read_bytes())
        except OSError:  # pragma: no cover - an installed copy without sources
            digest.update(b"missing")
        digest.update(b"\0")
    return digest.hexdigest()


def key_material(*, script: str, kernel: str, arch: str, out_idx: Any, pass_configs: dict[str, Any],
                 backends: tuple[str, ...], constants: Any, tilelang_version: str,
                 tiers: tuple = ()) -> dict[str, Any]:
    """Everything a report depends on, as JSON-ready values (stored in the entry and compared).
    ``tiers``: the optional tiers the report holds (toolchain with its CUDA home, pass trace)."""
    extra = {"tiers": [list(t) if isinstance(t, tuple) else t for t in tiers]} if tiers else {}
    return {**extra,
        "script": hashlib.sha256(script.encode()).hexdigest(),
        "kernel": kernel,
        "arch": arch,
        "out_idx": list(out_idx) if out_idx is not None else None,
        "pass_configs": {k: repr(v) for k, v in sorted(pass_configs.items())},
        "backends": list(backends),
        "constants": [[k, repr(v), bool(e)] for k, v, e in constants],
        "tilelang": tilelang_version,
        "tilelab": TILELAB_VERSION,
        "schema": SCHEMA_VERSION,
        "engine": engine_fingerprint(),
    }


def key_of(material: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def _entry_path(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def _discard(path: Path, why: str) -> None:
    warnings.warn(f"tilelab: discarded the cached report {path}: {why}; recomputing it",
                  CacheEntryWarning, stacklevel=4)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _mismatch(stored: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """The first part of the key material that differs, in words, or None when all agree."""
    for part in wanted:
        if stored.get(part) != wanted[part]:
            return f"it was made for another {part} ({stored.get(part)!r}, not {wanted[part]!r})"
    extra = sorted(set(stored) - set(wanted))
    return f"it records key parts tilelab does not use ({', '.join(extra)})" if extra else None


def read(key: str, material: dict[str, Any]) -> KernelReport | None:
    """The cached report for ``material`` (whose key is ``key``), or None; never another's report."""
    if key in _MEMORY:
        return _MEMORY[key]
    path = _entry_path(key)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        _discard(path, f"it cannot be read ({err})")
        return None
    try:
        entry = json.loads(text)
    except ValueError as err:
        _discard(path, f"it is not JSON ({err})")
        return None
    if not isinstance(entry, dict) or entry.get("format") != ENTRY_FORMAT:
        what = type(entry).__name__ if not isinstance(entry, dict) else f"format {entry.get('format')!r}"
        _discard(path, f"it is not a tilelab cache entry of format {ENTRY_FORMAT} (found {what})")
        return None
    stored = entry.get("material")
    if not isinstance(stored, dict):
        _discard(path, "it records no key material")
        return None
    why = _mismatch(stored, material)
    if why:
        _discard(path, why)
        return None
    try:
        report = KernelReport.from_dict(entry.get("report"))  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        _discard(path, f"its report is malformed ({type(err).__name__}: {err})")
        return None
    if (report.name, report.target) != (material["kernel"], material["arch"]):
        _discard(path, f"its report is of {report.name} for {report.target}, "
                       f"not of {material['kernel']} for {material['arch']}")
        return None
    _MEMORY[key] = report
    return report


def write(key: str, material: dict[str, Any], report: KernelReport) -> None:
    _MEMORY[key] = report
    directory = cache_dir()
    entry = {"format": ENTRY_FORMAT, "material": material, "report": report.to_dict()}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(entry))
        tmp.replace(_entry_path(key))
    except OSError:
        pass  # a read-only home must not break inspection


def forget(key: str) -> None:
    _MEMORY.pop(key, None)
    try:
        _entry_path(key).unlink(missing_ok=True)
    except OSError:
        pass


def drop_memory() -> None:
    """Forget this process's entries and keep the files: what a new process would find."""
    _MEMORY.clear()


def clear() -> None:
    _MEMORY.clear()
    directory = cache_dir()
    if directory.is_dir():
        for path in directory.glob("*.json"):
            path.unlink(missing_ok=True)
