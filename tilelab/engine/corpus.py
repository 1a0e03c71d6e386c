"""``python -m tilelab corpus DIR``: inspect every kernel a directory of TileLang scripts builds,
and check each report against the texts TileLang generated.

One module of about 1,000 lines on purpose: the worker half (one script in its own process) is
started as ``python -m tilelab.engine.corpus`` and shares the row record, verdicts and checks with the
driver half that starts the workers and tabulates their rows.

Each script runs in its own process (``python -m tilelab.engine.corpus SCRIPT OUT``) as ``__main__``,
with its own default sizes, CUDA tensors redirected to the CPU and every compile intercepted
before the device compiler (``_tilelang.intercept_compiles``): the script gets a stand-in kernel
whose calls return zero-filled outputs, so its ``main()`` runs on without a GPU until it needs
real results. For each kernel the worker times TileLang's own lowering, then ``tilelab.inspect``,
then checks the report:

- kernel count and names: the ``__global__`` functions of the device source;
- grid, block and dynamic shared memory: the ``cudaLaunchKernelEx`` blocks of the C++ launcher;
- every TMA descriptor: the ``cuTensorMapEncode*`` calls of the launcher and each field written
  before them;
- every WGMMA instruction: each ``tl::wgmma_ss/rs`` call site of the device source, with the
  descriptor its operand variable was last initialised to (``initialize_wgmma_descriptor``),
  against the report's instruction and operand descriptors;
- the report's own cross-checks: TMA descriptors breaking a driver rule, and WGMMA descriptors
  that disagree with the one recomputed from the buffer's inferred layout.

The texts are parsed with regular expressions (``tilelab._tilelang.source``, the one parser of
TileLang's generated texts); the engine reads TileLang's IR instead, so agreement is evidence.
"""

from __future__ import annotations

import collections
import concurrent.futures
import fnmatch
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .._tilelang.source import int_literal as _int_or_none
from .._tilelang.source import launcher_launches, launcher_tma, source_kernels, source_wgmma

OK = "ok"
MISMATCH = "mismatch"
INSPECT_ERROR = "inspect error"
CANNOT_LOWER = "TileLang cannot lower"
LOWERED = "lowered"  # --lower-only: TileLang lowered it; not inspected or checked
NO_KERNEL = "no kernel"  # a script-level row: the script built no kernel (with the reason)
SKIPPED = "skipped"
TIMED_OUT = "timed out"  # TileLang's own lowering did not finish within the script's budget
KERNEL_VERDICTS = (OK, MISMATCH, INSPECT_ERROR, CANNOT_LOWER, TIMED_OUT, LOWERED)

DEFAULT_ARCH = "sm_90a"
# Directory-name hints for scripts that leave the target to the local GPU ("auto").
_ARCH_HINTS = (("sm100", "sm_100a"), ("tcgen05", "sm_100a"), ("blackwell", "sm_100a"), ("sm120", "sm_120a"))
_NOT_CUDA_HINTS = ("amd", "rocm", "hip", "ascend", "metal")
SKIP_FILES = ("conftest.py", "__init__.py", "setup.py")
MAX_KERNELS_PER_SCRIPT = 8
# A pytest file (``test_*.py``, with tests=True): its test functions run one after another in the
# file's process, each parametrized one with at most MAX_PARAM_SETS of its parameter sets.
MAX_KERNELS_PER_TEST_FILE = 16
MAX_PARAM_SETS = 4


@dataclass(frozen=True)
class CorpusRow:
    """One kernel of one script (or, with verdict ``no kernel``/``skipped``, one script)."""

    script: str
    kernel: str
    target: str
    verdict: str
    reason: str = ""
    lower_s: float | None = None  # TileLang's own lowering (tvm_ffi, no nvcc); the median of the rounds
    inspect_s: float | None = None  # tilelab.inspect, uncached; the median of the rounds
    # With --repeat N: the seconds of each round, lowering and inspect interleaved (lower, inspect,
    # lower, inspect, ...), so a burst of load on a shared machine slows both sides of a round.
    lower_runs: tuple[float, ...] = ()
    inspect_runs: tuple[float, ...] = ()
    # A kernel TileLang cannot lower: tilelab's diagnosis (tilelab._tilelang.doctor): the catalogue's cause
    # ("" when the failure is not in it), the pass that failed, and the script line ("N: text").
    cause: str = ""
    pass_name: str = ""
    line: str = ""
    candidates: tuple[int, ...] = ()  # other script lines the failure may belong to (line is the likeliest)

    @property
    def explained(self) -> bool:
        """A compile failure whose message names the pass, the kernel line and a known cause."""
        return bool(self.cause and self.pass_name and self.line)

    @property
    def round_ratios(self) -> tuple[float, ...]:
        """inspect/lower of each round (one per pair of interleaved measurements)."""
        return tuple(i / lo for lo, i in zip(self.lower_runs, self.inspect_runs) if lo > 0)

    @property
    def ratio(self) -> float | None:
        """The median of the rounds' inspect/lower ratios (the 3x target is checked on it); with
        a single measurement, inspect_s / lower_s."""
        rounds = self.round_ratios
        if rounds:
            return statistics.median(rounds)
        if self.lower_s and self.inspect_s is not None:
            return self.inspect_s / self.lower_s
        return None

    @property
    def ratio_spread(self) -> tuple[float, float] | None:
        """The lowest and highest round ratio; None with fewer than two rounds."""
        rounds = self.round_ratios
        return (min(rounds), max(rounds)) if len(rounds) > 1 else None

    # hand-written: asdict keeps the runs as tuples, and old tables may hold null for the text fields
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CorpusRow:
        fields: dict[str, Any] = {
            k: d.get(k) for k in ("script", "kernel", "target", "verdict", "reason", "lower_s", "inspect_s")}
        fields.update({k: d.get(k) or "" for k in ("cause", "pass_name", "line")})
        return cls(**fields, lower_runs=tuple(d.get("lower_runs") or ()),
                   inspect_runs=tuple(d.get("inspect_runs") or ()), candidates=tuple(d.get("candidates") or ()))


