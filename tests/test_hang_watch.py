"""Locating a hang without a GPU: the watch rewrite on TileLang's own lowered sources (checked against
the device source's wait statements and the kernels' Python lines, and compiled by the real nvcc
beside the plain kernel), the slot macro's bit layout (compiled and run on the host by g++), the
decoder and the explanation on slot buffers written here by hand, and the notebook side's
plumbing with a stand-in worker (the file it reads, the worker it kills, the error it keeps)."""

from __future__ import annotations

import inspect
import json
import pickle
import re
import shutil
import subprocess
from pathlib import Path

import fault_kernels
import pytest
import timeline_kernels

from tilelab import _tilelang
from tilelab.engine.toolchain import find_toolchain
from tilelab.instrument.decode.hang import HangReport, analyse, decode, hang_text
from tilelab.instrument.rewrite.timeline import RewriteError
from tilelab.instrument.rewrite.watch import PREAMBLE, Watched, eval_index, thread_range, watch
from tilelab.kernels.gemm import matmul

CUDA = Path("/usr/local/cuda")
TOOLS = find_toolchain(CUDA)
FAULTS_PY = inspect.getsourcefile(fault_kernels)

_CACHE: dict[str, tuple] = {}


def lowered(name: str):
    """(prim_func, device source with the extra parameter, Watched)."""
    if name not in _CACHE:
        func, configs = {
            "gemm": (lambda: matmul(1024, 1024, 1024), None),
            "parity": (lambda: fault_kernels.ws_pipeline_func(producer_parity=0), fault_kernels.WS_PASS_CONFIGS),
            "arrivals": (lambda: fault_kernels.ws_pipeline_func(empty_arrivals=256), fault_kernels.WS_PASS_CONFIGS),
            "add": (lambda: timeline_kernels.add(), None),
        }[name]
        func = func()
        source = _tilelang.timeline_device_source(func, "sm_90a", configs)
        blocks = {"gemm": 32, "parity": 4, "arrivals": 4, "add": 1024}[name]
        watched = watch(source, ops=_tilelang.timeline_ops(func), cell_file=_tilelang.kernel_file(func), blocks=blocks)
        _CACHE[name] = (func, source, watched)
    return _CACHE[name]


def line_of(path: str, needle: str) -> int:
    hits = [i + 1 for i, text in enumerate(Path(path).read_text().split("\n")) if needle in text]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def word(state: int, site: int, barrier: int = 0, parity: int = 0, iteration: int = 0) -> int:
    """A state word laid out by hand from the rewrite's docstring (not by tilelab.instrument.decode.hang.pack)."""
    return state * 2**62 + site * 2**48 + barrier * 2**32 + parity * 2**31 + iteration


# ------------------------------------------------------------------------------------------
# The rewrite on lowered sources
# ------------------------------------------------------------------------------------------


