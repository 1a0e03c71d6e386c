"""How many of TileLang's example kernels run on the CPU (``tilelab.run(kernel, device="cpu")``).

    git clone https://github.com/tile-ai/tilelang /tmp/tilelang-src
    git -C /tmp/tilelang-src archive COMMIT examples | tar -x -C /tmp/tilelang-examples
    .venv/bin/python benchmarks/emulation_coverage.py /tmp/tilelang-examples/examples [--jobs 2] [--json rows.json]
        [--save-ir DIR] [--half first|second|all] [--only GLOB]

Every script runs in its own process as ``__main__`` with its own sizes, CUDA tensors redirected
to the CPU and every compile intercepted before the device compiler (tilelab's corpus machinery,
``tilelab.engine.corpus``). Each kernel TileLang lowers for sm_90a is then run on the CPU, two of its
blocks (the first and the last of its grid), at the example's own sizes: on the tensors the
script passes when it calls the kernel, else on random inputs built from the signature (each
dynamic size ``DYNAMIC_SIZE``). Outputs:
the kernel's ``out_idx``, else the tensors it writes. Each kernel's row says:

- ``runs``: the CPU run finished; its note says whether the two blocks wrote elements of every
  output and whether all they wrote is finite (no reference: the example's own check needs every
  block);
- ``refused``: a construct with no meaning on the CPU, named (an mbarrier, hand-written warp
  specialisation, hand-written PTX, a barrier only some threads reach, ...);
- ``fails``: anything else, with its reason (grouped by class in the totals).

Kernels TileLang itself cannot lower for sm_90a, and kernels of other targets (sm_100 folders,
AMD), are listed but not counted. The running share is printed for all kernels and for the two
halves of the example folders: the top-level folders of ``examples/`` sorted by name and dealt
alternately (1st, 3rd, 5th... form the first half; 2nd, 4th... the second), scripts at the top
level counting as the folder ``.``. Failure classes were fixed by looking at the first half only;
the second half is the held-out measure. ``--save-ir DIR`` writes each kernel that lowers as
TileLang's IR text (``NAME.tir.json``) with what its run used (``NAME.json``): the input of
``benchmarks/emulation_agreement.py``.

``--tests``: a second held-out set, TileLang's own test suite, from which no rule of the CPU path
was built:

    git -C /tmp/tilelang-src archive COMMIT testing | tar -x -C /tmp/tilelang-testing
    .venv/bin/python benchmarks/emulation_coverage.py --tests /tmp/tilelang-testing/testing --json rows.json
        [--half first|second|all] [--only GLOB]

It takes the test files (``test_*.py``) of ``testing/python``'s folders that build CUDA kernels
(``TEST_FOLDERS``: kernel, issue, language, cuda, math, fastmath, quantize, tilelibrary; ``--only
GLOB`` takes any others, relative to ``testing/python``). Each file runs in its own process as a
module, its ``test*`` functions (and ``Test*`` classes' methods) called in file order, each at its
first parameter set (``pytest.mark.parametrize``); a test needing a pytest fixture is not run, and
a test whose marks require another GPU (``requires_cuda_compute_version_le(8, 9)``, ROCm, Metal)
or a file named for one (``..._sm75_...``, ``tcgen5``) is listed as another target. Compiles are
intercepted as above. Which kernels count:

- a test's first kernel not already built in the file counts; its later ones do not (a test
  usually builds one program at several sizes or dtypes), nor do a file's past the first
  ``MAX_KERNELS`` (both listed as ``left_out``);
- the kernel runs on the CPU (two blocks) when the test first calls it, on the test's tensors;
  a kernel the test never calls (it reads the generated source) runs after the test on random
  inputs, each dynamic size ``DYNAMIC_SIZE`` and each scalar 1;
- identical kernels (the same PrimFunc by TVM's structural hash, the same outputs) count once,
  in the first file in path order: later ones are ``duplicate`` rows;
- a file whose process dies in a kernel's CPU run (a crash of the compiled kernel) records that
  kernel as failing and goes on from the next test in a new process (``MAX_RESTARTS``).

The verdicts are the same as the examples'; the totals are printed for all and per folder.
``--half`` splits this set too, by file: the paths (relative to ``testing/python``) of the test files
of ``TEST_FOLDERS`` sorted by name and dealt alternately (1st, 3rd, ... the first half; 2nd, 4th, ...
the second). Rules of the CPU path built from this set's failures were built from the first half's
only; the second half is their held-out measure. ``--only`` narrows within the chosen half (the
halves are always dealt from the whole set, so a file's half does not depend on ``--only``).

``--users DEST``: a third held-out set, from which no rule of the CPU path was built: CUDA kernels
written by TileLang's users in public repositories (tutorials, courses, benchmarks, model code),
listed with their commits in ``benchmarks/user_kernels.json``:

    .venv/bin/python benchmarks/fetch_user_kernels.py /tmp/user-kernels     # git clone each repository at its commit
    .venv/bin/python benchmarks/emulation_coverage.py --users /tmp/user-kernels --jobs 1 --json rows.json
        [--timeout S] [--only 'OWNER__NAME/GLOB']

Every script of the manifest runs in its own process, from its own folder, with no command-line
arguments, its own imports resolving as they do once its project is installed (``import_roots``:
the folders holding a ``pyproject.toml``/``setup.py`` from the script's up to the repository's top,
and their ``src/``): a pytest file (``test_*.py``) as a test module (its tests called in file order
at their first parameter set, with the fixtures of the file and its ``conftest.py`` files,
``tmp_path`` and ``monkeypatch``), any other as ``__main__``. Compiles are intercepted and kernels
run on the CPU (two blocks) as in the examples mode, on the script's tensors when it calls the
kernel, else on random inputs (each dynamic size ``DYNAMIC_SIZE``); a kernel the script only lowers
(``tilelang.lower``) or inspects (``get_tir``) counts too; its tensors answer ``is_cuda`` as a
GPU's would, and a stand-in kernel has a compiled one's ``params``. Every distinct kernel a script
builds counts, up to ``MAX_USER_KERNELS`` a script (an autotuning script builds many of one kind;
the rest are listed as ``left_out``); a kernel built by
several scripts (the same PrimFunc, the same outputs) counts once, in the first. A script stuck in
its own computation (a reference at its GPU sizes, on the CPU) for ``WATCH_S`` after its last kernel
is ended, its kernels built but not yet called run first; ``--timeout`` ends any script (a kernel it
had lowered but not run is listed as ``not run``, not counted; a CPU run it cut short counts as
failing). The whole set is held out: no halves. The totals are printed for all and per repository;
``--users DEST --table ROWS...`` prints them again from saved rows (a later file's rows replace an
earlier one's for a script; scripts the manifest no longer lists are dropped).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS, REFUSED, FAILS, NOT_LOWERED, OTHER_TARGET = "runs", "refused", "fails", "TileLang cannot lower", "other target"
ARCH = "sm_90a"
GRACE_S = 5.0  # a script that builds no new kernel (and calls none) for this long is ended
MAX_KERNELS = 4  # distinct kernels per script (autotuning scripts build many of one kind)
# --tests: the folders of TileLang's testing/python whose test files build CUDA kernels (the rest
# test TileLang's JIT back ends, autotuner, caches, passes and analyses, or other targets)
TEST_FOLDERS = ("kernel", "issue", "language", "cuda", "math", "fastmath", "quantize", "tilelibrary")
NOT_CUDA_FOLDERS = ("cpu", "webgpu", "llvm", "metal", "amd")
DUPLICATE = "duplicate"
MAX_RESTARTS = 3  # --tests: a file whose process dies in one kernel goes on after that test, at most this often
DYNAMIC_SIZE = 1024  # a dynamic size of a kernel the script never called (random inputs), in every mode
LOWERING_ONLY = "lowering only"  # --users: a CompileRequest made from the script's tilelang.lower or get_tir
WATCH_S = 4 * GRACE_S  # --users: a script stuck this long in its own computation after its last kernel is ended
NOT_RUN = "not run"  # --users: lowered, but the script's time ran out before its CPU run (not counted)
MAX_USER_KERNELS = 16  # --users: distinct kernels counted per script (an autotuning script builds many of one kind)
USERS_MANIFEST = "user_kernels.json"  # --users: written into DEST by benchmarks/fetch_user_kernels.py


# ---------------------------------------------------------------------------------------------
# The halves


def folder_of(rel: str) -> str:
    parts = Path(rel).parts
    return parts[0] if len(parts) > 1 else "."


def half_of(folder: str, folders: list[str]) -> str:
    """"first" or "second": the folders sorted by name, dealt alternately."""
    return "first" if sorted(folders).index(folder) % 2 == 0 else "second"


# ---------------------------------------------------------------------------------------------
# The worker: one script in its own process


class _Stop(BaseException):
    pass


def test_file_half(rel: str, files: list[str]) -> str:
    """--tests: "first" or "second": the test files' paths sorted by name, dealt alternately."""
    return "first" if sorted(files).index(rel) % 2 == 0 else "second"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:120]