# ---------------------------------------------------------------------------------------------
# Ground truth from the generated texts


_WGMMA_TYPES = {"Float16": "float16", "BFloat16": "bfloat16", "Float32": "float32", "TensorFloat32": "tfloat32",
                "Float8_e4m3": "float8_e4m3", "Float8_e5m2": "float8_e5m2", "Int8": "int8", "UInt8": "uint8",
                "Int32": "int32"}


def _report_wgmma(report: Any) -> list[tuple]:
    sites = []
    for w in report.wgmma:
        def operand(op: Any) -> tuple | None:
            return None if op is None else (op.buffer, op.layout_type, op.lbo, op.sbo)

        sites += [(w.kernel, w.instruction, w.variant, w.a_major, w.b_major, operand(w.a), operand(w.b))] * w.count
    return sites


def _same_operand(truth: tuple | None, mine: tuple | None) -> bool:
    if truth is None or mine is None:
        return truth is mine
    # A descriptor over the merged dynamic shared memory names no buffer in the source; the code
    # generator suffixes a name that would clash (a buffer named ``do``, a C++ keyword, is ``do_1``).
    buffer_ok = truth[0] in ("buf_dyn_shmem", None) or (
        mine[0] is not None and re.fullmatch(re.escape(mine[0]) + r"(?:_\d+)?", truth[0]) is not None)
    return buffer_ok and truth[1:] == mine[1:]


def _check_wgmma(report: Any) -> list[str]:
    truth = source_wgmma(report.sources.device)
    mine = _report_wgmma(report)
    problems = []
    if len(truth) != len(mine):
        problems.append(f"WGMMA: the device code has {len(truth)} wgmma call site(s), the report {len(mine)}")
    left = list(mine)
    for site in truth:
        match = next((m for m in left if m[:5] == site[:5] and _same_operand(site[5], m[5])
                      and _same_operand(site[6], m[6])), None)
        if match is None:
            near = next((m for m in left if m[:5] == site[:5]), None)
            problems.append(f"WGMMA {site[1]} in {site[0]}: the source reads A {site[5]}, B {site[6]}; "
                            + (f"the report has A {near[5]}, B {near[6]}" if near
                               else "the report has no such instruction"))
            continue
        left.remove(match)
    return problems[:4]


def _check_launch(report: Any, launcher: str) -> list[str]:
    launches = launcher_launches(launcher)
    problems = []
    for k in report.kernels:
        got = launches.get(k.name)
        if got is None:
            problems.append(f"launch of {k.name}: not found in the C++ launcher")
            continue
        for what, mine, theirs in (("grid", list(k.grid), got["grid"]), ("block", list(k.block), got["block"])):
            theirs = list(theirs) + ["1"] * (3 - len(theirs))
            for axis, (a, b) in enumerate(zip(mine, theirs)):
                bi = _int_or_none(str(b))
                if isinstance(a, int) and bi is not None and a != bi:
                    problems.append(f"{k.name} {what}[{axis}]: report {a}, launcher {bi}")
        smem = _int_or_none(str(got["smem"]))
        if isinstance(k.dynamic_shared_memory_bytes, int) and smem is not None \
                and smem != k.dynamic_shared_memory_bytes:
            problems.append(f"{k.name} dynamic shared memory: report {k.dynamic_shared_memory_bytes}, launcher {smem}")
    return problems


def _check_tma(report: Any, launcher: str) -> list[str]:
    from ..cuda_facts import TMA_DTYPES, TMA_INTERLEAVES, TMA_L2_PROMOTIONS, TMA_OOB_FILLS, TMA_SWIZZLES

    truth = launcher_tma(launcher)
    mine = list(report.tma_descriptors)
    problems = []
    if len(truth) != len(mine):
        problems.append(f"TMA: the launcher encodes {len(truth)} descriptor(s), the report has {len(mine)}")
    used: set[int] = set()
    for t in truth:
        i = next((i for i, d in enumerate(mine) if i not in used and d.name == t["name"]), None)
        if i is None:
            problems.append(f"TMA {t['name']}: in the launcher, not in the report")
            continue
        used.add(i)
        d = mine[i]
        expected = {
            "type": TMA_DTYPES.index(d.dtype) if d.dtype in TMA_DTYPES else d.dtype,
            "tensorRank": d.rank,
            "globalDim": list(d.global_dim), "globalStride": list(d.global_stride_bytes),
            "elementStrides": list(d.element_strides),
            "interleave": TMA_INTERLEAVES.index(d.interleave), "swizzle": TMA_SWIZZLES.index(d.swizzle),
            "l2Promotion": TMA_L2_PROMOTIONS.index(d.l2_promotion), "oobFill": TMA_OOB_FILLS.index(d.oob_fill),
        }
        if d.kind == "tiled":
            expected["boxDim"] = list(d.box_dim)
        else:
            expected.update(lowerCorner=list(d.lower_corner), upperCorner=list(d.upper_corner),
                            channelsPerPixel=d.channels_per_pixel, pixelsPerColumn=d.pixels_per_column)
        if t["kind"] != d.kind:
            problems.append(f"TMA {d.name}: launcher encodes {t['kind']}, report says {d.kind}")
        for field_name, want in expected.items():
            have = t.get(field_name)
            if isinstance(want, list) and isinstance(have, list):
                if len(want) != len(have) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                                 for a, b in zip(want, have)):
                    problems.append(f"TMA {d.name}.{field_name}: report {want}, launcher {have}")
            elif isinstance(want, int) and isinstance(have, int) and want != have:
                problems.append(f"TMA {d.name}.{field_name}: report {want}, launcher {have}")
            elif have is None:
                problems.append(f"TMA {d.name}.{field_name}: not written by the launcher")
    return problems