def test_every_barrier_wait_of_the_auto_warp_specialised_gemm_is_watched_before_and_after():
    _, source, w = lowered("gemm")
    waits = [t.strip() for t in source.split("\n") if re.search(r"\]\.wait\(", t)]
    syncs = [t for t in source.split("\n") if t.strip() == "__syncthreads();"]
    assert len(waits) == 2 and len([s for s in w.sites if s.kind == "mbarrier"]) == 2
    assert len([s for s in w.sites if s.kind == "syncthreads"]) == len(syncs)
    out = w.source.split("\n")
    for text in waits:
        i = next(k for k, t in enumerate(out) if t.strip() == text)
        array, rest = text.split("[", 1)
        index, parity = rest[:rest.index("].wait(")], rest[rest.index("].wait(") + 7:-2]
        site = next(s for s in w.sites if s.index == index)
        var = re.search(r"\b(k\w*)\b", index).group(1)
        assert out[i - 1].strip() == f"TLW_SET(2, {site.id}, ({index}), ({parity}), {var});"
        assert out[i + 1].strip() == f"TLW_SET(1, {site.id}, ({index}), ({parity}), {var});"
        assert array == site.barrier == "mbarrier"
    # the producer's wait sits under `if (((int)threadIdx.x) < 128)`, the consumer's in its else
    # branch: threads 128..383 of the 384 that __launch_bounds__ gives
    assert "__launch_bounds__(384, 1)" in source
    producer = next(s for s in w.sites if s.role == "producer")
    consumer = next(s for s in w.sites if s.role == "consumer")
    assert producer.threads == (0, 128) and consumer.threads == (128, 384) and w.warps == 12
    assert producer.stage == "empty" and consumer.stage == "full"
    # the barriers' expected arrivals, as the source initialises them
    inits = {(a, i): n for a, i, n in w.inits}
    for m in re.finditer(r"mbarrier\[(\d+)\]\.init\((\d+)\);", source):
        assert inits[("mbarrier", int(m.group(1)))] == int(m.group(2))
    # the consumer's 256 threads arrive on the 'empty' barriers 3..5 the producer waits on
    (free,) = [a for a in w.arrivals if a.role == "consumer"]
    assert free.threads == 256 and free.indices == (3, 4, 5)


def test_the_fault_kernels_waits_are_named_by_the_lines_of_their_mbarrier_wait_parity():
    for name in ("parity", "arrivals"):
        _, source, w = lowered(name)
        by_barrier = {s.barrier: s for s in w.sites if s.kind == "mbarrier"}
        empty, full = by_barrier["empty"], by_barrier["full"]
        assert empty.cell_line == line_of(FAULTS_PY, "T.mbarrier_wait_parity(empty[")
        assert full.cell_line == line_of(FAULTS_PY, "T.mbarrier_wait_parity(full[")
        assert empty.role == "producer" and empty.threads == (0, 128) and empty.stage == "empty"
        assert full.role == "consumer" and full.threads == (128, 256) and full.stage == "full"
        expected = 256 if name == "arrivals" else 128
        assert sorted(w.inits) == [("empty", 0, expected), ("empty", 1, expected), ("full", 0, 128),
                                   ("full", 1, 128)]
        (frees,) = [a for a in w.arrivals if a.barrier == "empty"]
        assert frees.threads == 128 and frees.role == "consumer"
        assert frees.cell_line == line_of(FAULTS_PY, "T.mbarrier_arrive(empty[")
        fills = [a for a in w.arrivals if a.barrier == "full" and a.kind == "arrive"]
        assert [a.threads for a in fills] == [128]
    # the wrong parity is in the device code the watch records: (... ^ 0)
    assert lowered("parity")[2].sites[1].parity.endswith("^ 0)")


def test_a_kernel_without_barriers_is_watched_from_start_to_finish_only():
    _, source, w = lowered("add")
    assert not [s for s in w.sites if s.kind == "mbarrier"]
    out = w.source
    assert out.count("TLW_SET(1, 1, 0, 0, 0);") == 1 and out.count("TLW_SET(3, 1, 0, 0, 0);") >= 1
    assert "TLT_BIND" not in out and "TLW_SET(2," not in out


def test_a_source_without_the_bind_is_refused():
    with pytest.raises(RewriteError, match="TLT_BIND"):
        watch('extern "C" __global__ void __launch_bounds__(128) k(float* A) {\n}\n')