class Worker:
    def __init__(self, script: Path, rel: str, out: Path, ir_dir: Path | None, tests: bool = False,
                 users: bool = False, paths: tuple[str, ...] = ()) -> None:
        self.script, self.rel, self.out, self.ir_dir = script, rel, out, ir_dir
        self.tests = tests  # a pytest file: its test functions build the kernels
        self.users = users  # --users: every distinct kernel counts (up to MAX_USER_KERNELS), in tests too
        self.paths = paths  # import roots of the script's repository (its top folder, its src/)
        self.marked = tests or users  # rows carry the kernel's fingerprint (duplicates across files)
        self.by_fingerprint: dict[str, Any] = {}  # --users: the first stand-in of each PrimFunc
        self.inside = 0  # --users: >0 while TileLang's own compile (or tilelab) runs: not the script's lowering
        self.lock = threading.Lock()  # the pending kernels, between the script's thread and the watchdog
        self.finished = False  # the script has ended (or the watchdog ended it): no more CPU runs from it
        self.last_activity = time.monotonic()
        self.seen: dict[str, Any] = {}
        self.pending: list[Any] = []  # kernels captured, not yet run
        self.count = 0
        self.test: str | None = None  # the test function running (a pytest file)
        self.test_took = False  # whether it has built its counted kernel
        self.left_out = 0  # distinct kernels built past the cap (or a test's second and later ones)
        self.after = ""  # a test file started again: the tests up to this one have run

    def emit(self, row: dict[str, Any]) -> None:
        if self.test and "done" not in row:
            row = {"test": self.test, **row}
        with self.out.open("a") as f:
            f.write(json.dumps(row) + "\n")

    # the compile interception
    def on_compile(self, request: Any) -> Any:
        signal.alarm(0)
        self.inside += 1
        try:
            return self._capture(request)
        finally:
            self.inside -= 1
            self.last_activity = time.monotonic()
            signal.alarm(int(GRACE_S))

    def _capture(self, request: Any) -> Any:
        from tilelab import _tilelang
        from tilelab.engine import corpus as _corpus
        from tilelab.records.errors import LoweringError

        func = request.prim_func
        fingerprint = _tilelang.kernel_fingerprint(func)
        key = f"{fingerprint}|{request.out_idx}"
        if key in self.seen:
            return self.seen[key]
        outer = self
        first = self.by_fingerprint.get(fingerprint) if self.users else None

        class Captured(_corpus.StandInKernel):
            ran = False

            def __getattr__(self, name: str) -> Any:
                if name == "params" and outer.users:  # a script that builds its inputs from the signature
                    return _kernel_params(self.prim_func)
                return super().__getattr__(name)

            def __call__(self, *args: Any, **kwargs: Any) -> Any:
                with outer.lock:
                    mine = not self.ran and self in outer.pending and not outer.finished
                    if mine:
                        self.ran = True
                        outer.pending.remove(self)
                        outer.inside += 1  # the watchdog leaves a CPU run alone
                if mine:
                    signal.alarm(0)
                    try:
                        outer.emulate(self, list(args))
                    finally:
                        outer.inside -= 1
                        signal.alarm(int(GRACE_S))
                return self._outputs(args)

        stand_in = Captured(request)
        stand_in.name = _corpus._kernel_name(func)
        stand_in.ran = True
        self.seen[key] = stand_in
        if first is not None:  # --users: a kernel the script lowered or inspected (get_tir), now compiled
            if first in self.pending and getattr(first, "lowering_only", False):
                self.pending.remove(first)  # the compiled one runs instead, on the script's tensors if it calls it
                stand_in.fingerprint, stand_in.ran = first.fingerprint, False
                self.pending.append(stand_in)
            return stand_in
        if self.users:
            self.by_fingerprint[fingerprint] = stand_in
            stand_in.lowering_only = request.execution_backend == LOWERING_ONLY
        if self.tests and not self.users and self.test_took:  # a test counts its first new kernel only
            self.left_out += 1
            return stand_in
        self.count += 1
        if self.count > (MAX_USER_KERNELS if self.users else MAX_KERNELS):
            self.left_out += 1
            return stand_in
        self.test_took = True
        if self.marked:
            self.emit({"progress": stand_in.name, "stage": "lowering", "fingerprint": key})  # a lowering cut short
        stand_in.fingerprint = key
        mark = {"fingerprint": key} if self.marked else {}
        arch = _corpus._arch_for(self.script, request.target, ARCH)
        if arch is None or arch != ARCH or _corpus._needs_blackwell(func, _tilelang):
            self.emit({"kernel": stand_in.name, "verdict": OTHER_TARGET, "reason": f"written for {arch or 'non-CUDA'}",
                       **mark})
            return stand_in
        configs = _tilelang.normalize_pass_configs(request.pass_configs)
        try:
            _tilelang.tilelang_lower(func, ARCH, out_idx=request.out_idx, pass_configs=configs)
        except LoweringError as err:
            self.emit({"kernel": stand_in.name, "verdict": NOT_LOWERED, "reason": _corpus._tilelang_reason(err),
                       **mark})
            return stand_in
        except Exception as err:
            self.emit({"kernel": stand_in.name, "verdict": NOT_LOWERED, "reason": f"{type(err).__name__}: {err}"[:300],
                       **mark})
            return stand_in
        stand_in.ran = False
        if self.users:  # lowered: a process that ends before its CPU run says so
            self.emit({"progress": stand_in.name, "stage": "lowered", "fingerprint": key})
        self.pending.append(stand_in)
        return stand_in

    def emulate(self, kernel: Any, args: list[Any] | None) -> None:
        """Run ``kernel`` on the CPU (two blocks) on the script's ``args`` (None: built inputs)."""

        self.inside += 1  # tilelab's own lowering and compile are not the script's
        try:
            self._emulate(kernel, args)
        finally:
            self.inside -= 1
            self.last_activity = time.monotonic()

    def _emulate(self, kernel: Any, args: list[Any] | None) -> None:
        import tilelab
        from tilelab import _tilelang

        func, name = kernel.prim_func, kernel.name
        out_idx = kernel.out_idx or _tilelang.resolve_kernel(func).out_idx or None
        outputs = None if out_idx else (list(_tilelang.written_tensors(func)) or None)
        mark = {"fingerprint": kernel.fingerprint} if self.marked else {}
        self.emit({"progress": name, **mark})  # so a run cut short by the timeout says which kernel it was in
        row: dict[str, Any] = {"kernel": name, "inputs": "script" if args is not None else "random", **mark}
        sizes: dict[str, int] = {}
        try:
            sizes = _sizes(func, out_idx, args or [], fill=DYNAMIC_SIZE if args is None else None)
            grid = _grid(func, name, sizes)
        except Exception as err:
            grid = (1, 1, 1)
            row["grid_error"] = f"{type(err).__name__}: {err}"[:200]
        last = grid[0] * grid[1] * grid[2] - 1
        blocks = sorted({0, last}) if last >= 0 else None  # a grid of no block: nothing to select
        row.update(grid=list(grid), blocks=blocks, sizes=sizes)
        if args is not None and any(not _is_tensor(a) and not isinstance(a, (int, float)) for a in args):
            args = None  # the script passes something run does not take (a stream, None): build inputs
            row["inputs"] = "random"
        saved = self._save_ir(func, name, out_idx, outputs, {**row, "verdict": "did not finish"})
        start = time.perf_counter()
        try:
            kw = {} if args is not None else dict(sizes)
            with _tilelang.compiles_not_intercepted():  # the CPU run's own compile is not the script's
                result = tilelab.run(func, *(args or []), device="cpu", blocks=blocks, out_idx=out_idx,
                                     outputs=outputs, isolate=False, seed=0, **kw)
            row.update(verdict=RUNS, reason=_run_note(result))
        except Exception as err:
            row.update(_failure(err))
        row["seconds"] = round(time.perf_counter() - start, 2)
        if saved is not None:
            meta = {"script": self.rel, "kernel": name, "out_idx": out_idx, "outputs": outputs, **row}
            saved.write_text(json.dumps(meta, indent=1))
        self.emit(row)

    def _save_ir(self, func: Any, name: str, out_idx: Any, outputs: Any, row: dict[str, Any]) -> Path | None:
        """With ``--save-ir``: the kernel's IR and what its run uses, written before the run (so that a
        run cut short by the timeout leaves them too); the path of the run's file, rewritten after it."""
        from tilelab import _tilelang

        if self.ir_dir is None:
            return None
        stem = _slug(f"{self.rel[:-3]}__{name}")
        path = self.ir_dir / f"{stem}.tir.json"
        n = 1
        while path.exists():
            n += 1
            path = self.ir_dir / f"{stem}_{n}.tir.json"
        path.write_text(_tilelang.kernel_ir_to_text(func))
        meta = {"script": self.rel, "kernel": name, "out_idx": out_idx, "outputs": outputs, **row}
        saved = path.with_name(path.name[:-len(".tir.json")] + ".json")
        saved.write_text(json.dumps(meta, indent=1))
        return saved

    def run(self) -> None:
        import runpy

        from tilelab import _tilelang
        from tilelab.engine import corpus as _corpus

        def stop(signum: int, frame: Any) -> None:
            raise _Stop(f"no new kernel within {GRACE_S:.0f} s of the last one")

        signal.signal(signal.SIGALRM, stop)
        if self.users:
            threading.Thread(target=self.watch, daemon=True).start()
        outcome = "finished"
        sys.argv = [str(self.script)]  # a script that parses its command line runs with none
        for path in reversed(self.paths):  # --users: the repository's own imports (`from tests.x import`, src/)
            sys.path.insert(0, path)
        sys.path.insert(0, str(self.script.parent))
        os.chdir(self.script.parent)
        try:
            lowerings = self.lowerings_intercepted() if self.users else contextlib.nullcontext()
            with _corpus._cpu_everywhere(ARCH), _tilelang.intercept_compiles(self.on_compile), lowerings:
                if self.tests:
                    with self.jit_kernels_intercepted():
                        namespace = runpy.run_path(str(self.script), run_name=_corpus._TEST_MODULE)
                        outcome = self.run_tests(namespace)
                else:
                    runpy.run_path(str(self.script), run_name="__main__")
        except _Stop as err:
            outcome = f"stopped: {err}"
        except SystemExit as err:
            outcome = f"exited ({err.code})"
        except BaseException as err:
            outcome = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err).strip() else ''}"
        finally:
            signal.alarm(0)
        self.run_pending()
        with self.lock:
            if self.finished and self.users:
                return  # the watchdog ended the script and reports
            self.finished = True
        self.emit({"done": outcome, "captured": self.count, "left_out": self.left_out})

    def watch(self) -> None:
        """--users: SIGALRM ends a script that builds no kernel for ``GRACE_S``, but only between
        Python bytecodes: a script stuck in one long torch operation on huge CPU tensors (a
        reference GEMM at its GPU sizes) would hold on to the kernels it built but has not called
        yet. After ``WATCH_S`` of that, this thread runs them (random inputs) and ends the
        process: the kernels the script reached are recorded, whatever its own computation does."""
        while True:
            time.sleep(0.5)
            with self.lock:
                if self.finished:
                    return
                stuck = (self.count and not self.inside and time.monotonic() - self.last_activity > WATCH_S)
                if stuck:
                    self.finished = True  # the script's thread runs no more kernels
            if stuck:
                break
        self.run_pending(force=True)
        self.emit({"done": f"stopped: its own computation ran past {WATCH_S:.0f} s after its last kernel",
                   "captured": self.count, "left_out": self.left_out})
        os._exit(0)

    @contextlib.contextmanager
    def jit_kernels_intercepted(self) -> Any:
        """``tilelang.JITKernel(func, ...)`` built directly (a few tests do) is a compile too."""
        import tilelang

        from tilelab._tilelang.capture import CompileRequest

        def jit_kernel(func: Any = None, out_idx: Any = None, execution_backend: Any = None, target: Any = "auto",
                       *args: Any, pass_configs: Any = None, **kwargs: Any) -> Any:
            out = [out_idx] if isinstance(out_idx, int) else (list(out_idx) if out_idx is not None else None)
            return self.on_compile(CompileRequest(func, out, dict(pass_configs or {}), target, execution_backend))

        saved = tilelang.JITKernel
        tilelang.JITKernel = jit_kernel
        try:
            yield
        finally:
            tilelang.JITKernel = saved

    @contextlib.contextmanager
    def lowerings_intercepted(self) -> Any:
        """--users: a kernel a script only lowers (``tilelang.lower``) or inspects (``get_tir`` of a
        ``@tilelang.jit`` function) is one of its kernels too: captured as a compile would be (it
        runs on random inputs unless the script later compiles and calls it). ``tilelang.lower``
        then goes on for the GPU stood in for (target ``cuda`` as ``sm_90a``), so the script
        continues; TileLang's own compiles (which call get_tir) and tilelab's are not captured. A
        tensor answers ``is_cuda`` as the GPU's would to the script (its CUDA tensors live on the CPU
        here), not to TileLang or tilelab."""
        import tilelang
        import torch
        from tilelang.jit import JITImpl

        from tilelab._tilelang.capture import CompileRequest

        saved_lower, saved_get_tir = tilelang.lower, JITImpl.get_tir
        saved_compile, saved_par = JITImpl.compile, JITImpl.par_compile
        outer = self

        def captured(func: Any, out_idx: Any, configs: Any, target: Any) -> None:
            if outer.inside or not (hasattr(func, "buffer_map") and hasattr(func, "body")):
                return
            out = [out_idx] if isinstance(out_idx, int) else (list(out_idx) if out_idx is not None else None)
            outer.inside += 1
            try:
                outer.on_compile(CompileRequest(func, out, dict(configs or {}), target, LOWERING_ONLY))
            finally:
                outer.inside -= 1

        def lower(func_or_mod: Any, target: Any = "auto", *args: Any, **kwargs: Any) -> Any:
            captured(func_or_mod, None, None, target)
            if target is None or (isinstance(target, str) and target.strip() in ("auto", "cuda")):
                target = {"kind": "cuda", "arch": ARCH}
            outer.inside += 1
            try:
                with tilelang.tvm.target.Target(target) as resolved:  # TileLang's passes read the current target
                    return saved_lower(func_or_mod, resolved, *args, **kwargs)
            finally:
                outer.inside -= 1

        def get_tir(jit: Any, *args: Any, **kwargs: Any) -> Any:
            func = saved_get_tir(jit, *args, **kwargs)
            captured(func, getattr(jit, "out_idx", None), getattr(jit, "pass_configs", None),
                     getattr(jit, "target", None))
            return func

        def inside(method: Any) -> Any:
            def call(jit: Any, *args: Any, **kwargs: Any) -> Any:
                outer.inside += 1
                try:
                    return method(jit, *args, **kwargs)
                finally:
                    outer.inside -= 1
            return call

        saved_is_cuda = torch.Tensor.__dict__.get("is_cuda")
        torch.Tensor.is_cuda = property(  # type: ignore[method-assign,assignment]
            lambda t: (outer.inside == 0 and t.device.type == "cpu") or t.device.type == "cuda")
        tilelang.lower, JITImpl.get_tir = lower, get_tir  # type: ignore[method-assign]
        JITImpl.compile, JITImpl.par_compile = inside(saved_compile), inside(saved_par)  # type: ignore[method-assign]
        try:
            yield
        finally:
            tilelang.lower, JITImpl.get_tir = saved_lower, saved_get_tir  # type: ignore[method-assign]
            JITImpl.compile, JITImpl.par_compile = saved_compile, saved_par  # type: ignore[method-assign]
            if saved_is_cuda is None:
                del torch.Tensor.is_cuda
            else:
                torch.Tensor.is_cuda = saved_is_cuda  # type: ignore[method-assign]

    def run_pending(self, force: bool = False) -> None:
        """The kernels the script (or test) built and never called, on random inputs; ``force``: the
        watchdog's run, after the script's thread was stopped from running any."""
        while True:
            with self.lock:
                if not self.pending or (self.finished and not force):
                    return
                kernel = self.pending.pop(0)
            self.emulate(kernel, None)

    def run_tests(self, namespace: dict[str, Any]) -> str:
        """Each test function of a pytest module in file order, at its first parameter set; a
        test's own failure (its assert on the stand-in's zeros, a skip) ends that test only. The
        kernels a test built but never called run (random inputs) before the next test starts."""
        from tilelab import _tilelang
        from tilelab.engine import corpus as _corpus

        ran = needs_fixture = elsewhere = 0
        tests = _corpus.module_tests(namespace, _corpus._TEST_MODULE)
        fixtures = Fixtures(namespace, self.script, Path(self.paths[0]) if self.paths else None) if self.users else None
        if self.after:
            names = [name for name, _ in tests]
            tests = tests[names.index(self.after) + 1:] if self.after in names else []
        for name, test in tests:
            sets = _corpus.param_sets(test, limit=1)
            if sets is None and fixtures is not None:  # --users: the repository's own fixtures (conftest.py)
                sets = fixtures.kwargs_for(test, _corpus.param_sets(test, limit=1, fixtures=True))
            if sets is None:
                needs_fixture += 1
                continue
            self.test, self.test_took = name, False
            target = _test_target(test)
            if target:
                elsewhere += 1
                self.emit({"kernel": "-", "verdict": OTHER_TARGET, "reason": target})
                self.test = None
                continue
            ran += 1
            signal.alarm(int(3 * GRACE_S))  # a test that builds no kernel for a while is ended
            self.last_activity = time.monotonic()
            try:
                with _tilelang.tilelang_errors(name):
                    test(**sets[0])
            except (_Stop, Exception, SystemExit):
                pass
            except BaseException as err:  # pytest.skip/fail raise outcomes that are not Exceptions
                if isinstance(err, KeyboardInterrupt):
                    raise
            finally:
                signal.alarm(0)
            self.run_pending()
            self.test = None
        return (f"ran {ran} test(s)" + (f"; {elsewhere} for another target" if elsewhere else "")
                + (f"; {needs_fixture} need pytest fixtures (not run)" if needs_fixture else ""))


