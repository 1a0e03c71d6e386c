"""The catalogue of faults on the GPU: every way a kernel of ours fails, what the user is shown, how
long until they see it, and whether the next launch in the same notebook (and torch) still works.

One :class:`Case` per fault. Both ``tests/launch/test_fault_catalogue_gpu.py`` (which asserts each case's
expectation) and ``benchmarks/isolation.py`` (which prints the table) run these same cases, so the
table and the tests cannot drift. A case runs in the calling process, as a notebook would: the
faults happen in tilelab's worker process and this process carries on to the next case.

A case whose kernel or code lives elsewhere names it in ``needs`` ("module:attribute"); where it
is missing, the case is reported as not available instead of run.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Outcome:
    """What one case showed: ``shown`` the error (or result) text the user sees, ``kind`` the
    error's kind, ``seconds`` from the call to the error, ``next_ok`` whether a correct kernel then
    ran and passed in this process (and torch computed), ``details`` what the expectation reads."""

    shown: str
    kind: str | None
    seconds: float
    next_ok: bool | None
    details: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why the outcome is not the expected one (None: as expected)
    available: bool = True

    def first_line(self) -> str:
        return (self.shown.strip().splitlines() or [""])[0]

    def to_dict(self) -> dict[str, Any]:
        return {"shown": self.shown, "kind": self.kind, "seconds": self.seconds, "next_ok": self.next_ok,
                "details": self.details, "problem": self.problem, "available": self.available}


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    run: Callable[[], Outcome]
    expect: Callable[[Outcome], str | None]  # None when right, else what is wrong
    slow: bool = False  # minutes (compute-sanitizer): the table runs it, the quick test run does not
    needs: tuple[str, ...] = ()


def _resolve(name: str) -> Any:
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


def missing(case: Case) -> list[str]:
    """The names in ``case.needs`` that cannot be imported here."""
    out = []
    for name in case.needs:
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            out.append(name)
    return out


# --------------------------------------------------------------------------------------------
# Helpers every case shares
# --------------------------------------------------------------------------------------------


def next_launch_ok() -> bool:
    """A correct kernel runs and passes in this process, and this process's torch still computes."""
    import fault_kernels as fk
    import torch

    import tilelab

    mine = torch.arange(10, device="cuda", dtype=torch.float32)
    if float((mine * 2).sum().item()) != 90.0:
        return False
    return bool(tilelab.run(fk.copy(), ref=lambda a: a).passed)


def attempt(call: Callable[[], Any], details: Callable[[Any, BaseException | None], dict] | None = None) -> Outcome:
    """Time ``call`` to its error (or its result), then try the next launch."""
    t0 = time.perf_counter()
    value = err = None
    try:
        value = call()
    except BaseException as caught:  # an interrupt is a fault case too
        err = caught
    seconds = time.perf_counter() - t0
    shown = f"{type(err).__name__}: {err}" if err is not None else repr(value)
    extra = dict(details(value, err)) if details is not None else {}
    return Outcome(shown, getattr(err, "kind", None) if err is not None else None, seconds, next_launch_ok(), extra)


def _needs(condition: bool, why: str) -> str | None:
    return None if condition else why


def _recovered(o: Outcome) -> str | None:
    return _needs(bool(o.next_ok), "the next launch in the same process did not pass")


def _all(*checks: str | None) -> str | None:
    return next((c for c in checks if c), None)


def _compiled(func: Any, unguarded: bool = False) -> Any:
    import buggy_kernels as bk

    return bk.compile(func, unguarded=unguarded)


# --------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------


def _hang() -> Outcome:
    import buggy_kernels as bk
    import torch

    import tilelab

    spin = _compiled(bk.spin_forever())
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    return attempt(lambda: tilelab.run(spin, flag, torch.zeros(256, device="cuda"), timeout=3.0))


def _illegal_address() -> Outcome:
    import buggy_kernels as bk
    import torch

    import tilelab

    bad = _compiled(bk.far_oob_store(), unguarded=True)
    return attempt(lambda: tilelab.run(bad, torch.randn(1024, device="cuda")),
                   lambda v, e: {"sticky": bool(getattr(e, "sticky", False)),
                                 "isolated": bool(getattr(e, "isolated", False))})


def _sanitize(func_name: str, tool: str, unguarded: bool) -> Outcome:
    import buggy_kernels as bk

    import tilelab

    kernel = _compiled(getattr(bk, func_name)(), unguarded=unguarded)

    def call() -> Any:
        report = tilelab.sanitize(kernel, tool=tool)
        if not report.findings:
            return report
        raise _Finding(f"{tool}: {report.findings[0].kind} at line {report.findings[0].line}"
                       + (f" ({report.findings[0].where})" if report.findings[0].where else ""))

    return attempt(call, lambda v, e: {"findings": str(e) if e else ""})