@pytest.mark.calls_nvcc
@pytest.mark.slow
@pytest.mark.skipif(TOOLS.nvcc is None, reason=f"needs nvcc and ptxas in {CUDA}/bin")
def test_the_watched_gemm_compiles_for_sm_90a_with_no_spill_and_no_serialised_wgmma(tmp_path):
    """The plain source's build is the timeline tests' business; this one builds the watched one."""
    _, _, w = lowered("gemm")
    incs = [f"-I{d}" for d in _tilelang.device_include_dirs()]
    (tmp_path / "watched.cu").write_text(w.source)
    done = subprocess.run([str(TOOLS.nvcc), "-cubin", "-std=c++17", "-arch=sm_90a", "-Xptxas", "-v",
                           "-diag-suppress=1444,20012", *incs, "-o", "watched.cubin", "watched.cu"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stderr + done.stdout
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log
    assert not re.search(r"C75\d\d|wgmma.*serializ", log, re.IGNORECASE), log


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run the slot macro on the host")
def test_the_slot_macro_packs_what_the_decoder_unpacks(tmp_path):
    macro = PREAMBLE[PREAMBLE.index("#define TLW_SET"):PREAMBLE.index("// ---- end")]
    program = "\n".join([
        "#include <cstdio>",
        "static unsigned __activemask() { return 0xFFFFFFFFu; }",
        "static void __threadfence_system() {}",
        "static unsigned long long tlw_globaltimer() { return 123456789ull; }",
        macro,
        "int main() {",
        "  unsigned long long words[2] = {0, 0};",
        "  volatile unsigned long long* tlw_slot = words; unsigned tlw_thread = 64u;",
        "  int k = 5;",
        "  TLW_SET(2, 9, ((k % 3) + 3), (((k % 6) / 3) ^ 1), k);",
        "  printf(\"%llu %llu\\n\", words[0], words[1]);",
        "  TLW_SET(3, 1, 0, 0, 0);",
        "  printf(\"%llu\\n\", words[0]);",
        "  tlw_thread = 65u;  /* lane 1: not the first active lane, writes nothing */",
        "  TLW_SET(2, 4, 1, 1, 1);",
        "  printf(\"%llu\\n\", words[0]);",
        "}",
    ])
    (tmp_path / "slot.cpp").write_text(program)
    subprocess.run(["g++", "-o", "slot", "slot.cpp"], cwd=tmp_path, check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "slot")], capture_output=True, text=True, check=True).stdout.split()
    # k = 5: barrier (5 % 3) + 3 = 5, parity ((5 % 6) / 3) ^ 1 = 0, iteration 5
    assert int(out[0]) == word(2, 9, 5, 0, 5) and int(out[1]) == 123456789
    assert int(out[2]) == word(3, 1) == int(out[3])


# ------------------------------------------------------------------------------------------
# Decoding and explaining slot buffers written by hand
# ------------------------------------------------------------------------------------------


def slots(w: Watched, per_warp) -> list[int]:
    words = [0] * w.words()
    for b in range(w.blocks):
        for warp in range(w.warps):
            value = per_warp(b, warp)
            if value is not None:
                words[(b * w.warps + warp) * 2] = value
                words[(b * w.warps + warp) * 2 + 1] = 1_000_000 + b
    return words


def sites_of(w: Watched) -> tuple[int, int]:
    by_barrier = {s.barrier: s.id for s in w.sites if s.kind == "mbarrier"}
    return by_barrier["empty"], by_barrier["full"]


def test_a_wrong_parity_deadlock_reads_as_two_warp_groups_waiting_on_each_other():
    _, _, w = lowered("parity")
    empty, full = sites_of(w)
    words = slots(w, lambda b, warp: word(2, empty, 0, 0, 0) if warp < 4 else word(2, full, 0, 0, 0))
    states = decode(words, w)
    assert len(states) == 4 * 8 and {s.state for s in states} == {"waiting"}
    report = analyse(states, w, grid_blocks=4, seconds=9.5, quiet_s=1.0)
    producer, consumer = report.waiting("producer")[0], report.waiting("consumer")[0]
    assert (producer.warps, producer.blocks, producer.barrier, producer.parity, producer.iterations) == \
        ((0, 1, 2, 3), 4, "empty[0]", 0, (0,))
    assert (consumer.warps, consumer.barrier, consumer.parity) == ((4, 5, 6, 7), "full[0]", 0)
    assert producer.cell_line == line_of(FAULTS_PY, "T.mbarrier_wait_parity(empty[")
    assert report.findings[0].startswith("a deadlock: ")
    assert any("parity that blocks the first pass" in f for f in report.findings)
    assert not any("fewer arrivals" in f for f in report.findings)
    text = hang_text(report)
    assert "producer warp group (warps 0-3) in 4 of 4 blocks: waiting on empty[0] for parity 0, iteration 0, " \
        f"line {producer.cell_line} of fault_kernels.py" in text
    assert "located in 9.5 s" in text and "read 1.0 s after the last change" in text