class Fixtures:
    """--users: the pytest fixtures a test file's tests ask for, taken from the file itself and the
    ``conftest.py`` files of its folder and the folders above it up to the repository's top, plus
    ``tmp_path`` and ``monkeypatch``. A fixture runs once per file (its scope is not kept apart), a
    generator fixture up to its ``yield`` (no teardown), a parametrized one at its first value."""

    def __init__(self, namespace: dict[str, Any], script: Path, top: Path | None) -> None:
        import runpy

        self.defs: dict[str, Any] = {}
        folders = []
        folder = script.parent
        while top is not None and (folder == top or top in folder.parents):
            folders.append(folder)
            folder = folder.parent
        for folder in reversed(folders):  # the nearest conftest.py wins
            conftest = folder / "conftest.py"
            if conftest.is_file():
                try:
                    self._collect(runpy.run_path(str(conftest), run_name="conftest"))
                except Exception:
                    pass
        self._collect(namespace)
        self.values: dict[str, Any] = {}

    def _collect(self, namespace: dict[str, Any]) -> None:
        for value in list(namespace.values()):
            if hasattr(value, "_get_wrapped_function") and hasattr(value, "_fixture_function_marker"):
                marker = value._fixture_function_marker
                self.defs[marker.name or value.name] = value

    def value(self, name: str, seen: tuple[str, ...] = ()) -> Any:
        import inspect as pyinspect
        import types

        if name in self.values:
            return self.values[name]
        if name == "tmp_path":
            self.values[name] = Path(tempfile.mkdtemp(prefix="tilelab-emucov-"))
        elif name == "monkeypatch":
            import pytest

            self.values[name] = pytest.MonkeyPatch()
        elif name in self.defs and name not in seen:
            fixture = self.defs[name]
            func = fixture._get_wrapped_function()
            marker = fixture._fixture_function_marker
            kwargs = {}
            for p in pyinspect.signature(func).parameters.values():
                if p.name == "request":
                    kwargs["request"] = types.SimpleNamespace(param=(marker.params or [None])[0], node=None,
                                                              config=None, getfixturevalue=self.value)
                elif p.default is p.empty:
                    kwargs[p.name] = self.value(p.name, seen + (name,))
            result = func(**kwargs)
            self.values[name] = next(result) if pyinspect.isgenerator(result) else result
        else:
            raise LookupError(name)
        return self.values[name]

    def kwargs_for(self, test: Any, given: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """The test's first parameter set with its fixtures filled in; None if one is not to be had."""
        import inspect as pyinspect

        kwargs = dict((given or [{}])[0])
        try:
            params = pyinspect.signature(test).parameters.values()
        except (TypeError, ValueError):
            return None
        for p in params:
            if p.name in kwargs or p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.default is not p.empty:
                continue
            try:
                kwargs[p.name] = self.value(p.name)
            except Exception:
                return None
        return [kwargs]


_COMPUTE_MARK = re.compile(r"Requires CUDA compute (ge|gt|le|lt|eq) (\d+)\.(\d+)")
_FOREIGN_MARK = re.compile(r"\b(ROCm|rocm|HIP|hip|Metal|metal|CDNA|cdna|gfx\d+|Ascend|ascend|WebGPU)\b")


def _test_target(test: Any) -> str | None:
    """Why a test is written for another target than sm_90a, read from its skip marks
    (``tilelang.testing.requires_cuda_compute_version_*``, ``requires_rocm``...); None if it is not."""
    import operator

    compare = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt, "eq": operator.eq}
    have = tuple(int(d) for d in re.findall(r"\d", ARCH)[:2])
    for mark in getattr(test, "pytestmark", []) or []:
        name = getattr(mark, "name", "")
        if name in ("rocm", "metal", "webgpu"):
            return f"the test is marked {name}"
        reason = str(getattr(mark, "kwargs", {}).get("reason", "")) if name == "skipif" else ""
        found = _COMPUTE_MARK.search(reason)
        if found and not compare[found.group(1)](have, (int(found.group(2)), int(found.group(3)))):
            return f"the test {reason[0].lower() + reason[1:].split(', but')[0]}"
        foreign = _FOREIGN_MARK.search(reason)
        if foreign and "cuda" not in reason.lower():  # "Requires CUDA or CDNA ROCm target" is CUDA's too
            return f"the test is marked for {foreign.group(1)}"
    return None