def _check_self(report: Any) -> list[str]:
    from .. import swizzle as sw

    problems = [f"report flags {p}" for p in report.problems]
    for w in report.wgmma:
        for role, op in (("A", w.a), ("B", w.b)):
            layout = next((x for x in report.layouts if op is not None and x.buffer == op.buffer
                           and x.scope == "shared"), None)
            if layout is None:
                continue
            check = sw.check_wgmma_operand(layout, op, role, 64 if role == "A" else w.n)
            if check.descriptor is not None and not check.agrees:
                problems.append(f"WGMMA {w.instruction} {role} over {op.buffer}: the descriptor recomputed from "
                                f"the inferred layout differs from the compiler's")
    return problems


def check_report(report: Any) -> tuple[list[str], list[str]]:
    """(mismatches, notes): every disagreement between ``report`` and the texts it carries, and
    what could not be checked."""
    problems: list[str] = []
    notes: list[str] = []
    names = source_kernels(report.sources.device)
    reported = [k.name for k in report.kernels]
    if names != reported and sorted(names) != sorted(reported):
        problems.append(f"kernels: the device source defines {names}, the report {reported}")
    cython = report.sources.launcher("cython")
    if cython is not None and cython.text:
        problems += _check_launch(report, cython.text)
        problems += _check_tma(report, cython.text)
    else:
        why = cython.reason if cython is not None else "not generated"
        notes.append(f"launch configuration and TMA fields not checked: no C++ launcher ({why})")
    problems += _check_wgmma(report)
    problems += _check_self(report)
    return problems, notes


# ---------------------------------------------------------------------------------------------
# The worker: one script, in its own process


class _Stop(BaseException):
    """Ends a script's run (not an Exception, so the script's own handlers let it through)."""


def _is_cuda(device: Any) -> bool:
    text = str(device)
    return text == "cuda" or text.startswith("cuda:") or (isinstance(device, int) and not isinstance(device, bool))


def _cpu_everywhere(arch: str = DEFAULT_ARCH):  # -> context manager
    """CUDA tensors become CPU tensors, and torch.cuda answers as a GPU of ``arch`` would."""
    import contextlib
    import types

    import torch
    from torch.overrides import TorchFunctionMode

    def fix(value: Any) -> Any:
        if isinstance(value, (str, torch.device)) and _is_cuda(value):
            return "cpu"
        return value

    class CpuDevices(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if func is torch.device:  # torch.device(0) means the accelerator
                return torch.device("cpu") if args and (_is_cuda(args[0])) else func(*args, **kwargs)
            if "device" in kwargs:
                kwargs["device"] = "cpu" if _is_cuda(kwargs["device"]) else kwargs["device"]
            if func in (torch.Tensor.to,):
                args = tuple(fix(a) for a in args)
            return func(*args, **kwargs)

    digits = re.sub(r"\D", "", arch) or "90"
    major, minor = int(digits[:-1]), int(digits[-1])
    props = types.SimpleNamespace(name=f"NVIDIA GPU {arch} (stand-in)", major=major, minor=minor,
                                  multi_processor_count=132, total_memory=80 * 2**30, shared_memory_per_block=49152,
                                  shared_memory_per_block_optin=232448,
                                  shared_memory_per_multiprocessor=233472, max_threads_per_multi_processor=2048,
                                  L2_cache_size=50 * 2**20, warp_size=32, regs_per_multiprocessor=65536)

    class _Event:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

        def record(self, *a: Any, **k: Any) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, other: Any) -> float:
            return 1.0

    class _Stream(_Event):
        def wait_stream(self, *a: Any) -> None:
            pass

    fakes = {
        "is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
        "get_device_capability": lambda *a: (props.major, props.minor), "get_device_name": lambda *a: props.name,
        "get_device_properties": lambda *a: props, "synchronize": lambda *a: None, "set_device": lambda *a: None,
        "manual_seed": lambda *a: None, "manual_seed_all": lambda *a: None, "empty_cache": lambda: None,
        "Event": _Event, "Stream": _Stream,
        "current_stream": lambda *a: _Stream(), "default_stream": lambda *a: _Stream(),
        "stream": lambda *a: contextlib.nullcontext(), "max_memory_allocated": lambda *a: 0,
        "reset_peak_memory_stats": lambda *a: None, "memory_allocated": lambda *a: 0,
    }
    saved_default = torch.set_default_device

    @contextlib.contextmanager
    def patched():
        old = {k: getattr(torch.cuda, k, None) for k in fakes}
        for k, v in fakes.items():
            setattr(torch.cuda, k, v)
        torch.set_default_device = lambda device: saved_default(fix(device))
        try:
            with CpuDevices():
                yield
        finally:
            for k, v in old.items():
                setattr(torch.cuda, k, v)
            torch.set_default_device = saved_default

    return patched()


_TORCH_DTYPES = {"float8_e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
                 "bool": "bool"}