def test_fewer_arrivals_reads_as_a_shortfall_with_both_counts():
    _, _, w = lowered("arrivals")
    empty, full = sites_of(w)
    words = slots(w, lambda b, warp: word(2, empty, 0, 0, 2) if warp < 4 else word(2, full, 0, 1, 2))
    report = analyse(decode(words, w), w, grid_blocks=4)
    (shortfall,) = [f for f in report.findings if f.startswith("fewer arrivals than expected")]
    assert "empty[0], empty[1] are initialised for 256 arrivals per phase, but only 128 threads" in shortfall
    assert f"line {line_of(FAULTS_PY, 'T.mbarrier_arrive(empty[')}" in shortfall
    assert not any("parity that blocks" in f for f in report.findings)  # not the first iteration
    assert report.waiting("consumer")[0].iterations == (2,)


def test_blocks_that_never_started_and_warps_that_finished_are_counted_apart():
    _, _, w = lowered("parity")
    empty, full = sites_of(w)

    def state(b, warp):
        if b == 3:
            return None  # never started
        if b == 2:
            return word(3, 1)  # finished
        return word(2, empty, 1, 1, 7) if warp < 4 else word(1, full, 1, 1, 7)

    report = analyse(decode(slots(w, state), w), w, grid_blocks=4)
    (waiting,) = report.waiting()
    assert waiting.blocks == 2 and waiting.barrier == "empty[1]" and waiting.iterations == (7,)
    running = [g for g in report.groups if g.state == "running"]
    assert len(running) == 1 and running[0].warps == (4, 5, 6, 7) and "past full[" in hang_text(report)
    finished = [g for g in report.groups if g.state == "finished"]  # block 2's producer and consumer warps
    assert sorted(w for g in finished for w in g.warps) == list(range(8)) and {g.blocks for g in finished} == {1}
    assert any("1 of the 4 watched blocks never started" in n for n in report.notes)


def test_a_spin_without_barriers_says_which_warps_never_finished():
    _, _, w = lowered("add")
    report = analyse(decode(slots(w, lambda b, warp: word(1, 1) if b < 2 else None), w), w, grid_blocks=1024)
    (group,) = report.groups
    assert group.state == "running" and group.kind == "kernel" and group.blocks == 2
    (finding,) = report.findings
    assert finding.startswith("no watched warp was waiting on a barrier: 8 warps (warps 0-7) of 2 blocks never "
                              "finished. They are running code that never ends")


def test_a_watched_launch_that_finished_says_the_hang_did_not_recur():
    _, _, w = lowered("parity")
    report = analyse(decode(slots(w, lambda b, warp: word(3, 1)), w), w, grid_blocks=4, outcome="finished",
                     seconds=4.0)
    assert report.findings == () and "the hang did not recur" in hang_text(report)