def _kernel_params(func: Any) -> list[Any]:
    """--users: what a compiled kernel's ``params`` holds (TileLang's KernelParam of each argument,
    outputs included), for the scripts that make their inputs from it."""
    from tilelang.engine.param import KernelParam

    return [KernelParam.from_buffer(func.buffer_map[p]) if p in func.buffer_map else KernelParam.from_var(p)
            for p in func.params]


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "data_ptr") and hasattr(value, "shape")


def _sizes(func: Any, out_idx: list[int] | None, args: list[Any], fill: int | None = None) -> dict[str, int]:
    """The kernel's dynamic sizes bound from the tensors (and scalars) the script passed; with
    ``fill`` (random inputs), every size of a tensor's shape is ``fill`` and every scalar 1."""
    from tilelab import _tilelang

    source = _tilelang.resolve_kernel(func)
    sizes: dict[str, int] = {}
    if fill is not None:
        for arg in _tilelang.arguments(source, out_idx):
            if arg.kind == "scalar":  # an offset, a count, a scale: 1 (never a division by zero)
                sizes.setdefault(arg.name, 1 if "int" in str(arg.dtype) else 1.0)  # type: ignore[arg-type]
            for dim in arg.shape or ():
                for name in re.findall(r"[A-Za-z_]\w*", str(dim)):
                    if name not in ("T", "int32", "int64", "min", "max"):
                        sizes.setdefault(name, fill)
        return sizes
    params = [a for a in _tilelang.arguments(source, out_idx) if not a.is_output or not out_idx]
    for arg, value in zip(params, args):
        if _is_tensor(value):
            for dim, size in zip(arg.shape, value.shape):
                if isinstance(dim, str) and dim.isidentifier():
                    sizes.setdefault(dim, int(size))
        elif isinstance(value, int) and arg.kind == "scalar":
            sizes.setdefault(arg.name, int(value))
    return sizes