class StandInKernel:
    """What the script gets in place of a compiled kernel: calling it returns zero-filled outputs
    of the right shapes (bound from the inputs where symbolic), and it does no work."""

    def __init__(self, request: Any, source: str = "") -> None:
        self.prim_func = request.prim_func
        self.out_idx = request.out_idx or []
        self._source = source

    def _outputs(self, args: tuple) -> Any:
        import torch

        params = list(self.prim_func.params)
        buffers = [self.prim_func.buffer_map.get(p) for p in params]
        inputs = [i for i in range(len(params)) if i not in {o % len(params) for o in self.out_idx}]
        bound: dict[str, int] = {}
        for i, arg in zip(inputs, args):
            buf = buffers[i]
            if buf is None or not hasattr(arg, "shape"):
                continue
            for dim, size in zip(buf.shape, arg.shape):
                if not str(dim).lstrip("-").isdigit():
                    bound[str(dim)] = int(size)
        outs = []
        for o in self.out_idx:
            buf = buffers[o % len(params)]
            shape = [int(d) if str(d).isdigit() else bound.get(str(d)) for d in buf.shape]
            if any(s is None for s in shape):
                raise _Stop("an output's shape depends on a size the inputs do not bind")
            name = str(buf.dtype)
            dtype = getattr(torch, _TORCH_DTYPES.get(name, name), None)
            if dtype is None:
                raise _Stop(f"no torch dtype for {name}")
            outs.append(torch.zeros(shape, dtype=dtype))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._outputs(args)

    def get_kernel_source(self, *a: Any, **k: Any) -> str:
        return self._source

    def get_host_source(self, *a: Any, **k: Any) -> str:
        return ""

    def get_profiler(self, *a: Any, **k: Any) -> Any:
        return _StandInProfiler()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


class _StandInProfiler:
    def do_bench(self, *a: Any, **k: Any) -> float:
        return 1.0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


def _arch_for(script: Path, request_target: Any, default: str) -> str | None:
    from .. import _tilelang

    arch = _tilelang.target_arch(request_target)
    if arch:
        return arch
    target = str(request_target or "").lower()
    if any(t in target for t in ("hip", "rocm", "metal", "llvm", "c ")) or target == "c":
        return None
    lowered = str(script).lower()
    for hint, hinted in _ARCH_HINTS:
        if hint in lowered:
            return hinted
    return default


def _needs_blackwell(func: Any, _tilelang: Any) -> bool:
    """A kernel written with tcgen05 MMA or tensor memory (sm_100) left to the local GPU's arch."""
    try:
        text = _tilelang.script_text(func)
    except Exception:
        return False
    return "tcgen05" in text or "shared.tmem" in text


def _tilelang_reason(err: BaseException) -> str:
    """The sentence of a TileLang/TVM failure that explains it: the check that failed or the
    fatal message, not the source excerpt TVM appends after it."""
    text = str(err.__cause__ or err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        found = re.search(r"(Check failed:.*|Fatal:.*|InternalError:.*|\w+Error:.*)", line)
        if found:
            return re.sub(r"^(Fatal|InternalError):\s*", "", found.group(1))[:300]
    for line in lines:
        if not line.startswith(("|", "-->", "File ", "^")) and not re.match(r"^\d+\s*\|", line):
            return line[:300]
    return type(err).__name__


def _kernel_name(func: Any) -> str:
    return str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"


def _short(err: BaseException) -> str:
    text = str(err).strip()
    line = text.splitlines()[0] if text else type(err).__name__
    return line[:300]


def _failure_fields(err: Any) -> dict[str, Any]:
    """A CANNOT_LOWER row's fields from a LoweringError: TileLang's sentence and the diagnosis."""
    line = err.kernel_line
    return {"verdict": CANNOT_LOWER, "reason": _tilelang_reason(err), "cause": err.cause or "",
            "pass_name": err.pass_name or "",
            "line": f"{line[1]}: {line[2].strip()}" if line and line[1] and line[2].strip() else "",
            "candidates": list(getattr(err.diagnosis, "candidates", ()) or ())}


def _failed_building(err: Any) -> bool:
    """Whether a LoweringError raised while the script ran is a kernel TileLang could not build from
    its Python source (its eager builder in the trace), rather than a failure of the script's own."""
    return getattr(err, "pass_name", None) == "elaboration" and (
        "eager/builder.py" in err.trace or "Failed to build prim_func" in err.trace)


def _built_name(err: Any) -> str:
    found = re.search(r"Failed to build prim_func from (\w+)", err.trace)
    return found.group(1) if found else "(kernel)"


def param_sets(test: Callable[..., Any], limit: int = MAX_PARAM_SETS,
               fixtures: bool = False) -> list[dict[str, Any]] | None:
    """The keyword arguments to call a pytest function with: one dict per combination of its
    ``pytest.mark.parametrize`` values (the first ``limit``), ``[{}]`` for a plain test, None for a
    test that needs a fixture (an argument no parametrize mark gives); with ``fixtures`` (the caller
    fills them in), the parametrized values even so."""
    import inspect as pyinspect
    import itertools

    axes = []
    for mark in getattr(test, "pytestmark", []) or []:
        if getattr(mark, "name", "") != "parametrize" or len(mark.args) < 2:
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",") if n.strip()] if isinstance(names, str) else list(names)
        sets = []
        for value in values:
            if hasattr(value, "values") and hasattr(value, "marks") and hasattr(value, "id"):  # pytest.param(...)
                value = tuple(value.values)
                value = value if len(names) > 1 else value[:1]
            elif len(names) == 1:
                value = (value,)
            sets.append(dict(zip(names, value)))
        if sets:
            axes.append(sets)
    combos = [{k: v for part in combo for k, v in part.items()}
              for combo in itertools.islice(itertools.product(*axes), limit)]
    try:
        params = pyinspect.signature(test).parameters.values()
    except (TypeError, ValueError):
        return None
    given = combos[0] if combos else {}
    if fixtures:
        return combos or [{}]
    for p in params:
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name not in given:
            return None
    return combos or [{}]