def test_the_records_round_trip():
    _, _, w = lowered("arrivals")
    again = Watched.from_dict(json.loads(json.dumps(w.to_dict())))
    assert again.sites == w.sites and again.arrivals == w.arrivals and again.inits == w.inits
    empty, full = sites_of(w)
    report = analyse(decode(slots(w, lambda b, warp: word(2, empty, 0, 0, 2)), w), w, grid_blocks=4, seconds=3.0)
    assert HangReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_thread_ranges_and_index_expressions_as_the_device_code_writes_them():
    assert thread_range("((int)threadIdx.x) < 128", (0, 384)) == (0, 128)
    assert thread_range("128 <= ((int)threadIdx.x)", (0, 256)) == (128, 256)
    assert thread_range("(128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 256)", (0, 384)) == (128, 256)
    assert thread_range("tl::tl_shuffle_elect<128>()", (0, 128)) is None
    assert thread_range("((int)threadIdx.x) < ((int)blockIdx.x)", (0, 128)) is None
    assert [eval_index("((k % 3) + 3)", {"k": k}) for k in range(4)] == [3, 4, 5, 3]
    assert [eval_index("(((k % 6) / 3) ^ 1)", {"k": k}) for k in range(6)] == [1, 1, 1, 0, 0, 0]
    assert eval_index("((ko & 3) >> 1)", {"ko": 6}) == 1
    assert eval_index("k + blockIdx.x", {"k": 1}) is None and eval_index("__import__('os')", {}) is None


# ------------------------------------------------------------------------------------------
# The notebook side, with a stand-in worker
# ------------------------------------------------------------------------------------------


class StandInWorker:
    """Answers the watch's two calls as the worker would, writing the slots the way the GPU
    would (into the shared file), and records what the notebook side asks of it."""

    def __init__(self, watched: Watched, words: list[int], finished: bool = False) -> None:
        self.watched, self.words, self.finished = watched, words, finished
        self.calls: list[str] = []
        self.killed = self.replaced = 0

    def call(self, fn, *args, timeout=None, label="", **kwargs):
        self.calls.append(fn.__name__)
        if fn.__name__ == "prepare_in_worker":
            _payload, options = args
            assert options["blocks"] == 4 and options["block_threads"] == 256
            Path(options["path"] + ".json").write_text(json.dumps(self.watched.to_dict()))
            return {"key": options["path"]}
        key, launch_args, options = args
        assert launch_args == ["A", "B", "C"] and options["quiet_s"] == 1.0
        data = b"".join(int(v).to_bytes(8, "little") for v in self.words)
        Path(options["path"]).write_bytes(data + bytes(4096 - len(data) % 4096))
        return {"finished": self.finished, "elapsed_s": 1.2, "quiet_s": 1.0, "progressing": False}

    def kill(self):
        self.killed += 1

    def _replace_soon(self):
        self.replaced += 1


def prepared_parity():
    from tilelab.launch._run import Prepared

    func, _, _ = lowered("parity")
    return Prepared(compiled=func, name="ws_gemm_kernel", params=[], backend="tvm_ffi")


def test_the_notebook_reads_the_slots_the_worker_left_and_kills_the_hung_worker():
    from tilelab.launch import _watch

    _, _, w = lowered("parity")
    empty, full = sites_of(w)
    worker = StandInWorker(w, slots(w, lambda b, warp: word(2, empty, 0, 0, 0) if warp < 4 else
                                    word(2, full, 0, 0, 0)))
    report = _watch.locate_hang(worker, prepared_parity(), ["A", "B", "C"], {}, b"payload")
    assert worker.calls == ["prepare_in_worker", "launch_in_worker"] and worker.killed == 1 == worker.replaced
    assert report.outcome == "hung" and report.waiting("producer")[0].barrier == "empty[0]"
    assert report.seconds is not None and report.seconds >= 0
    assert not list(Path(_watch.shared_memory_dir()).glob("tilelab-hang-*/slots"))  # the files are gone


def test_a_watched_launch_that_finished_leaves_the_worker_alive():
    from tilelab.launch import _watch

    _, _, w = lowered("parity")
    worker = StandInWorker(w, slots(w, lambda b, warp: word(3, 1)), finished=True)
    report = _watch.locate_hang(worker, prepared_parity(), ["A", "B", "C"], {}, b"payload")
    assert report.outcome == "finished" and worker.killed == 0