def _grid(func: Any, name: str, sizes: dict[str, int]) -> tuple[int, int, int]:
    from tilelab._tilelang import emulate

    emulation = emulate.rewrite_for_cpu(func, name, mask=False)
    return emulate.emulated_grid(emulation, sizes)


def _run_note(result: Any) -> str:
    wrote = [int(m.group(1)) for n in result.notes for m in [re.search(r"they wrote (\d+) of", n)] if m]
    nothing = sum("wrote no element" in n for n in result.notes)
    nonfinite = sum(o.nonfinite for o in result.outputs)
    parts = [f"wrote {sum(wrote)} elements of {len(result.outputs)} output(s)"]
    if nothing:
        parts.append(f"{nothing} output(s) not written by these blocks")
    parts.append(f"{nonfinite} non-finite" if nonfinite else "all finite")
    return "; ".join(parts)


def _failure(err: BaseException) -> dict[str, Any]:
    from tilelab.launch._emulate import EmulationError

    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    if isinstance(err, EmulationError) and "has no meaning at the level of tiles" in text:
        found = re.match(r"^\S+: (.*?)(?: \(line \d+: .*?\))? has no meaning", first)
        return {"verdict": REFUSED, "construct": found.group(1) if found else first[:80], "reason": first[:300]}
    return {"verdict": FAILS, "cls": failure_class(err, first), "reason": f"{type(err).__name__}: {first[:300]}"}