class _Finding(Exception):
    """A sanitizer's first finding, shown as the case's error."""


def _printf() -> Outcome:
    import buggy_kernels as bk
    import torch

    import tilelab

    k = _compiled(bk.printing())
    out = io.StringIO()

    def call() -> Any:
        with contextlib.redirect_stdout(out):
            tilelab.run(k, torch.full((256,), 7.0, device="cuda"))
        line = next((x for x in out.getvalue().splitlines() if "first element" in x), None)
        if line is None:
            raise AssertionError("device printf did not reach this process's stdout")
        return line

    return attempt(call, lambda v, e: {"printed": v or ""})


def _tile_map() -> Outcome:
    import buggy_kernels as bk

    import tilelab

    k = _compiled(bk.half_written())
    return attempt(lambda: tilelab.run(k, ref=lambda a: a),
                   lambda v, e: {"passed": getattr(v, "passed", None),
                                 "last_column": ([row[-1] for row in v.outputs[0].tiles.cells]
                                                 if v is not None else [])})


def _interrupt_sweep() -> Outcome:
    import buggy_kernels as bk

    import tilelab
    from tilelab.launch.sweep import _tasks as sweep_tasks

    calls: list[Any] = []
    real = sweep_tasks.default_bench

    def bench(prepared, size, config, **kw):
        calls.append(config)
        if len(calls) == 3:  # the interrupt arrives while the third configuration is timed
            threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            kw["rep_ms"] = 60_000.0
        return real(prepared, size, config, **kw)

    def call() -> Any:
        table = tilelab.sweep(lambda n, block: bk.copy(n, block), {"block": [64, 128, 256, 512]},
                              {"n": [1 << 20]}, bench_fn=bench, progress=False)
        note = next((n for n in table.notes if "interrupted" in n), "")
        raise _Finding(f"sweep interrupted: {sum(1 for r in table.rows if r.median_ms)} of {len(table.rows)} rows "
                       f"kept; {note}")

    return attempt(call, lambda v, e: {"text": str(e)})


def _timeout_of(factory_name: str) -> Callable[[], Outcome]:
    """A warp-specialised pipeline that deadlocks, from a factory another module provides."""

    def run() -> Outcome:
        import tilelab

        kernel = _resolve(factory_name)()
        return attempt(lambda: tilelab.run(kernel, timeout=5.0))

    return run


def _device_assert(factory: str) -> Callable[[], Outcome]:
    def run() -> Outcome:
        import fault_kernels as fk
        import torch

        import tilelab

        a = torch.rand(4096, device="cuda")
        a[3 * 256 + 17] = -1.0  # one thread of block 3 fails the check
        return attempt(lambda: tilelab.run(getattr(fk, factory)(), a, torch.empty(4096, device="cuda")),
                       lambda v, e: {"fault": e.device_fault.to_dict() if getattr(e, "device_fault", None) else None})

    return run


def _trap() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    a = torch.rand(4096, device="cuda")
    a[100] = -1.0
    return attempt(lambda: tilelab.run(fk.trapping(), a, torch.empty(4096, device="cuda")),
                   lambda v, e: {"fault": e.device_fault.to_dict() if getattr(e, "device_fault", None) else None})


def _nan() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    a = torch.randn(256, 256, device="cuda")
    b = a + 1
    b[200:] = a[200:]
    return attempt(lambda: tilelab.run(fk.divide(), a, b, torch.empty(256, 256, device="cuda")),
                   lambda v, e: {"passed": v.passed, "first": list(v.outputs[0].first_nonfinite or ()),
                                 "notes": list(v.notes)} if v is not None else {})


def _input_written() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    a = torch.arange(1, 4097, dtype=torch.float32, device="cuda")
    return attempt(lambda: tilelab.run(fk.clobber(), a, torch.empty(4096, device="cuda"), ref=lambda x: 2 * x),
                   lambda v, e: ({"written": [s.name for s in v.inputs_written], "passed": v.passed}
                                 if v is not None else {}))


def _out_of_memory() -> Outcome:
    import fault_kernels as fk

    import tilelab

    return attempt(lambda: tilelab.run(fk.rows_copy(), M=1 << 20))  # 2 x 256 GiB of float32