class TimingOutWorker:
    loaded: set = set()

    def call(self, fn, *args, timeout=None, label="", **kwargs):
        from tilelab.launch._worker import WorkerTimeout

        raise WorkerTimeout(label, timeout)


def test_a_timeout_gets_the_hang_attached_and_a_failed_watch_keeps_the_error(monkeypatch):
    from tilelab.launch import _isolated, _watch
    from tilelab.launch._cuda_errors import KernelLaunchError

    prepared = prepared_parity()
    monkeypatch.setattr(_isolated, "kernel_ref", lambda p, w: _isolated.KernelRef("k", p.name, None))
    _, _, w = lowered("parity")
    empty, full = sites_of(w)
    report = analyse(decode(slots(w, lambda b, warp: word(2, empty, 0, 0, 0) if warp < 4 else
                                  word(2, full, 0, 0, 0)), w), w, grid_blocks=4, seconds=8.0, quiet_s=1.0)
    monkeypatch.setattr(_isolated, "_payload", lambda p: ("func",))
    monkeypatch.setattr(_watch, "locate_hang", lambda *a, **k: report)
    with pytest.raises(KernelLaunchError) as caught:
        _isolated._call_watched(TimingOutWorker(), prepared, {}, 2.0, _isolated.poisoned_launch_in_worker,
                        watch_args=lambda: ["A"])
    err = caught.value
    assert err.kind == "timeout" and err.hang is report and err.cause is None
    text = str(err)
    assert "no answer within 2 s" in text and "where it hung" in text and "empty[0]" in text
    again = pickle.loads(pickle.dumps(err))
    assert again.hang == report and str(again) == text

    def broken(*a, **k):
        raise RuntimeError("cuMemHostRegister failed: CUDA driver error 1 (invalid argument)")

    monkeypatch.setattr(_watch, "locate_hang", broken)
    with pytest.raises(KernelLaunchError) as caught:
        _isolated._call_watched(TimingOutWorker(), prepared, {}, 2.0, _isolated.poisoned_launch_in_worker,
                        watch_args=lambda: ["A"])
    err = caught.value
    assert err.hang is None and "likely cause" in str(err) and "mbarrier" in str(err)
    assert "could not locate the hang" in str(err) and "cuMemHostRegister failed" in err.hang_note

    monkeypatch.setattr(_watch, "locate_hang", lambda *a, **k: pytest.fail("diagnose_hang=False still watched"))
    with pytest.raises(KernelLaunchError) as caught:
        _isolated._call_watched(TimingOutWorker(), prepared, {}, 2.0, _isolated.poisoned_launch_in_worker,
                                watch_args=None)
    assert caught.value.hang is None and caught.value.hang_note is None


def test_the_auto_warp_specialised_gemm_names_its_t_pipelined_line_and_finds_no_false_shortfall():
    _, _, w = lowered("gemm")
    gemm_py = inspect.getsourcefile(matmul)
    producer = next(s for s in w.sites if s.role == "producer")
    consumer = next(s for s in w.sites if s.role == "consumer")
    # TileLang's auto warp specialisation gives its waits no #line: the loop's T.Pipelined line names them
    assert producer.cell_line is None and producer.loop_line == line_of(gemm_py, "T.Pipelined(")
    assert consumer.loop_line == producer.loop_line
    # stage 0 of iteration 3: the producer waits on 'empty' mbarrier[3], the consumer on 'full' mbarrier[0]
    words = slots(w, lambda b, warp: word(2, producer.id, 3, 0, 3) if warp < 4 else word(2, consumer.id, 0, 1, 3))
    report = analyse(decode(words, w), w, grid_blocks=32)
    (p,), (c,) = report.waiting("producer"), report.waiting("consumer")
    assert (p.barrier, p.stage, p.warps) == ("mbarrier[3]", "empty", (0, 1, 2, 3))
    assert (c.barrier, c.stage, c.warps) == ("mbarrier[0]", "full", tuple(range(4, 12)))
    assert p.stage_index == 0 == c.stage_index  # mbarrier[3] is the first 'empty' barrier: (k % 3) + 3
    assert report.findings[0].startswith("a deadlock")
    # the init counts (1 for the TMA stages, 256 for the consumer's) match what arrives
    assert not any("fewer arrivals" in f for f in report.findings)
    assert f"line {producer.loop_line} of gemm.py" in hang_text(report)
    assert "consumer warp groups (warps 4-11)" in hang_text(report)
    assert "waiting on mbarrier[3] (stage 0's 'empty' barrier) for parity 0, iteration 3" in hang_text(report)