def module_tests(namespace: dict[str, Any], module_name: str) -> list[tuple[str, Callable[..., Any]]]:
    """The test functions a pytest module defines, in order: ``test*`` functions and the ``test*``
    methods of its ``Test*`` classes (instantiated without arguments)."""
    import inspect as pyinspect

    found: list[tuple[str, Callable[..., Any]]] = []
    for name, value in namespace.items():
        if name.startswith("test") and pyinspect.isfunction(value) and value.__module__ == module_name:
            found.append((name, value))
        elif name.startswith("Test") and pyinspect.isclass(value) and value.__module__ == module_name:
            for attr, method in vars(value).items():
                if attr.startswith("test") and pyinspect.isfunction(method):
                    found.append((f"{name}.{attr}", _bound(value, attr)))
    return found


def _bound(cls: type, attr: str) -> Callable[..., Any]:
    method = getattr(cls, attr)

    def call(**kwargs: Any) -> Any:
        return getattr(cls(), attr)(**kwargs)

    call.pytestmark = getattr(method, "pytestmark", [])  # type: ignore[attr-defined]
    call.__signature__ = __import__("inspect").signature(method)  # type: ignore[attr-defined]
    return call


class _Worker:
    def __init__(self, script: Path, out: Path, default_arch: str, grace_s: float, repeat: int = 1,
                 lower_only: bool = False, tests: bool = False) -> None:
        self.script, self.out, self.default_arch, self.grace_s = script, out, default_arch, grace_s
        self.repeat = max(1, repeat)
        self.lower_only = lower_only
        self.tests = tests
        self.limit = MAX_KERNELS_PER_TEST_FILE if tests else MAX_KERNELS_PER_SCRIPT
        self.test: str | None = None  # the test function running (a pytest file)
        self.seen: dict[str, StandInKernel] = {}
        self.warm = False
        self.captured = 0

    def emit(self, row: dict[str, Any]) -> None:
        if self.test and "done" not in row:
            row = {"test": self.test, **row}
        with self.out.open("a") as f:
            f.write(json.dumps(row) + "\n")

    def on_compile(self, request: Any) -> Any:
        from .. import _tilelang

        signal.alarm(0)
        try:
            return self._inspect(request, _tilelang)
        finally:
            signal.alarm(max(1, int(self.grace_s)))

    def _inspect(self, request: Any, _tilelang: Any) -> Any:
        from ..records.errors import LoweringError
        from .inspect import inspect

        func = request.prim_func
        key = f"{_tilelang.kernel_fingerprint(func)}|{request.out_idx}|{sorted(map(str, request.pass_configs.items()))}"
        if key in self.seen:
            return self.seen[key]
        name = _kernel_name(func)
        arch = _arch_for(self.script, request.target, self.default_arch)
        if arch is not None and not arch.startswith("sm_10") and _needs_blackwell(func, _tilelang):
            arch = "sm_100a"
        stand_in = StandInKernel(request)
        self.seen[key] = stand_in
        self.captured += 1
        if arch is None:
            self.emit({"kernel": name, "target": str(request.target), "verdict": SKIPPED,
                       "reason": f"target {request.target}: not CUDA"})
            return stand_in
        if self.captured > self.limit:
            return stand_in
        row: dict[str, Any] = {"kernel": name, "target": arch}
        configs = _tilelang.normalize_pass_configs(request.pass_configs)

        self.emit({"progress": "lowering", **row})  # so a run cut short by its timeout says where

        def lower_once() -> float:
            start = time.perf_counter()
            _tilelang.tilelang_lower(func, arch, out_idx=request.out_idx, pass_configs=configs)
            return time.perf_counter() - start

        def inspect_once() -> tuple[Any, float]:
            start = time.perf_counter()
            report = inspect(func, arch, out_idx=request.out_idx, pass_configs=request.pass_configs, force=True)
            return report, time.perf_counter() - start

        try:
            first_lower = lower_once()
        except LoweringError as err:
            self.emit({**row, **_failure_fields(err)})
            return stand_in
        except Exception as err:
            self.emit({**row, "verdict": CANNOT_LOWER, "reason": f"{type(err).__name__}: {_short(err)}"})
            return stand_in

        if self.lower_only:
            self.emit({**row, "verdict": LOWERED, "lower_s": first_lower})
            return stand_in
        self.emit({"progress": "inspecting", **row, "lower_s": first_lower})
        lowers: list[float] = []
        inspects: list[float] = []
        try:
            report, first_inspect = inspect_once()
            if self.warm:  # the first round in a process also pays for one-time set-up: not counted
                lowers, inspects = [first_lower], [first_inspect]
            self.warm = True
            while len(lowers) < self.repeat:  # interleaved rounds: lower, inspect, lower, inspect, ...
                lowers.append(lower_once())
                report, seconds = inspect_once()
                inspects.append(seconds)
        except Exception as err:
            self.emit({**row, "lower_s": first_lower, "verdict": INSPECT_ERROR,
                       "reason": f"{type(err).__name__}: {_short(err)}"})
            return stand_in
        finally:
            self.warm = True
        row.update(lower_s=statistics.median(lowers), inspect_s=statistics.median(inspects))
        if self.repeat > 1:
            row.update(lower_runs=lowers, inspect_runs=inspects)
        stand_in._source = report.sources.device
        try:
            problems, notes = check_report(report)
        except Exception as err:
            problems, notes = [f"checking the report failed: {type(err).__name__}: {_short(err)}"], []
        verdict = MISMATCH if problems else OK
        self.emit({**row, "verdict": verdict, "reason": "; ".join(problems or notes)[:600]})
        return stand_in

    def run(self) -> None:
        import runpy

        from .. import _tilelang
        from ..records.errors import LoweringError

        def stop(signum: int, frame: Any) -> None:
            raise _Stop(f"no new kernel within {self.grace_s:.0f} s of the last one")

        signal.signal(signal.SIGALRM, stop)
        outcome = "finished"
        sys.argv = [str(self.script)]
        sys.path.insert(0, str(self.script.parent))
        os.chdir(self.script.parent)
        try:
            with _tilelang.tilelang_errors(self.script.name), \
                    _cpu_everywhere(_arch_for(self.script, None, self.default_arch) or self.default_arch), \
                    _tilelang.intercept_compiles(self.on_compile):
                if self.tests:
                    outcome = self._run_tests(runpy.run_path(str(self.script), run_name=_TEST_MODULE))
                else:
                    runpy.run_path(str(self.script), run_name="__main__")
        except _Stop as err:
            outcome = f"stopped: {err}"
        except SystemExit as err:
            outcome = f"exited ({err.code})"
        except LoweringError as err:  # a kernel TileLang could not build from its source: a compile failure
            outcome = f"{type(err).__name__}: {_short(err)}"
            if _failed_building(err):
                self.emit({"kernel": _built_name(err), "target": self.default_arch, **_failure_fields(err)})
        except BaseException as err:  # the script's own failure, reported with its reason
            outcome = f"{type(err).__name__}: {_short(err)}"
            if os.environ.get("TILELAB_DEBUG") == "1":
                import traceback

                traceback.print_exc()
        finally:
            signal.alarm(0)
        extra = self.captured - self.limit
        self.emit({"done": outcome, "captured": self.captured, "limit": self.limit,
                   "left_out": max(0, extra)})

    def _run_tests(self, namespace: dict[str, Any]) -> str:
        """Call each test function of a pytest module (each parameter set in turn); a test's own
        failure (an assert on the stand-in's zeros, a skip) ends that test only."""
        from .. import _tilelang
        from ..records.errors import LoweringError

        ran = needs_fixture = 0
        for name, test in module_tests(namespace, _TEST_MODULE):
            sets = param_sets(test)
            if sets is None:
                needs_fixture += 1
                continue
            for index, kwargs in enumerate(sets):
                self.test = name + (f"[{index}]" if len(sets) > 1 else "")
                ran += 1
                signal.alarm(max(1, int(3 * self.grace_s)))  # a test that builds no kernel for a while ends
                try:
                    with _tilelang.tilelang_errors(name):
                        test(**kwargs)
                except LoweringError as err:
                    if _failed_building(err):
                        self.emit({"kernel": _built_name(err), "target": self.default_arch, **_failure_fields(err)})
                except (_Stop, Exception, SystemExit):
                    pass
                except BaseException as err:  # pytest.skip/fail raise outcomes that are not Exceptions
                    if isinstance(err, KeyboardInterrupt):
                        raise
                finally:
                    signal.alarm(0)
                    self.test = None
        return f"ran {ran} test(s)" + (f"; {needs_fixture} need pytest fixtures (not run)" if needs_fixture else "")