def _tma_refused() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    k = 1001  # rows of 2002 bytes: not a multiple of 16
    return attempt(lambda: tilelab.run(fk.tma_rows(), torch.randn(256, k, dtype=torch.float16, device="cuda"),
                                       torch.empty(256, k, dtype=torch.float16, device="cuda")),
                   lambda v, e: {"rules": list(getattr(e, "tma_rules", ()) or ())})


def _tma_misaligned() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    a = torch.randn(256, 1024, dtype=torch.float16, device="cuda")
    b = torch.empty(256 * 1024 + 1, dtype=torch.float16, device="cuda")[1:].view(256, 1024)  # 2 bytes past 16
    return attempt(lambda: tilelab.run(fk.tma_rows(), a, b))


def _kill_during_bench() -> Outcome:
    import timeline_kernels as tk
    import torch

    import tilelab

    kernel = tk.spin(20_000_000)  # 20 ms a launch: a bench of many launches lasts seconds
    spun = torch.zeros(128, device="cuda")
    tilelab.bench(kernel, spun, rep_ms=50)  # the worker is up and the kernel loaded
    worker = tilelab.launch.default_worker()
    pid = worker.pid

    def kill_once_busy() -> None:
        while worker._lock.acquire(blocking=False):  # a call holds the lock while it runs in the worker
            worker._lock.release()
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)

    def call() -> Any:
        threading.Thread(target=kill_once_busy, daemon=True).start()
        return tilelab.bench(kernel, spun, rep_ms=20000, ci_target=None)

    out = attempt(call)
    after = tilelab.bench(kernel, spun, rep_ms=50)
    out.details = {"median_after": after.median_ms, "new_pid": tilelab.launch.default_worker().pid, "old_pid": pid}
    return out


def _kill_during_sweep() -> Outcome:
    """A sweep whose launch worker is SIGKILLed while one configuration is timed (the same case as
    tests/launch/test_faults_gpu.py's, without its row-cache half)."""
    import fault_kernels as fk

    import tilelab
    from tilelab.launch.sweep import _tasks

    killed: list[int] = []

    def kill_once_busy(worker: Any) -> None:
        while worker._lock.acquire(blocking=False):  # a call holds the lock while it runs in the worker
            worker._lock.release()
            time.sleep(0.01)
        killed.append(worker.pid)
        os.kill(worker.pid, signal.SIGKILL)

    def bench(artifact: Any, size: Any, config: Any, **kw: Any) -> Any:
        kernel = _tasks.load_artifact(artifact)
        if config["block"] == 512 and not killed:
            tilelab.bench(kernel, rep_ms=50)
            threading.Thread(target=kill_once_busy, args=(tilelab.launch.default_worker(),), daemon=True).start()
            kw = {**kw, "rep_ms": 20000, "ci_target": None}
        return tilelab.bench(kernel, **kw)

    def call() -> Any:
        return tilelab.sweep(fk.copy, {"block": [256, 512, 1024]}, {"N": [1 << 20]}, devices=[0], bench_fn=bench,
                             progress=False, finalists=0, force=True)

    out = attempt(call, lambda value, err: {"result": value})
    table = out.details.get("result")
    rows = {dict(r.config)["block"]: r for r in getattr(table, "rows", ())}
    lost = rows.get(512)
    out.shown = f"row block=512: {lost.error}" if lost is not None and lost.error else out.shown
    out.details = {"kept": sorted(b for b, r in rows.items() if r.ok), "lost_error": getattr(lost, "error", None),
                   "killed": killed}
    return out


def _two_processes() -> Outcome:
    code = (f"import json, os, sys, time\nsys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
            "import torch, tilelab\nfrom tilelab.kernels.gemm import matmul\nimport fault_kernels as fk\n"
            "gemm = matmul(1024, 1024, 1024, 128, 128, 32)\nbarrier = sys.argv[1]\n"
            "open(os.path.join(barrier, str(os.getpid())), 'w').close()\n"
            "while len(os.listdir(barrier)) < 2:\n    time.sleep(0.01)\n"
            "passed = [tilelab.run(gemm, ref=torch.matmul).passed for _ in range(5)]\n"
            "passed += [tilelab.run(fk.copy(), ref=lambda x: x).passed for _ in range(5)]\n"
            "print('RESULT ' + json.dumps(passed))\n")

    def call() -> Any:
        import tempfile

        with tempfile.TemporaryDirectory() as barrier:
            procs = [subprocess.Popen([sys.executable, "-c", code, barrier], cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(2)]
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=400)
                lines = [x for x in out.splitlines() if x.startswith("RESULT ")]
                results.append(json.loads(lines[-1][7:]) if lines else err[-500:])
        return results

    return attempt(call, lambda v, e: {"results": v})