def test_without_a_cuda_driver_the_slots_refuse_with_a_watch_error(tmp_path):
    import ctypes

    from tilelab.launch import _watch

    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has a CUDA driver: the refusal is what a machine without one sees")
    except OSError:
        pass
    with pytest.raises(_watch.WatchError, match="libcuda.so.1"):
        _watch.MappedSlots(str(tmp_path / "slots"), 4096)
    with pytest.raises(_watch.WatchError, match="holds 8 bytes; 16 were expected"):
        (tmp_path / "short").write_bytes(bytes(8))
        _watch._read_words(str(tmp_path / "short"), 2)


class PlainSlots:
    """The slot file mapped without CUDA (what MappedSlots is, less the registration)."""

    def __init__(self, path, nbytes):
        import mmap

        self.path, self.closed = path, False
        with open(path, "wb") as f:
            f.write(bytes(max(4096, nbytes)))
        self._file = open(path, "r+b")  # noqa: SIM115 (closed by close())
        self.map = mmap.mmap(self._file.fileno(), 0)
        self.device_pointer = 0x7000_0000_0000

    def snapshot(self):
        return bytes(self.map)

    def close(self):
        self.closed = True
        self.map.close()
        self._file.close()


class StandInTorch:
    """torch as the worker's watch loop uses it; ``done``: whether the launched kernel ends."""

    def __init__(self, done):
        outer = self

        class Event:
            def record(self):
                pass

            def query(self):
                return outer.done

        class Cuda:
            synchronize = staticmethod(lambda: None)

        self.done, self.cuda = done, Cuda()
        self.cuda.Event = Event

    def zeros(self, *a, **k):
        return None


@pytest.mark.parametrize("finishes", [False, True])
def test_the_worker_launches_with_the_slots_last_and_answers_when_they_go_quiet(monkeypatch, tmp_path, finishes):
    from tilelab.launch import _watch

    _, _, w = lowered("parity")
    empty, _full = sites_of(w)
    launched = []

    def kernel(*args):
        launched.append(args)
        slots = made[0]
        slots.map[0:8] = word(2, empty, 0, 0, 0).to_bytes(8, "little")  # warp 0 of block 0 waits

    made = []
    monkeypatch.setattr(_watch, "MappedSlots", lambda path, n: made.append(PlainSlots(path, n)) or made[-1])
    monkeypatch.setattr(_watch, "slot_tensor", lambda torch, slots, words: ("slots", words))
    monkeypatch.setattr(_watch, "_torch", lambda: StandInTorch(finishes))
    path = str(tmp_path / "slots")
    _watch._WATCHED[path] = (kernel, w)
    answer = _watch.launch_in_worker(path, ["A", "B", "C"], {"path": path, "quiet_s": 0.05, "watch_s": 60.0})
    assert launched == [("A", "B", "C", ("slots", w.words()))]
    assert answer["finished"] is finishes and made[0].closed is finishes
    if not finishes:  # a hung kernel's slots stay mapped: the notebook reads the file after the kill
        assert answer["quiet_s"] >= 0.05 and answer["progressing"] is False
        assert decode(_watch._read_words(path, w.words()), w)[0].state == "waiting"
    assert path not in _watch._WATCHED
