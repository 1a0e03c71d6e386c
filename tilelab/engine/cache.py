"""The report cache: one store, one policy, one validating read path.

An entry answers only for what it was made for. Its file holds the key material (the kernel's
script digest and name, the target, the options, TileLang's and tilelab's versions, the engine's
source digest) next to the report, and a read compares that material with the caller's before it
returns anything. An entry that cannot be read, holds no report, or was made for something else
(a file copied or swapped by hand, a half-written file, ``null``) is discarded with a warning and
the caller recomputes it.

What this process keeps in memory follows the same policy, through :class:`Recent`: bounded (the
least recently used entry goes first) and validated (an entry answers only for the key material
it was stored with). The reports read or written here are mirrored in memory, so a repeated
``inspect`` does not parse JSON again; a mirrored report answers only while its file holds the
bytes it was read from or written as (a file edited, swapped or deleted by hand is read again,
hence validated). The ``%%tilelang`` magic keeps its cells' reports and compiled kernels in a
:class:`Recent` too (``tilelab.cell.session``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .._version import __version__ as TILELAB_VERSION
from ..records.kernel import SCHEMA_VERSION, KernelReport

# The layout of an entry file; a change here makes older entries unreadable, hence discarded.
ENTRY_FORMAT = 2

# The engine's own sources: a report is only as current as the code that built it, and tilelab's
# version string does not change with every edit. A folder stands for its Python files.
# Paths from the package's root.
ENGINE_SOURCES = ("_tilelang", "engine/cache.py", "engine/inspect.py", "records/kernel.py", "engine/tma_rules.py",
                  "records/machine.py", "engine/toolchain.py", "engine/occupancy.py", "cuda_facts.py",
                  "engine/explain.py", "engine/mfma.py", "targets.py")


class CacheEntryWarning(UserWarning):
    """A cache entry was discarded (unreadable, or made for another kernel, target or version)."""


class CacheWriteWarning(UserWarning):
    """A report could not be written to the cache (a full disk, a read-only folder): it is kept in
    memory for this process only, and the warning says why."""


# Reports kept in memory: a GEMM's is about a megabyte, a 50-buffer kernel's tens of them.
REPORTS_IN_MEMORY = 32


class Recent:
    """A bounded store in this process's memory that answers only for what it was made for.

    At most ``size`` entries; storing one more forgets the least recently used. Each entry keeps
    the key material it was stored with (any value that compares with ``==``): ``get`` with other
    material discards the entry with a :class:`CacheEntryWarning` and answers None, as a disk
    entry made for another kernel is discarded. ``what`` names the entries in that warning.
    """

    def __init__(self, what: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"Recent({what!r}, size={size}): the size must be at least 1")
        self.what, self.size = what, size
        self._entries: OrderedDict[Any, tuple[Any, Any]] = OrderedDict()

    def get(self, key: Any, material: Any = None) -> Any:
        """The value stored under ``key`` for ``material``, or None."""
        found = self._entries.get(key)
        if found is None:
            return None
        if found[0] != material:
            del self._entries[key]
            warnings.warn(f"tilelab: discarded the {self.what} kept in memory under {str(key)[:16]}: it was made "
                          "for other key material; recomputing it", CacheEntryWarning, stacklevel=2)
            return None
        self._entries.move_to_end(key)
        return found[1]

    def put(self, key: Any, value: Any, material: Any = None) -> None:
        """Store ``value`` for ``material`` under ``key`` (replacing what was there)."""
        self._entries[key] = (material, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def discard(self, key: Any) -> None:
        self._entries.pop(key, None)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


# (cache folder, key) -> (digest of the entry file's bytes, or None when it could not be written; report)
_MEMORY = Recent("report", REPORTS_IN_MEMORY)


def cache_dir() -> Path:
    root = os.environ.get("TILELAB_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "tilelab" / "reports"


@functools.cache
def engine_fingerprint() -> str:
    """SHA-256 over the engine's source files, computed once per process."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parents[1]
    for entry in ENGINE_SOURCES:
        names = sorted(f"{entry}/{p.name}" for p in (here / entry).glob("*.py")) if (here / entry).is_dir() else [entry]
        for name in names:
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


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _remembered(key: str, material: dict[str, Any], data: bytes | None) -> KernelReport | None:
    """The report mirrored in memory for this entry, if the file still holds what it mirrors."""
    found = _MEMORY.get((str(cache_dir()), key), material)
    if found is None:
        return None
    digest, report = found
    if (None if data is None else _digest(data)) != digest:
        _MEMORY.discard((str(cache_dir()), key))  # the file changed since: read it again
        return None
    return report