def _shared_memory() -> Outcome:
    import fault_kernels as fk
    import torch

    import tilelab

    asked = tilelab.inspect(fk.big_tiles()).kernels[0].dynamic_shared_memory_bytes
    return attempt(lambda: tilelab.run(fk.big_tiles(), ref=torch.matmul), lambda v, e: {"asked": asked})


def _from_elsewhere(name: str) -> Callable[[], Outcome]:
    """A case whose code another module provides: a function returning an :class:`Outcome`."""
    return lambda: _resolve(name)()


def _hang_located(o: Outcome) -> str | None:
    """The timeout names where the warps hung: both roles, the barrier they waited on."""
    return _needs("producer" in o.shown and "consumer" in o.shown and "waiting on" in o.shown,
                  "the timeout does not say where the producer and consumer warps waited")


def _kernel_line(text: str) -> int:
    """The line of tests/fault_kernels.py that holds ``text``: where an error must point."""
    lines = (ROOT / "tests" / "fault_kernels.py").read_text().splitlines()
    (line,) = [n for n, x in enumerate(lines, start=1) if text in x]
    return line


def _located(o: Outcome, kind: str, text: str) -> str | None:
    fault = o.details.get("fault") or {}
    line = _kernel_line(text)
    return _all(_needs(fault.get("kind") == kind, f"no located {kind} on the error"),
                _needs(fault.get("cell_line") == line, f"your line {fault.get('cell_line')}, not {line}"),
                _needs(fault.get("device_line") is not None, "the device line is not named"))


