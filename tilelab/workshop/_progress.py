"""A student's progress through the course, kept in one small JSON file so that it spans notebooks
and kernel restarts: ``$TILELAB_PROGRESS``, or ``progress.json`` in tilelab's folder of the user's
cache directory. Each exercise id maps to its tries, the latest status, whether it passed, the
hints given and whether the solution was shown.

Writes replace the file atomically under a lock (two notebooks of one student may check at once);
a file that cannot be read as progress is set aside (``.unreadable``) rather than lost, and a
folder that cannot be written leaves progress in memory for this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VERSION = 1
_MEMORY: dict[str, dict[str, Any]] = {}  # this process's view, where the file cannot be written


def path() -> Path:
    """Where progress is kept: ``$TILELAB_PROGRESS`` or the user's cache directory."""
    env = os.environ.get("TILELAB_PROGRESS")
    if env:
        return Path(env).expanduser()
    try:
        from platformdirs import user_cache_dir

        base = Path(user_cache_dir("tilelab"))
    except ImportError:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilelab"
    return base / "progress.json"


def _parse(text: str) -> dict[str, dict[str, Any]]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("exercises"), dict):
        raise ValueError("not a tilelab progress file")
    return {str(k): dict(v) for k, v in data["exercises"].items() if isinstance(v, dict)}


def read() -> dict[str, dict[str, Any]]:
    """Every exercise's record (empty where nothing was done yet)."""
    file = path()
    merged: dict[str, dict[str, Any]] = {}
    try:
        merged = _parse(file.read_text())
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        merged = {}
    for key, value in _MEMORY.get(str(file), {}).items():
        merged.setdefault(key, value)
    return merged


@contextlib.contextmanager
def _locked(file: Path) -> Iterator[None]:
    lock = file.with_name(file.name + ".lock")
    try:
        import fcntl
    except ImportError:  # no POSIX locks (Windows): one writer at a time is the user's
        yield
        return
    with open(lock, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update(exercise_id: str, **changes: Any) -> dict[str, Any]:
    """Apply ``changes`` to one exercise's record and store it; returns the new record.

    A change whose value is callable is applied to the old value (``tries=lambda n: n + 1``).
    """
    file = path()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        with _locked(file):
            data = _load_for_write(file)
            record = _apply(data.setdefault(exercise_id, {}), changes)
            _write(file, data)
            return record
    except OSError:  # a read-only home: keep progress for this process
        data = _MEMORY.setdefault(str(file), {})
        return _apply(data.setdefault(exercise_id, {}), changes)


def _apply(record: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    for key, value in changes.items():
        record[key] = value(record.get(key)) if callable(value) else value
    return record


def _load_for_write(file: Path) -> dict[str, dict[str, Any]]:
    try:
        text = file.read_text()
    except FileNotFoundError:
        return {}
    try:
        return _parse(text)
    except ValueError:
        file.replace(file.with_name(file.name + ".unreadable"))  # set aside, never overwritten silently
        return {}


def _write(file: Path, data: dict[str, dict[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=file.name, suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump({"version": VERSION, "exercises": data}, handle, indent=1, sort_keys=True)
        os.replace(tmp, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