def read(key: str, material: dict[str, Any]) -> KernelReport | None:
    """The cached report for ``material`` (whose key is ``key``), or None; never another's report."""
    path = _entry_path(key)
    try:
        data: bytes | None = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # no entry (or no cache folder) there
        data = None
    except OSError as err:
        _discard(path, f"it cannot be read ({err})")
        return None
    report = _remembered(key, material, data)
    if report is not None or data is None:
        return report
    try:
        report = _entry_report(data, material)
    except _BadEntry as why:
        _discard(path, str(why))
        return None
    _MEMORY.put((str(cache_dir()), key), (_digest(data), report), material)
    return report


class _BadEntry(Exception):
    """Why an entry file cannot answer, in the words of the warning."""


def _entry_report(data: bytes, material: dict[str, Any]) -> KernelReport:
    """The report an entry file holds, if it was made for ``material``; else :class:`_BadEntry`."""
    try:
        entry = json.loads(data.decode())
    except UnicodeDecodeError as err:
        raise _BadEntry(f"it cannot be read ({err})") from None
    except ValueError as err:
        raise _BadEntry(f"it is not JSON ({err})") from None
    if not isinstance(entry, dict) or entry.get("format") != ENTRY_FORMAT:
        what = type(entry).__name__ if not isinstance(entry, dict) else f"format {entry.get('format')!r}"
        raise _BadEntry(f"it is not a tilelab cache entry of format {ENTRY_FORMAT} (found {what})")
    stored = entry.get("material")
    if not isinstance(stored, dict):
        raise _BadEntry("it records no key material")
    why = _mismatch(stored, material)
    if why:
        raise _BadEntry(why)
    try:
        report = KernelReport.from_dict(entry.get("report"))  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise _BadEntry(f"its report is malformed ({type(err).__name__}: {err})") from None
    if (report.name, report.target) != (material["kernel"], material["arch"]):
        raise _BadEntry(f"its report is of {report.name} for {report.target}, "
                        f"not of {material['kernel']} for {material['arch']}")
    return report


def write(key: str, material: dict[str, Any], report: KernelReport) -> None:
    directory = cache_dir()
    data = json.dumps({"format": ENTRY_FORMAT, "material": material, "report": report.to_dict()}).encode()
    digest: str | None = _digest(data)
    # The entry appears whole or not at all: written to a file of this process and thread, then
    # renamed over the entry (atomic on POSIX and Windows), so a reader in another process never
    # sees a half-written entry, and a write killed half-way leaves only its temporary file.
    tmp = directory / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(_entry_path(key))
    except OSError as err:
        # A full disk or a read-only home must not break inspection: the report lives in memory only.
        digest = None
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        warnings.warn(f"tilelab: the report of {report.name} for {report.target} was not cached in {directory} "
                      f"({err.strerror or err}); it is kept in memory for this session only",
                      CacheWriteWarning, stacklevel=3)
    _MEMORY.put((str(directory), key), (digest, report), material)


def forget(key: str) -> None:
    _MEMORY.discard((str(cache_dir()), key))
    try:
        _entry_path(key).unlink(missing_ok=True)
    except OSError:
        pass