CASES: tuple[Case, ...] = (
    Case("hang", "a kernel that never exits (timeout=3)", _hang,
         lambda o: _all(_needs(o.kind == "timeout", f"kind {o.kind}"), _needs(o.seconds < 3 + 30, "slow"),
                        _recovered(o))),
    Case("illegal_address", "a store far past its buffer", _illegal_address,
         lambda o: _all(_needs(o.kind in ("illegal_address", "launch_failure"), f"kind {o.kind}"),
                        _needs(o.details.get("isolated"), "not marked as isolated"), _recovered(o))),
    Case("memcheck", "compute-sanitizer memcheck on an out-of-bounds store",
         lambda: _sanitize("oob_store", "memcheck", True),
         lambda o: _all(_needs("out-of-bounds write" in o.shown, "no out-of-bounds write found"), _recovered(o)),
         slow=True),
    Case("racecheck", "compute-sanitizer racecheck on a missing barrier",
         lambda: _sanitize("shared_race", "racecheck", False),
         lambda o: _all(_needs("race" in o.shown, "no race found"), _recovered(o)), slow=True),
    Case("printf", "device printf reaches the notebook", _printf,
         lambda o: _all(_needs("7" in o.details.get("printed", ""), "the printed value is missing"), _recovered(o))),
    Case("tile_map", "tiles a kernel never writes", _tile_map,
         lambda o: _all(_needs(o.details.get("last_column") == ["unwritten"] * 4, "the unwritten tiles are not mapped"),
                        _recovered(o))),
    Case("interrupt_sweep", "the stop button during a sweep", _interrupt_sweep,
         lambda o: _all(_needs("interrupted" in o.shown, "no interruption reported"), _recovered(o))),
    Case("ws_wrong_parity", "warp-specialised pipeline: an mbarrier wait on the wrong parity",
         _timeout_of("fault_kernels:wrong_parity"),
         lambda o: _all(_needs(o.kind == "timeout", f"kind {o.kind}"), _hang_located(o), _recovered(o)),
         needs=("fault_kernels:wrong_parity",)),
    Case("ws_fewer_arrivals", "warp-specialised pipeline: fewer arrivals than the barrier expects",
         _timeout_of("fault_kernels:fewer_arrivals"),
         lambda o: _all(_needs(o.kind == "timeout", f"kind {o.kind}"), _hang_located(o), _recovered(o)),
         needs=("fault_kernels:fewer_arrivals",)),
    Case("device_assert", "T.device_assert with a message fails in one thread", _device_assert("asserting"),
         lambda o: _all(_needs(o.kind == "device_assert", f"kind {o.kind}"),
                        _located(o, "assert", '"A must be non-negative")'),
                        _needs("A must be non-negative" in o.shown, "the message is not shown"),
                        _needs("block (3, 0, 0), thread (17, 0, 0)" in o.shown, "the failing thread is not named"),
                        _recovered(o))),
    Case("device_assert_bare", "T.device_assert without a message", _device_assert("asserting_bare"),
         lambda o: _all(_needs(o.kind == "device_assert", f"kind {o.kind}"),
                        _located(o, "assert", "no_stack_info=True"),
                        _needs("block (3, 0, 0), thread (17, 0, 0)" in o.shown, "the failing thread is not named"),
                        _recovered(o))),
    Case("trap", "a kernel that calls __trap()", _trap,
         lambda o: _all(_needs(o.kind in ("launch_failure", "other"), f"kind {o.kind}"),
                        _located(o, "trap", 'T.call_extern("void", "__trap")'),
                        _recovered(o))),
    Case("nan", "NaN in an output (0/0 in the last rows)", _nan,
         lambda o: _all(_needs(o.details.get("first") == [200, 0], f"first non-finite {o.details.get('first')}"),
                        _recovered(o))),
    Case("input_written", "a kernel that writes into its input", _input_written,
         lambda o: _all(_needs(o.details.get("written") == ["A"], f"written {o.details.get('written')}"),
                        _recovered(o))),
    Case("out_of_memory", "inputs too large for the GPU (2 x 256 GiB)", _out_of_memory,
         lambda o: _all(_needs(o.kind == "out_of_memory", f"kind {o.kind}"),
                        _needs("asked for" in o.shown and "free of" in o.shown,
                               "the size or the free memory is missing"),
                        _recovered(o))),
    Case("tma_refused", "a TMA descriptor the launcher refuses (row stride 2002 bytes)", _tma_refused,
         lambda o: _all(_needs(o.kind == "tma_descriptor", f"kind {o.kind}"),
                        _needs(any("global_stride_multiple" in r for r in o.details.get("rules", [])),
                               "the rule is not named"), _recovered(o))),
    Case("tma_misaligned", "an output view 2 bytes past a 16-byte boundary, stored by TMA", _tma_misaligned,
         lambda o: _all(_needs(o.shown.startswith("MisalignedTensorError") and "16-byte" in o.shown,
                               "the alignment rule is not named"), _recovered(o))),
    Case("kill_bench", "the worker killed (SIGKILL) during a bench", _kill_during_bench,
         lambda o: _all(_needs("worker" in o.shown.lower(), "no worker error"),
                        _needs((o.details.get("median_after") or 0) > 0, "the next bench did not measure"),
                        _recovered(o))),
    Case("kill_sweep", "the worker killed (SIGKILL) during a sweep", _kill_during_sweep,
         lambda o: _all(_needs(o.details.get("kept") == [256, 1024], f"rows kept {o.details.get('kept')}"),
                        _needs("killed by SIGKILL" in (o.details.get("lost_error") or ""),
                               "the lost row does not say the worker was killed"), _recovered(o))),
    Case("two_processes", "two notebooks launching on one GPU at once", _two_processes,
         lambda o: _all(_needs(o.details.get("results") == [[True] * 10] * 2, f"results {o.details.get('results')}"),
                        _recovered(o))),
    Case("shared_memory", "a block asking for more shared memory than the GPU has", _shared_memory,
         lambda o: _all(_needs("shared memory" in o.shown and str(o.details.get("asked")) in o.shown,
                               "the limit or the value is not named"), _recovered(o))),
)


def run_case(case: Case) -> Outcome:
    """Run ``case`` here (not available: an outcome that says so); its expectation is checked."""
    absent = missing(case)
    if absent:
        return Outcome(f"not available ({', '.join(absent)} not found)", None, 0.0, None, available=False)
    try:
        outcome = case.run()
    except BaseException as err:  # a broken case is a row of the table, not the end of it
        return Outcome(f"the case itself failed: {type(err).__name__}: {err}", None, 0.0, None,
                       problem=f"the case raised {type(err).__name__}: {err}")
    try:
        outcome.problem = case.expect(outcome)
    except Exception as err:
        outcome.problem = f"the expectation raised {type(err).__name__}: {err}"
    return outcome


def main(argv: list[str]) -> int:
    """``python tests/fault_catalogue.py [--all] [ids...]``: one ``CASE <json>`` line per case."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    every = "--all" in argv
    wanted = [a for a in argv if not a.startswith("--")]
    for case in CASES:
        if (wanted and case.id not in wanted) or (case.slow and not every and case.id not in wanted):
            continue
        outcome = run_case(case)
        print("CASE " + json.dumps({"id": case.id, **outcome.to_dict()}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