_TEST_MODULE = "tilelab_corpus_tests"


def _worker_main(argv: list[str]) -> int:
    script, out, arch, grace = Path(argv[0]).resolve(), Path(argv[1]).resolve(), argv[2], float(argv[3])
    repeat = int(argv[4]) if len(argv) > 4 else 1
    lower_only = "lower-only" in argv[5:]
    _Worker(script, out, arch, grace, repeat, lower_only, tests="tests" in argv[5:]).run()
    return 0


# ---------------------------------------------------------------------------------------------
# The driver


def is_test_file(path: Path) -> bool:
    """A pytest file: ``test_*.py`` (its kernels are built by its test functions, not by a main)."""
    return path.name.startswith("test_")


def find_scripts(directory: Path, tests: bool = False) -> list[Path]:
    """Every example script under ``directory``: ``*.py`` except tests (``test_*``, ``regression_*``)
    and package plumbing; with ``tests``, the pytest files (``test_*.py``) too."""
    return sorted(p for p in directory.rglob("*.py")
                  if not p.name.startswith("regression_") and (tests or not is_test_file(p))
                  and p.name not in SKIP_FILES
                  and not any(part.startswith(".") or part == "__pycache__" for part in p.parts))


def select_scripts(root: Path, only: Sequence[str] = (), tests: bool = False) -> list[Path]:
    """find_scripts, narrowed to the paths (relative to ``root``) matching one of the ``only``
    glob patterns; a pattern that matches no script is an error naming it."""
    scripts = find_scripts(root, tests)
    if not only:
        return scripts
    rel = {s: s.relative_to(root).as_posix() for s in scripts}
    for pattern in only:
        if not any(fnmatch.fnmatchcase(r, pattern) for r in rel.values()):
            raise ValueError(f"--only {pattern!r}: matches no script under {root}; give a path relative to it "
                             "such as 'gemm/example_gemm.py' or a glob such as 'gemm/*.py'")
    return [s for s in scripts if any(fnmatch.fnmatchcase(rel[s], p) for p in only)]


def _rows_from(script: str, lines: Iterable[str], rc: int | None, timed_out: bool, timeout_s: float,
               stderr: str) -> list[CorpusRow]:
    rows: list[CorpusRow] = []
    done = None
    pending: dict[str, Any] | None = None  # the kernel the worker was busy with
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "done" in d:
            done = d
            continue
        if "progress" in d:
            pending = d
            continue
        pending = None
        rows.append(CorpusRow.from_dict({**d, "script": f"{script}::{d['test']}" if d.get("test") else script}))
    if pending is not None and done is None:
        where = pending["progress"]
        if pending.get("test"):
            script = f"{script}::{pending['test']}"
        if where == "lowering":
            rows.append(CorpusRow(script, pending["kernel"], pending["target"], TIMED_OUT,
                                  f"TileLang's lowering did not finish within the script's {timeout_s:.0f} s"
                                  if timed_out else f"the worker died (exit {rc}) in TileLang's lowering"))
        else:
            rows.append(CorpusRow(script, pending["kernel"], pending["target"], INSPECT_ERROR,
                                  (f"inspect did not finish within the script's {timeout_s:.0f} s "
                                   if timed_out else f"the worker died (exit {rc}) in inspect ")
                                  + f"(TileLang lowered it in {pending.get('lower_s') or 0:.1f} s)",
                                  lower_s=pending.get("lower_s")))
    if done is not None and done.get("left_out"):
        rows.append(CorpusRow(script, f"({done['left_out']} more)", "", SKIPPED,
                              f"more than {done.get('limit', MAX_KERNELS_PER_SCRIPT)} distinct kernels; the rest are "
                              "not inspected"))
    kernels = [r for r in rows if r.verdict in KERNEL_VERDICTS]
    if not kernels and not any(r.verdict == SKIPPED for r in rows):
        if timed_out:
            reason = f"timed out after {timeout_s:.0f} s before building a kernel"
        elif done is not None:
            reason = done["done"]
        else:
            tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            reason = f"the worker died (exit {rc}): {tail[-1][:200] if tail else 'no message'}"
        rows.append(CorpusRow(script, "-", "", NO_KERNEL, reason))
    return rows


