"""``%%tilelang --run/--bench/--profile/--sanitize``: launch a cell's kernel at each ``--sizes`` set.

:func:`launch_cell` returns one :class:`~tilelab.records.launch.Launches` record: the sanitizer
reports, runs, benches, profiles, timelines and traces, each in the order of the size sets (the
inspector shows them in its Timing, Profile and Timeline tabs); what the user must see even
with ``--quiet`` (a failed verification, a sanitizer verdict, why nothing was launched) goes
through ``say``. A launch that cannot be made as asked raises
:class:`~tilelab.cell.options.CellUsageError` saying which option to change.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from ..records.errors import TilelabError
from ..records.launch import Launches
from .kernels import Build, CellEntry, compile_one
from .options import CellUsageError

if TYPE_CHECKING:
    from ..records.profile import Profile


def launch_cell(entry: CellEntry, build: Build, ns: dict[str, Any], ref: Any,
                say: Callable[[str], None]) -> Launches:
    """Launch the shown kernel as the options ask, at every size set. Where the GPU launches cannot
    be made (no GPU, a target tilelab only inspects), --run and --trace still run the tile program
    on the CPU (tilelab.run(device="cpu")), and the result says so."""
    options = build.options
    on_cpu = options.device == "cpu" or (build.refusal is not None and options.device is None)
    gpu_only = [name for name, on in (("--bench", options.bench), ("--profile", options.profile),
                                      ("--sanitize", options.sanitize is not None),
                                      ("--timeline", options.timeline is not None)) if on]
    if build.refusal is not None and (options.device == "cuda" or gpu_only):
        say(f"%%tilelang: {', '.join(gpu_only) or '--run'} {'was' if len(gpu_only) < 2 else 'were'} skipped: "
            f"{build.refusal}; inspection still works (the inspector below shows what TileLang generated for the "
            "target)" + ("; --run and --trace run the tile program on the CPU" if options.device != "cuda" else "")
            + ".")
        if options.device == "cuda" or not (options.run or options.trace):
            return Launches()
    try:
        importlib.import_module("..launch", __package__)  # an install without torch has none
    except ImportError:
        say("%%tilelang: --run/--bench need tilelab.launch, which this install lacks.")
        return Launches()
    # A CPU run takes the kernel as the cell wrote it (its tile program): no GPU compile, no nvcc.
    kernel = ns[build.shown] if on_cpu else launchable_kernel(entry, build, ns)
    out = Launches()
    for sizes in options.sizes or ({},):
        try:
            out += _launch_at(kernel, build, sizes, ref, say, on_cpu)
        except TilelabError as err:  # first: its message already says what to change (a launch
            raise CellUsageError(f"%%tilelang --run/--bench: {err}") from None  # failure, a misaligned tensor)
        except (ValueError, TypeError) as err:
            raise CellUsageError(launch_message(err, sizes)) from None
    return out


def launchable_kernel(entry: CellEntry, build: Build, ns: dict[str, Any]) -> Any:
    """The shown kernel compiled with this cell's options (compiled now under --no-compile)."""
    from .. import _tilelang

    kernel = entry.compiled.get(build.shown)
    if kernel is not None:
        return kernel
    obj = ns[build.shown]
    return obj if _tilelang.kernel_kind(obj) == "compiled" else compile_one(obj, build)


class _Where(TypedDict):
    """Where a launch runs: in a worker process (``isolate``) with a ``timeout``, or in this one."""

    isolate: bool
    timeout: float | None


class _Rounds(TypedDict, total=False):
    """``--rep-ms``: the length of bench's timed rounds and of its warm-up."""

    rep_ms: float
    warmup_ms: float


def _as_keywords(sizes: dict[str, int]) -> Mapping[str, Any]:
    """``sizes`` to pass as ``**keywords``: they are named after the kernel's dimensions, which a type
    checker cannot tell apart from the launch functions' own keyword parameters."""
    return sizes