def failure_class(err: BaseException, first: str) -> str:
    """A failure's class for the totals: the error type and its message with names and numbers
    taken out."""
    text = re.sub(r"\b\d+\b", "N", first)
    text = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "X", text)
    text = re.sub(r"^\w+: ", "", text) if ": " in text[:60] else text
    return f"{type(err).__name__}: {text[:90]}"


def worker_main(argv: list[str]) -> int:
    script, rel, out = Path(argv[0]).resolve(), argv[1], Path(argv[2]).resolve()
    ir_dir = Path(argv[3]).resolve() if len(argv) > 3 and argv[3] != "-" else None
    options = dict(a.split("=", 1) for a in argv[4:] if "=" in a)
    paths = tuple(p for p in options.get("paths", "").split(os.pathsep) if p)
    worker = Worker(script, rel, out, ir_dir, tests="tests" in argv[4:], users="users" in argv[4:], paths=paths)
    worker.after, worker.count = options.get("after", ""), int(options.get("counted", 0))
    worker.run()
    return 0


# ---------------------------------------------------------------------------------------------
# The driver


def _run_worker(script: Path, rel: str, out: Path, ir_dir: Path | None, tests: bool, env: dict[str, str],
                after: str, rows: list[dict[str, Any]], budget_s: float, timeout_s: float,
                users: tuple[str, ...] | None = None) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """One worker process over ``script`` (a test file: from the test after ``after``, with the
    kernels ``rows`` already counted); its rows are added to ``rows``. Returns how it ended, its
    last "done" line and the kernel it was busy with when it ended (None if none)."""
    counted = sum(r.get("verdict") in COUNTED + (NOT_LOWERED, OTHER_TARGET) and r.get("kernel") != "-" for r in rows)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(script), rel, str(out),
           str(ir_dir) if ir_dir else "-"] + (["tests", f"after={after}", f"counted={counted}"] if tests else [])
    if users is not None:  # --users: the repository's import roots
        cmd += ["users", "paths=" + os.pathsep.join(users)]
    outcome = ""
    try:
        proc = subprocess.run(cmd, cwd=script.parent, env=env, capture_output=True, text=True,
                              timeout=max(1.0, budget_s))
        if proc.returncode:
            tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            outcome = f"the worker died (exit {proc.returncode}): {tail[-1][:200] if tail else ''}"
    except subprocess.TimeoutExpired:
        outcome = f"timed out after {timeout_s:.0f} s"
    done, pending = None, None
    lowered: dict[str, dict[str, Any]] = {}  # kernels lowered whose CPU run has not reported
    for line in out.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "done" in d:
            done = d
        elif "progress" in d and d.get("stage") == "lowered":
            pending = None  # TileLang's lowering finished
            lowered[d["fingerprint"]] = d
        elif "progress" in d:
            pending = d
        else:
            pending = None
            lowered.pop(d.get("fingerprint", ""), None)
            rows.append({"script": rel, **d})
    if pending is not None:
        lowered.pop(pending.get("fingerprint", ""), None)
    for d in lowered.values():  # lowered, never run: the script's process ended first
        rows.append({"script": rel, "kernel": d["progress"], "verdict": NOT_RUN, "fingerprint": d["fingerprint"],
                     "reason": "its CPU run never started: " + (outcome or "the script's process ended"),
                     **({"test": d["test"]} if d.get("test") else {})})
    where = {k: pending[k] for k in ("test", "fingerprint") if k in pending} if pending else {}
    if pending is not None and pending.get("stage") == "lowering":  # TileLang's own lowering
        rows.append({"script": rel, "kernel": pending["progress"], "verdict": NOT_LOWERED,
                     "reason": "TileLang's lowering did not finish: " + (outcome or "the process ended"), **where})
    elif pending is not None:  # the CPU run of this kernel did not finish
        died = re.match(r"the worker died \(exit (-?\d+)\)", outcome)
        rows.append({"script": rel, "kernel": pending["progress"], "verdict": FAILS,
                     "cls": f"the CPU run ended its process (exit {died.group(1)})" if died
                     else "the CPU run did not finish",
                     "reason": outcome or "the script's process ended during the CPU run", **where})
    return outcome, done, pending


def run_script(script: Path, root: Path, timeout_s: float, ir_dir: Path | None,
               tests: bool = False, users: bool = False) -> list[dict[str, Any]]:
    """One script's rows. ``users``: a script of the users' set (``root/OWNER__NAME/...``): a pytest
    file (``test_*.py``) runs as a test module, any other as ``__main__``; the repository's top
    folder and its ``src/`` are on the import path, as the repository's own tools put them."""
    rel = script.relative_to(root).as_posix()
    paths: tuple[str, ...] | None = None
    if users:
        tests = _corpus_is_test_file(script)
        paths = tuple(str(p) for p in import_roots(script, root / Path(rel).parts[0]))
    text = script.read_text(errors="replace")
    if "tilelang" not in text and not users:  # a user's test file imports its kernels from its package
        return [{"script": rel, "kernel": "-", "verdict": "no kernel", "reason": "does not use TileLang"}]
    from tilelab.engine import corpus as _corpus

    not_cuda = set(_corpus._NOT_CUDA_HINTS) | (set(NOT_CUDA_FOLDERS) if tests else set())
    foreign = sorted({p.lower() for p in Path(rel).parts[:-1]} & not_cuda)
    if foreign:
        return [{"script": rel, "kernel": "-", "verdict": OTHER_TARGET, "reason": f"folder {foreign[0]!r}"}]
    hinted = [arch for hint, arch in _corpus._ARCH_HINTS if hint in rel.lower()]
    if tests:  # test files name the GPU they test: test_..._sm75_..., test_..._tcgen5_...
        hinted += [f"sm_{m.group(1)}" for m in [re.search(r"sm_?(\d{2,3})", script.name)] if m]
        hinted += ["sm_100a" for hint in ("tcgen5", "tcgen05", "tmem") if hint in script.name]
    if hinted and hinted[0] not in (ARCH, ARCH.rstrip("a")):
        return [{"script": rel, "kernel": "-", "verdict": OTHER_TARGET, "reason": f"written for {hinted[0]}"}]
    with tempfile.TemporaryDirectory(prefix="tilelab-emucov-") as tmp:
        out = Path(tmp) / "rows.jsonl"
        out.touch()
        env = dict(os.environ)
        env.setdefault("CUDA_HOME", "/usr/local/cuda")
        env["TILELANG_PRINT_ON_COMPILATION"] = "0"
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        deadline = time.monotonic() + timeout_s
        rows: list[dict[str, Any]] = []
        after, restarts, left_out = "", 0, 0
        while True:
            outcome, done, pending = _run_worker(script, rel, out, ir_dir, tests, env, after, rows,
                                                 deadline - time.monotonic(), timeout_s, paths)
            left_out += (done or {}).get("left_out", 0)
            # a test file whose process died in a kernel's CPU run (or its lowering) starts again
            # after that test: one kernel's crash does not take the file's later kernels with it
            if not (tests and pending is not None and pending.get("test") and outcome.startswith("the worker died")
                    and restarts < MAX_RESTARTS and deadline - time.monotonic() > 10):
                break
            after, restarts = pending["test"], restarts + 1
            out.write_text("")
        if not rows:
            rows.append({"script": rel, "kernel": "-", "verdict": "no kernel",
                         "reason": outcome or (done or {}).get("done", "")})
        if left_out:
            rows[-1]["left_out"] = left_out  # distinct kernels built but not counted
        if tests or users:
            rows[-1]["outcome"] = outcome or (done or {}).get("done", "")
        return rows


PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def import_roots(script: Path, repo_root: Path) -> list[Path]:
    """--users: where a script's own imports resolve, as they do once its project is installed
    or under pytest: the folders from the script's up to the repository's top that hold a project
    (``pyproject.toml``, ``setup.py``, ``setup.cfg``), each with its ``src/``, then the
    repository's top and its ``src/``; nearest first."""
    roots: list[Path] = []
    folder = script.parent
    while folder == repo_root or repo_root in folder.parents:
        if folder == repo_root or any((folder / f).is_file() for f in PROJECT_FILES):
            roots += [p for p in (folder, folder / "src") if p.is_dir() and p not in roots]
        if folder == repo_root:
            break
        folder = folder.parent
    return roots


def _corpus_is_test_file(script: Path) -> bool:
    from tilelab.engine import corpus as _corpus

    return _corpus.is_test_file(script)


COUNTED = (RUNS, REFUSED, FAILS)


def summary(rows: list[dict[str, Any]], label: str) -> list[str]:
    counted = [r for r in rows if r["verdict"] in COUNTED]
    n = len(counted)
    runs = sum(r["verdict"] == RUNS for r in counted)
    finite = sum(r["verdict"] == RUNS and "all finite" in r.get("reason", "") for r in counted)
    refused = sum(r["verdict"] == REFUSED for r in counted)
    fails = sum(r["verdict"] == FAILS for r in counted)
    share = f"{100 * runs / n:.1f}%" if n else "-"
    return [f"{label}: {n} kernels TileLang lowers for {ARCH}: {runs} run ({share}; {finite} of them all finite), "
            f"{refused} refused, {fails} fail"]


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """--tests: a kernel built by several test files (the same PrimFunc, the same outputs) counts
    once, in the first file (in path order); its later rows become ``duplicate``."""
    first: dict[str, str] = {}
    out = []
    for r in rows:
        if r.get("verdict") == DUPLICATE and "was" in r:  # rows saved by an earlier run: judged afresh
            r = {k: v for k, v in r.items() if k not in ("was", "reason")} | {"verdict": r["was"],
                                                                               "reason": r.get("first_reason", "")}
        key = r.get("fingerprint")
        where = r["script"] + (f"::{r['test']}" if r.get("test") else "")
        if key and key in first:
            r = {**r, "verdict": DUPLICATE, "reason": f"the same kernel as {first[key]}", "was": r["verdict"],
                 "first_reason": r.get("reason", "")}
        elif key:
            first[key] = where
        out.append(r)
    return out


def render(rows: list[dict[str, Any]], folders: list[str], tests: bool = False, which: str = "all",
           users: bool = False) -> str:
    lines = []
    header = ("repository" if users else "folder" if tests else "half", "script", "kernel", "verdict", "s", "reason")
    body = []
    for r in rows:
        half = folder_of(r["script"]) if tests or users else half_of(folder_of(r["script"]), folders)
        why = r.get("construct") or r.get("cls") or ""
        reason = r.get("reason", "")
        script = r["script"] + (f"::{r['test']}" if r.get("test") else "")
        body.append((half, script, r["kernel"], r["verdict"], str(r.get("seconds", "-")),
                     (f"[{why}] " if why and r["verdict"] == FAILS else "") + reason))
    widths = [min(60, max(len(h), *(len(b[i]) for b in body))) if body else len(h) for i, h in enumerate(header[:-1])]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header[:-1], widths)) + "  " + header[-1])
    for b in body:
        lines.append("  ".join(v[:60].ljust(w) for v, w in zip(b[:-1], widths)) + "  " + b[-1][:220])
    lines.append("")
    verdicts = collections.Counter(r["verdict"] for r in rows)
    lines.append("rows: " + ", ".join(f"{v} {n}" for v, n in verdicts.most_common()))
    if users:
        lines += summary(rows, "all (the users' kernels, held out)")
        for folder in sorted({folder_of(r["script"]) for r in rows}):
            lines += summary([r for r in rows if folder_of(r["script"]) == folder], f"  {folder}")
        left = sum(r.get("left_out", 0) for r in rows)
        scripts = len({r["script"] for r in rows})
        not_run = sum(r["verdict"] == NOT_RUN for r in rows)
        lines.append(f"{scripts} scripts; {left} further distinct kernels built by them not counted "
                     f"(a script's past the first {MAX_USER_KERNELS}); {not_run} lowered but not run "
                     "(the script's time ran out first; not counted)")
    elif tests:
        label = {"all": "all", "first": "first half of the files (built from)",
                 "second": "second half of the files (held out)"}[which]
        lines += summary(rows, f"{label} (TileLang's tests)")
        for folder in sorted({folder_of(r["script"]) for r in rows}):
            lines += summary([r for r in rows if folder_of(r["script"]) == folder], f"  {folder}")
        left = sum(r.get("left_out", 0) for r in rows)
        files = len({r["script"] for r in rows})
        lines.append(f"{files} test files; {left} further distinct kernels built by them not counted "
                     f"(a test's second and later kernels, a file's past the first {MAX_KERNELS})")
    else:
        lines += summary(rows, "all")
        for half in ("first", "second"):
            part = [r for r in rows if half_of(folder_of(r["script"]), folders) == half]
            lines += summary(part, f"{half} half" + (" (held out)" if half == "second" else ""))
    refused = collections.Counter(r.get("construct", "?") for r in rows if r["verdict"] == REFUSED)
    if refused:
        lines.append("refused, by construct:")
        lines += [f"  {n:3d}  {c}" for c, n in refused.most_common()]
    fails = collections.Counter(r.get("cls", "?") for r in rows if r["verdict"] == FAILS)
    if fails:
        lines.append("fails, by class:")
        lines += [f"  {n:3d}  {c}" for c, n in fails.most_common()]
    return "\n".join(lines)