def run_script(script: Path, root: Path, *, arch: str = DEFAULT_ARCH, timeout_s: float = 300.0,
               grace_s: float = 5.0, repeat: int = 1, lower_only: bool = False) -> list[CorpusRow]:
    """Run one script in a fresh process and return its rows. ``repeat``: rounds of interleaved
    lowering and inspect per kernel, whose medians the row reports; ``lower_only``: only TileLang's
    lowering (and the diagnosis of a failure), no inspection. A pytest file (``test_*.py``) runs
    its test functions instead of ``__main__``: its rows' script is ``file.py::test_name``."""
    rel = str(script.relative_to(root)) if script.is_relative_to(root) else str(script)
    try:
        text = script.read_text(errors="replace")
    except OSError as err:
        return [CorpusRow(rel, "-", "", NO_KERNEL, f"cannot read it: {err.strerror or err}")]
    if "tilelang" not in text:
        return [CorpusRow(rel, "-", "", NO_KERNEL, "does not use TileLang (not run)")]
    parts = {p.lower() for p in Path(rel).parts[:-1]}
    foreign = sorted(parts & set(_NOT_CUDA_HINTS))
    if foreign:
        return [CorpusRow(rel, "-", "", SKIPPED, f"in a folder named {foreign[0]!r}: written for a non-CUDA "
                                                 "target; the corpus inspects CUDA kernels")]
    with tempfile.TemporaryDirectory(prefix="tilelab-corpus-") as tmp:
        out = Path(tmp) / "rows.jsonl"
        out.touch()
        env = dict(os.environ)
        env.setdefault("TILELAB_CACHE_DIR", str(Path(tmp) / "cache"))
        env.setdefault("CUDA_HOME", "/usr/local/cuda")
        env["TILELANG_PRINT_ON_COMPILATION"] = "0"
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "tilelab.engine.corpus", str(script), str(out), arch, str(grace_s),
               str(repeat)] + \
            (["lower-only"] if lower_only else []) + (["tests"] if is_test_file(script) else [])
        timed_out, rc, stderr = False, None, ""
        try:
            proc = subprocess.run(cmd, cwd=script.parent, env=env, capture_output=True, text=True, timeout=timeout_s)
            rc, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as err:
            timed_out = True
            stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
        return _rows_from(rel, out.read_text().splitlines(), rc, timed_out, timeout_s, stderr)


def run_corpus(directory: str | Path, *, jobs: int = 2, arch: str = DEFAULT_ARCH, timeout_s: float = 300.0,
               grace_s: float = 5.0, on_script: Callable[[list[CorpusRow]], None] | None = None,
               repeat: int = 1, only: Sequence[str] = (), lower_only: bool = False,
               tests: bool = False) -> list[CorpusRow]:
    """Every script under ``directory`` (or those whose path relative to it matches one of the
    ``only`` glob patterns), ``jobs`` at a time; rows in script order. Each kernel is lowered and
    inspected in ``repeat`` interleaved rounds. ``tests``: the pytest files (``test_*.py``) too,
    each running its test functions."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise NotADirectoryError(f"{directory}: not a directory; give the folder of TileLang example scripts")
    if repeat < 1:
        raise ValueError(f"repeat={repeat}: give at least 1 round of lowering and inspect per kernel")
    scripts = select_scripts(root, only, tests)
    results: dict[Path, list[CorpusRow]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_script, s, root, arch=arch, timeout_s=timeout_s, grace_s=grace_s, repeat=repeat,
                               lower_only=lower_only): s
                   for s in scripts}
        for future in concurrent.futures.as_completed(futures):
            rows = future.result()
            results[futures[future]] = rows
            if on_script is not None:
                on_script(rows)
    return [row for s in scripts for row in results[s]]


def totals(rows: list[CorpusRow]) -> dict[str, int]:
    """Rows by verdict; "lowered" (a --lower-only run's) only where there are such rows."""
    counts = collections.Counter(r.verdict for r in rows)
    return {v: counts.get(v, 0) for v in (*KERNEL_VERDICTS, NO_KERNEL, SKIPPED) if v != LOWERED or counts.get(v)}


def criterion(rows: Sequence[CorpusRow]) -> dict[str, int]:
    """The doctor's criterion over the compile failures among ``rows``: how many there are, how
    many name the pass, the kernel line, a known cause, and all three (explained)."""
    failed = [r for r in rows if r.verdict == CANNOT_LOWER]
    return {"failures": len(failed), "pass": sum(bool(r.pass_name) for r in failed),
            "line": sum(bool(r.line) for r in failed), "known cause": sum(bool(r.cause) for r in failed),
            "explained": sum(r.explained for r in failed)}


def rediagnosed(row: CorpusRow) -> CorpusRow:
    """A compile failure's row diagnosed again from what the row saved, without lowering anything:
    the catalogue's cause read from TileLang's sentence (``reason``) as the doctor reads it now.
    The pass and the line stay those the run found: a re-reading sees neither the trace nor the
    kernel, so it cannot supply them. A row whose run found a cause still in the catalogue keeps
    it (the run read the trace too: int4 through a TMA copy is told by the trace's frames, not the
    sentence). Other rows come back unchanged."""
    if row.verdict != CANNOT_LOWER:
        return row
    from .._tilelang import doctor as _doctor

    if row.cause and any(c.id == row.cause for c in _doctor.CAUSES):
        return row

    line = None
    number, _, text = row.line.partition(": ")
    if number.isdigit():
        line = ("", int(number), text)
    family = ("cuda" if row.target.startswith("sm_") else "cpu" if row.target in ("c", "llvm")
              else "hip" if row.target.startswith("gfx") else None)
    diagnosis = _doctor.diagnose(row.reason, pass_name=row.pass_name or None, target_family=family, line=line)
    return replace(row, cause=diagnosis.cause or "")


def render_criterion(groups: dict[str, Sequence[CorpusRow]]) -> str:
    """The criterion as a table, one row per group of rows (a corpus folder) and their total:
    counts and the share of the group's compile failures."""
    header = ("", "failures", "with pass", "with line", "known cause", "explained (all three)")
    keys = ("failures", "pass", "line", "known cause", "explained")
    table = []
    everything: list[CorpusRow] = []
    for label, rows in groups.items():
        everything += list(rows)
        table.append((label, criterion(rows)))
    if len(groups) > 1:
        table.append(("all", criterion(everything)))

    def cell(counts: dict[str, int], key: str) -> str:
        n, total = counts[key], counts["failures"]
        return str(n) if key == "failures" else f"{n} ({100 * n / total:.0f}%)" if total else "0"

    body = [(label, *(cell(counts, k) for k in keys)) for label, counts in table]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in [header, *body])