def _launch_at(kernel: Any, build: Build, sizes: dict[str, int], ref: Any, say: Callable[[str], None],
               on_cpu: bool = False) -> Launches:
    """The launches at one size set (on the CPU: the tile program's --run and --trace)."""
    from .. import launch

    options = build.options
    where: _Where = {"isolate": not options.in_process, "timeout": options.timeout}
    dims = _as_keywords(sizes)
    sanitized, runs, benches, profiles, timelines, traces = [], [], [], [], [], []
    if on_cpu:  # the GPU's launches were said skipped above
        if options.run:
            checked = launch.run(kernel, ref=ref, device="cpu", blocks=options.blocks, **where, **dims)
            runs.append(checked)
            if not checked.passed:
                head = repr(checked).split("\n", 1)[0]
                say(f"%%tilelang --run: {head}" + (f" at {sizes_text(sizes)}" if sizes else ""))
        if options.trace:
            traces.append(_traced(kernel, sizes, say))
        return Launches(runs=tuple(runs), traces=tuple(traces))
    if options.sanitize:
        found = launch.sanitize(kernel, tool=options.sanitize, **dims)
        sanitized.append(found)
        say(f"%%tilelang --sanitize: {repr(found).splitlines()[0]}")
    if options.run:
        checked = launch.run(kernel, ref=ref, **where, **dims)
        runs.append(checked)
        if not checked.passed:
            head = repr(checked).split("\n", 1)[0]
            say(f"%%tilelang --run: {head}" + (f" at {sizes_text(sizes)}" if sizes else ""))
    if options.bench:
        warmup_ms = min(launch.BenchOptions().warmup_ms, options.rep_ms or 0.0)  # the default, or shorter
        rounds: _Rounds = {"rep_ms": options.rep_ms, "warmup_ms": warmup_ms} if options.rep_ms else {}
        benches.append(launch.bench(kernel, **rounds, **where, **dims))
    if options.profile and (measured := _profiled(kernel, sizes, say)) is not None:
        from ..records.profile import measured_work

        profiles.append(measured)
        benches = [measured_work(b, measured) for b in benches]  # placed by the work the counters measured
    if options.trace:
        traces.append(_traced(kernel, sizes, say))
    if options.timeline is not None:  # --timeline: the Timeline tab (render/timeline.py)
        from ..launch._timeline import timeline

        timelines.append(timeline(kernel, blocks=options.timeline, **where, **dims))
    return Launches(tuple(sanitized), tuple(runs), tuple(benches), tuple(profiles), tuple(timelines), tuple(traces))


def _traced(kernel: Any, sizes: dict[str, int], say: Callable[[str], None]) -> Any:
    """``--trace``: the kernel's TileTrace; its problems are said (shown even with --quiet)."""
    from ..launch._api import trace_tiles

    traced = trace_tiles(kernel, **_as_keywords(sizes))
    problems = traced.problems()
    if problems:
        at = f" at {sizes_text(sizes)}" if sizes else ""
        say(f"%%tilelang --trace{at}: " + "; ".join(problems))
    return traced


def _profiled(kernel: Any, sizes: dict[str, int], say: Callable[[str], None]) -> Profile | None:
    """The profile of one launch; a profiler that cannot run says why and gives None."""
    from ..launch._profile import ProfileError, profile

    try:
        return profile(kernel, **_as_keywords(sizes))
    except ProfileError as err:
        say(f"%%tilelang --profile: {err}")
        return None


def sizes_text(sizes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


def launch_message(err: BaseException, sizes: dict[str, int]) -> str:
    """A launch's ValueError/TypeError as what to pass: a missing dynamic size names --sizes."""
    text = str(err)
    missing = re.search(r"size ([\w, ]+?) is dynamic", text)
    at = f" (at --sizes {sizes_text(sizes)!r})" if sizes else ""
    if missing:
        names = [n.strip() for n in missing.group(1).split(",") if n.strip()]
        example = ",".join(f"{n}=4096" for n in names)
        return (f"%%tilelang --run/--bench{at}: the kernel's size {', '.join(names)} is dynamic and was not given. "
                f'Pass it with --sizes "{example}" (several sets: "{names[0]}=1024;{names[0]}=4096").')
    return (f"%%tilelang --run/--bench{at}: {type(err).__name__}: {text}. Check --sizes (dynamic sizes), "
            "--ref (the reference's arguments and outputs) and --out-idx.")