def user_scripts(dest: Path, only: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """--users: the scripts of the set fetched into ``dest`` (``dest/user_kernels.json``, written by
    benchmarks/fetch_user_kernels.py), in manifest order: ``dest/OWNER__NAME/PATH``; ``only`` narrows
    them by glob on that relative path."""
    import fnmatch

    manifest = dest / USERS_MANIFEST
    if not manifest.is_file():
        raise ValueError(f"--users {dest}: no {USERS_MANIFEST} there; fetch the set first: "
                         f"python benchmarks/fetch_user_kernels.py {dest}")
    data = json.loads(manifest.read_text())
    scripts = []
    for entry in data["repositories"]:
        folder = entry["repo"].replace("/", "__")
        for rel in entry["scripts"]:
            path = dest / folder / rel
            if not path.is_file():
                raise ValueError(f"--users {dest}: {folder}/{rel} is missing; fetch the set again")
            scripts.append(path)
    for pattern in only:
        if not any(fnmatch.fnmatchcase(s.relative_to(dest).as_posix(), pattern) for s in scripts):
            raise ValueError(f"--only {pattern!r}: matches no script of the users' set; give a path such as "
                             "'OWNER__NAME/path/to/script.py' or a glob such as 'OWNER__NAME/*'")
    if only:
        scripts = [s for s in scripts if any(fnmatch.fnmatchcase(s.relative_to(dest).as_posix(), p) for p in only)]
    return scripts


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?",
                        help="TileLang's examples/ folder (with --tests: its testing/python folder)")
    parser.add_argument("--users", metavar="DEST",
                        help="the users' held-out set: the folder benchmarks/fetch_user_kernels.py DEST wrote")
    parser.add_argument("--tests", action="store_true",
                        help="the fresh held-out set: the test files (test_*.py) of TileLang's testing/python, "
                             f"folders {', '.join(TEST_FOLDERS)} unless --only names others")
    parser.add_argument("--table", nargs="+", metavar="ROWS",
                        help="print the table of rows saved by earlier runs (--json files or their .partial.jsonl); "
                             "a later file's rows replace an earlier one's for the same script")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    parser.add_argument("--half", choices=("all", "first", "second"), default="all")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB")
    parser.add_argument("--json", help="write the rows here as JSON")
    parser.add_argument("--save-ir", help="write each kernel's IR (NAME.tir.json) and its run (NAME.json) here")
    args = parser.parse_args()
    if args.users and (args.tests or args.directory):
        parser.error("--users DEST takes no DIRECTORY and no --tests: DEST is the whole set")
    if args.users and args.half != "all":
        parser.error("--half: the users' set is held out whole (no rule was built from any part of it)")
    if not args.users and not args.directory:
        parser.error("give DIRECTORY (TileLang's examples/, or testing/ with --tests) or --users DEST")

    from tilelab.engine import corpus as _corpus

    root = Path(args.users or args.directory).resolve()
    if args.tests and (root / "python").is_dir():
        root = root / "python"  # testing/ given for testing/python
    if args.users:
        try:
            scripts = user_scripts(root, args.only)
        except ValueError as err:
            parser.error(str(err))
        folders = sorted({folder_of(s.relative_to(root).as_posix()) for s in scripts})
    elif args.tests:
        scripts = [s for s in _corpus.select_scripts(root, args.only, tests=True) if _corpus.is_test_file(s)
                   and (args.only or folder_of(s.relative_to(root).as_posix()) in TEST_FOLDERS)]
        folders = list(TEST_FOLDERS)
    else:
        scripts = _corpus.select_scripts(root, args.only)
        folders = sorted({folder_of(s.relative_to(root).as_posix()) for s in _corpus.find_scripts(root)})
    if args.table:
        by_script: dict[str, list[dict[str, Any]]] = {}
        for name in args.table:
            text = Path(name).read_text()
            loaded = json.loads(text) if text.lstrip().startswith("[") else [json.loads(ln) for ln in
                                                                             text.splitlines() if ln.strip()]
            fresh: dict[str, list[dict[str, Any]]] = {}
            for r in loaded:
                fresh.setdefault(r["script"], []).append(r)
            by_script.update(fresh)
        if args.users:  # the set as its manifest lists it now (a script left out since is dropped)
            listed = [s.relative_to(root).as_posix() for s in scripts]
            table = [r for s in listed for r in by_script.get(s, [])]
        else:
            table = [r for s in sorted(by_script) for r in by_script[s]]
        table = dedupe(table) if args.tests or args.users else table
        print(render(table, folders, args.tests, users=bool(args.users)))
        if args.json:  # the rows merged
            Path(args.json).write_text(json.dumps(table, indent=1))
        return 0
    if args.half != "all" and args.tests:
        fresh = [s.relative_to(root).as_posix() for s in _corpus.find_scripts(root, True)
                 if _corpus.is_test_file(s) and folder_of(s.relative_to(root).as_posix()) in TEST_FOLDERS]
        outside = [s.relative_to(root).as_posix() for s in scripts if s.relative_to(root).as_posix() not in fresh]
        if outside:
            parser.error(f"--half: {outside[0]} is not one of the test files of {', '.join(TEST_FOLDERS)}, "
                         "which the halves are dealt from; drop --half to run it")
        scripts = [s for s in scripts if test_file_half(s.relative_to(root).as_posix(), fresh) == args.half]
    if args.half != "all" and not args.tests:
        scripts = [s for s in scripts if half_of(folder_of(s.relative_to(root).as_posix()), folders) == args.half]
    ir_dir = Path(args.save_ir).resolve() if args.save_ir else None
    if ir_dir:
        ir_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict[Path, list[dict[str, Any]]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as pool:
        futures = {pool.submit(run_script, s, root, args.timeout, ir_dir, args.tests, bool(args.users)): s
                   for s in scripts}
        partial = Path(args.json).with_suffix(".partial.jsonl") if args.json else None
        if partial:
            partial.write_text("")
        for i, future in enumerate(concurrent.futures.as_completed(futures), 1):
            rows = future.result()
            results[futures[future]] = rows
            if partial:  # rows as they come, so an interrupted run still leaves its table
                with partial.open("a") as f:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
            print(f"[{i}/{len(scripts)}] {rows[0]['script']}: " + ", ".join(r["verdict"] for r in rows),
                  file=sys.stderr, flush=True)
    rows = [r for s in scripts for r in results[s]]
    if args.tests or args.users:
        rows = dedupe(rows)
    print(render(rows, folders, args.tests, args.half, users=bool(args.users)))
    print(f"{len(scripts)} {'test files' if args.tests else 'scripts'} in {time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