def format_ratio(row: CorpusRow) -> str:
    """The ratio column: the median ratio, and with several rounds their range, e.g. ``2.10 (1.9-2.4)``."""
    if row.ratio is None:
        return "-"
    spread = row.ratio_spread
    return f"{row.ratio:.2f}" + (f" ({spread[0]:.1f}-{spread[1]:.1f})" if spread else "")


def over_target(rows: list[CorpusRow], limit: float = 3.0) -> list[CorpusRow]:
    """Kernels whose (median) inspect/lower ratio exceeds ``limit``."""
    return [r for r in rows if r.ratio is not None and r.ratio > limit]


def _reason(row: CorpusRow) -> str:
    """The reason column; a compile failure adds its diagnosis: [cause] reason (pass, line N)."""
    if row.verdict != CANNOT_LOWER or not (row.cause or row.pass_name or row.line):
        return row.reason
    also = "".join(f" or {n}" for n in row.candidates)
    where = ", ".join(x for x in (row.pass_name, f"line {row.line.split(':', 1)[0]}{also}" if row.line else "") if x)
    return f"[{row.cause or 'unknown cause'}] {row.reason}" + (f" ({where})" if where else "")


def render_table(rows: list[CorpusRow]) -> str:
    """The table: one line per kernel, then the totals and the worst inspect/lower ratio."""
    header = ("script", "kernel", "target", "verdict", "lower s", "inspect s", "ratio", "reason")
    body = [(r.script, r.kernel, r.target, r.verdict,
             f"{r.lower_s:.2f}" if r.lower_s is not None else "-",
             f"{r.inspect_s:.2f}" if r.inspect_s is not None else "-",
             format_ratio(r), _reason(r)) for r in rows]
    widths = [max(len(h), *(len(str(b[i])) for b in body)) if body else len(h) for i, h in enumerate(header[:-1])]
    widths = [min(w, 60) for w in widths]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header[:-1], widths)) + "  " + header[-1]]
    for b in body:
        lines.append("  ".join(str(v)[:60].ljust(w) for v, w in zip(b[:-1], widths)) + "  " + str(b[-1]))
    t = totals(rows)
    lowered = t[OK] + t[MISMATCH] + t[INSPECT_ERROR]
    lines.append("")
    lines.append("total: " + ", ".join(f"{v} {n}" for v, n in t.items()) + f" ({len(rows)} rows)")
    if lowered:
        lines.append(f"consistent: {t[OK]}/{lowered} kernels that TileLang lowers ({100 * t[OK] / lowered:.1f}%)")
    failed = [r for r in rows if r.verdict == CANNOT_LOWER]
    if failed:
        explained = sum(r.explained for r in failed)
        with_cause = sum(bool(r.cause) for r in failed)
        with_pass = sum(bool(r.pass_name) for r in failed)
        with_line = sum(bool(r.line) for r in failed)
        lines.append(f"explained: {explained}/{len(failed)} compile failures name the pass, the line and a known cause "
                     f"({100 * explained / len(failed):.1f}%); with a known cause: {with_cause}, "
                     f"the pass: {with_pass}, the line: {with_line}")
    ratios = [r for r in rows if r.ratio is not None]
    if ratios:
        worst = max(ratios, key=lambda r: r.ratio or 0)
        ordered = sorted(r.ratio or 0 for r in ratios)
        rounds = max(len(r.round_ratios) or 1 for r in ratios)
        lines.append(f"inspect/lower time ratio: median {ordered[len(ordered) // 2]:.2f}, worst {format_ratio(worst)} "
                     f"({worst.script} {worst.kernel}: {worst.inspect_s:.2f} s vs {worst.lower_s:.2f} s)"
                     + (f"; each the median of {rounds} interleaved rounds" if rounds > 1 else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
