"""The report cache when things go wrong around it: two processes writing the same entry while a
third reads it, a write killed half-way, and a full disk. No corrupt entry is ever served, and
inspection goes on (saying why nothing was cached)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import tilelab
from tilelab.engine import cache as _cache

ROOT = Path(__file__).resolve().parents[1]


def small_copy():
    import tilelang.language as T

    @T.prim_func
    def tile_copy(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            tile = T.alloc_shared((64, 64), T.float16)
            T.copy(A[by * 64, bx * 64], tile)
            T.copy(tile, B[by * 64, bx * 64])

    return tile_copy


@pytest.fixture(scope="module")
def saved_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    report = tilelab.inspect(small_copy(), "sm_90a", force=True)
    path = folder / "report.json"
    report.save(path)
    material = {"kernel": report.name, "arch": report.target, "test": "cache faults"}
    return report, path, material


def _child(code: str, cache: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "TILELAB_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


PRELUDE = """
import json, sys, time, warnings
from pathlib import Path
from tilelab.engine import cache as _cache
from tilelab.records.kernel import KernelReport
report = KernelReport.load(sys.argv[1])
material = json.loads(sys.argv[2])
key = _cache.key_of(material)
barrier, me, everyone = Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
(barrier / me).touch()
while len(list(barrier.iterdir())) < everyone:  # start together, whatever each took to import
    time.sleep(0.01)
"""


def test_two_writers_and_a_reader_never_see_a_corrupt_entry(tmp_path, saved_report):
    report, path, material = saved_report
    cache, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    writer = PRELUDE + """
for _ in range(120):
    _cache.write(key, material, report)
print("wrote")
"""
    reader = PRELUDE + """
warnings.simplefilter("error", _cache.CacheEntryWarning)  # a discarded (corrupt) entry fails the reader
seen = {"none": 0, "report": 0}
for _ in range(400):
    got = _cache.read(key, material)
    if got is None:
        seen["none"] += 1
    else:
        assert (got.name, got.target) == (material["kernel"], material["arch"])
        seen["report"] += 1
print(json.dumps(seen))
"""
    import json

    args = (str(path), json.dumps(material), str(barrier))
    procs = [_child(writer, cache, *args, "w1", "3"), _child(writer, cache, *args, "w2", "3"),
             _child(reader, cache, *args, "r", "3")]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-3000:]
    seen = json.loads(outs[2][0].strip().splitlines()[-1])
    assert seen["none"] + seen["report"] == 400
    # the finished entry is whole, and no temporary file is left behind
    entries = sorted(p.name for p in cache.iterdir())
    assert entries == [f"{_cache.key_of(material)}.json"], entries
    entry = _cache._entry_report((cache / entries[0]).read_bytes(), material)
    assert entry.to_dict() == report.to_dict()


@pytest.mark.parametrize("where", ["before the rename", "half-way through the data"])
def test_a_write_killed_half_way_is_never_served(tmp_path, saved_report, where, monkeypatch):
    report, path, material = saved_report
    cache = tmp_path / "cache"
    killer = {
        "before the rename": "pathlib.Path.replace = lambda self, target: os.kill(os.getpid(), signal.SIGKILL)",
        "half-way through the data": ("real = pathlib.Path.write_bytes\n"
                                      "def half(self, data):\n"
                                      "    real(self, data[:len(data) // 2])\n"
                                      "    os.kill(os.getpid(), signal.SIGKILL)\n"
                                      "pathlib.Path.write_bytes = half"),
    }[where]
    code = f"""
import json, os, pathlib, signal, sys
from tilelab.engine import cache as _cache
from tilelab.records.kernel import KernelReport
report = KernelReport.load(sys.argv[1])
material = json.loads(sys.argv[2])
{killer}
_cache.write(_cache.key_of(material), material, report)
print("not killed")
"""
    import json

    proc = _child(code, cache, str(path), json.dumps(material))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (out, err[-2000:])
    key = _cache.key_of(material)
    assert not (cache / f"{key}.json").exists()
    assert [p.name for p in cache.iterdir() if p.name.endswith(".tmp")], "the killed write left its temporary file"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to discard: the half-written file is never read
        assert _cache.read(key, material) is None
        _cache.write(key, material, report)
        assert _cache.read(key, material) is not None


def test_a_full_disk_still_inspects_and_says_why_nothing_was_cached(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(cache))
    real = Path.write_bytes

    def full(self, data):
        if cache in self.parents:
            real(self, data[:100])  # the disk fills up part of the way through
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.warns(tilelab.CacheWriteWarning, match="was not cached in .*No space left on device.*kept in memory"):
        report = tilelab.inspect(small_copy(), "sm_90a", force=True)
    assert report.name == "tile_copy" and "__global__" in report.sources.device  # inspected whole
    assert list(cache.iterdir()) == []  # no entry, and no partial temporary file left behind
