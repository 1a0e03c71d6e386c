"""The options of ``%%tilelang``: one parser (its help is ``%%tilelang?``) and one frozen record.

:func:`parse_cell_line` turns the magic's line into a :class:`CellOptions`, with every check the
line gets before the cell runs; a bad option raises :class:`CellUsageError`, whose message names
the option and says what to give instead. Needs no IPython shell (only IPython's argument parser).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..records.errors import TargetError, TilelabError
from ..records.kernel import BACKENDS

SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")

_SIZES_FORM = ('--sizes takes NAME=INT pairs separated by commas, several size sets separated by ";" '
               '(e.g. "M=1024,N=512" or "M=1024;M=2048")')


class CellUsageError(TilelabError, ValueError):
    """An option or argument of a ``%%tilelang`` line that cannot be used; the message is the
    whole explanation, naming the option (the magic shows it as IPython's UsageError)."""


@dataclass(frozen=True)
class CellOptions:
    """One ``%%tilelang`` line, parsed and checked. ``None`` means "not given" (the default)."""

    line: str = ""  # the line as typed, after %%tilelang
    target: str | None = None  # a registered target's name (tilelab.targets)
    backend: str | None = None
    out_idx: tuple[int, ...] | None = None
    pass_configs: dict[str, Any] = field(default_factory=dict)
    kernel: str | None = None  # --kernel NAME
    args: str | None = None  # --args text, evaluated in the user's namespace after the cell ran
    show: tuple[str, ...] | None = None  # the inspector tabs, in order
    no_compile: bool = False
    force: bool = False
    quiet: bool = False
    run: bool = False
    ref: str | None = None  # --ref expression, evaluated like --args
    bench: bool = False
    sizes: tuple[dict[str, int], ...] = ()  # one dict per --sizes set
    rep_ms: float | None = None
    sass: bool = False
    passes: bool = False
    profile: bool = False
    timeout: float | None = None
    in_process: bool = False
    sanitize: str | None = None  # a compute-sanitizer tool
    trace: bool = False  # --trace: which elements each block read and wrote (on the CPU)
    timeline: tuple[int, ...] | None = None  # --timeline: the blocks whose warps record phases
    device: str | None = None  # --device cpu: --run runs the tile program on the CPU (None: the GPU, if any)
    blocks: tuple[int, ...] | None = None  # --blocks: the blocks a CPU --run runs (None: all)

    @property
    def launches(self) -> bool:
        """Whether the line asks to launch the kernel (--run, --bench, --profile, --sanitize, --trace,
        --timeline)."""
        return (self.run or self.bench or self.profile or self.sanitize is not None or self.trace
                or self.timeline is not None)

    @property
    def build_options(self) -> tuple:
        """The options that shape the build (the cache key's share): not --show/--quiet/--force/
        --run/--bench and the other launch options."""
        return (self.target, self.backend, list(self.out_idx) if self.out_idx is not None else None,
                sorted((k, repr(v)) for k, v in self.pass_configs.items()), self.kernel, self.sass, self.passes)


_ARGUMENTS: list[Callable[[Any], Any]] = [
    magic_arguments(),
    argument("--target", default=None,
             help='target to inspect/compile for: a CUDA arch ("sm_90a", "sm_80"), an AMD one ("gfx942"), '
                  '"metal", or "c" (the CPU, which --run/--bench launch here) (default: the GPU here, else sm_90a)'),
    argument("--backend", default=None, choices=BACKENDS,
             help="execution backend when compiling (default tvm_ffi; cython for target c)"),
    argument("--out-idx", default=None, metavar="IDX", help="output parameter index or indices, e.g. -1 or 0,2"),
    argument("--pass-config", action="append", metavar="KEY=VALUE", help="a TileLang pass config (repeatable)"),
    argument("--kernel", default=None, metavar="NAME", help="the kernel to show when the cell defines several"),
    argument("--args", default=None, metavar='"..."',
             help='arguments specialising a @tilelang.jit kernel or a kernel factory, e.g. --args "1024, 1024, 1024"'),
    argument("--show", default=None, metavar="TABS",
             help="comma-separated tabs: summary,cuda,launcher,tma,wgmma,layouts,arguments"),
    argument("--no-compile", action="store_true", help="inspect only, even on a GPU"),
    argument("--force", action="store_true", help="bypass the caches: re-inspect and recompile"),
    argument("--quiet", action="store_true",
             help="show nothing; still binds the kernels (a failed --run is still printed)"),
    argument("--run", action="store_true",
             help="launch the kernel once and check it (on the GPU; on the CPU with --device cpu or --target c, "
                  "or where there is no GPU)"),
    argument("--device", default=None, choices=("cpu", "cuda"),
             help="--run: cpu runs a GPU kernel's tile program on the CPU (tilelab.run(device='cpu')): any "
                  "machine, the kernel's meaning, not the GPU's timing (default: the GPU, if there is one)"),
    argument("--blocks", default=None, metavar="BLOCKS",
             help="with --device cpu: the blocks --run runs, linear indices separated by commas (e.g. 0,63); "
                  "only what they write is checked (default: every block)"),
    argument("--ref", default=None, metavar="EXPR",
             help="a Python expression giving the reference callable for --run, e.g. --ref torch.matmul"),
    argument("--bench", action="store_true", help="time the kernel (on the GPU, or on the CPU with --target c)"),
    argument("--sizes", default=None, metavar='"M=1024,N=..."',
             help='sizes of dynamic dimensions for --run/--bench; several sets separated by ";" '
                  '(e.g. "M=1024;M=2048")'),
    argument("--rep-ms", default=None, metavar="MS",
             help="--bench: milliseconds of timed repetitions per round (default: bench's; on a GPU 1 s rounds "
                  "after a warm-up to its steady state, until the median is known to +-0.5%%, at most 4; "
                  "with --target c, 100 ms)"),
    argument("--sass", action="store_true",
             help="also compile with the CUDA toolkit: PTX, SASS, registers, spills, occupancy, Python-line links"),
    argument("--passes", action="store_true", help="record TileLang's lowering pass by pass (IR passes tab)"),
    argument("--profile", action="store_true",
             help="profile one launch with Nsight Compute (GPU and ncu only); implies --sass, whose line "
                  "links carry the profile's hot lines onto the cell"),
    argument("--timeout", default=None, metavar="S",
             help="--run/--bench: seconds before a launch that has not finished is stopped (default 30 for --run)"),
    argument("--in-process", action="store_true",
             help="--run/--bench: launch in this Python process instead of tilelab's worker process"),
    argument("--sanitize", nargs="?", const="memcheck", default=None, metavar="TOOL",
             help="run the kernel once under compute-sanitizer: memcheck (default), racecheck, synccheck or initcheck"),
    argument("--trace", action="store_true",
             help="launch once on the CPU (the tile program's meaning) recording which elements of each tensor "
                  "every block read and wrote (tilelab.trace_tiles) and show it"),
    argument("--timeline", nargs="?", const="0", default=None, metavar="BLOCKS",
             help="run the kernel once instrumented and add a Timeline tab: each phase (barrier waits, TMA issue, "
                  "MMA, epilogue) of the warp groups of BLOCKS (linear block indices, e.g. 0,5; default 0) in time"),
]


def _tilelang(line: str, cell: str) -> None:
    """Run the cell, inspect the TileLang kernels it defines, and show the kernel inspector.

    Kernels are the ``T.prim_func``s and ``@tilelang.jit`` functions the cell defines (a plain
    factory returning a prim_func counts when ``--args`` is given). With a GPU they are
    compiled: a ``T.prim_func`` is replaced by its compiled kernel; a factory or jit function
    is left alone and its compiled kernel is bound under the kernel's own name (or
    ``<factory>_kernel`` when that name is taken). Without a GPU they are inspected for the target.
    """


_tilelang.__name__ = "tilelang"  # what the help's usage line calls it
# The decorators as written above a function, applied bottom first: the parser and the help.
for _decorate in reversed(_ARGUMENTS):
    _tilelang = _decorate(_tilelang)
PARSER = _tilelang.parser  # type: ignore[attr-defined]
HELP: str = _tilelang.__doc__ or ""


def parse_cell_line(line: str) -> CellOptions:
    """The options of a ``%%tilelang`` line (the text after the magic's name), checked."""
    try:
        namespace = parse_argstring(_tilelang, line)
    except UsageError as err:
        raise CellUsageError(f"%%tilelang: {err}. Valid options: {valid_options()}") from None
    try:
        return options_from_namespace(namespace, line)
    except CellUsageError as err:  # every option error says whose option it is
        message = str(err)
        if message.startswith("%%tilelang"):
            raise
        raise CellUsageError(f"%%tilelang {message}") from None


def options_from_namespace(ns: Any, line: str = "") -> CellOptions:
    """The record of an argparse namespace of :data:`PARSER`, with every option checked."""
    text = {name: _unquote(getattr(ns, name)) for name in
            ("target", "out_idx", "kernel", "args", "show", "sizes", "ref", "rep_ms", "timeout", "sanitize")}
    return CellOptions(
        line=line.strip(), target=_parse_target(text["target"]), backend=ns.backend,
        out_idx=_parse_out_idx(text["out_idx"]),
        pass_configs=_parse_pass_configs([_unquote(v) for v in ns.pass_config or ()]),
        kernel=text["kernel"], args=text["args"], show=_parse_show(text["show"]),
        no_compile=ns.no_compile, force=ns.force, quiet=ns.quiet, run=ns.run, ref=text["ref"], bench=ns.bench,
        sizes=_parse_sizes(text["sizes"]), rep_ms=_parse_rep_ms(text["rep_ms"]), sass=ns.sass or ns.profile,
        passes=ns.passes,
        profile=ns.profile, timeout=_parse_timeout(text["timeout"]), in_process=ns.in_process,
        sanitize=_parse_sanitize(text["sanitize"]),
        trace=_parse_trace(ns.trace, text["target"]), timeline=_parse_timeline(_unquote(ns.timeline)),
        device=_parse_device(ns.device, ns.bench, ns.profile, ns.sanitize),
        blocks=_parse_blocks(_unquote(ns.blocks), ns.device),
    )


def _parse_device(device: str | None, bench: bool, profile: bool, sanitize: Any) -> str | None:
    """--device cpu runs the tile program: nothing of it times or profiles the GPU."""
    if device == "cpu":
        asked = [name for name, on in (("--bench", bench), ("--profile", profile), ("--sanitize", sanitize)) if on]
        if asked:
            raise CellUsageError(f"--device cpu runs the kernel's tile program on the CPU, which says nothing of the "
                                 f"GPU's timing, counters or races: drop {', '.join(asked)}, or --device cpu")
    return device


def _parse_blocks(text: str | None, device: str | None) -> tuple[int, ...] | None:
    """--blocks: linear block indices separated by commas, for a CPU --run."""
    if text is None:
        return None
    if device != "cpu":
        raise CellUsageError("--blocks chooses the blocks of a CPU run: add --device cpu (on a GPU every block runs)")
    try:
        blocks = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise CellUsageError(f"--blocks takes linear block indices separated by commas (e.g. --blocks 0,63), "
                             f"not {text!r}") from None
    if not blocks or any(b < 0 for b in blocks):
        raise CellUsageError(f"--blocks takes non-negative block indices (e.g. --blocks 0,63), not {text!r}")
    return blocks


def _parse_timeline(text: str | None) -> tuple[int, ...] | None:
    """--timeline's blocks: linear block indices separated by commas."""
    if text is None:
        return None
    try:
        blocks = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise CellUsageError(f"--timeline takes linear block indices separated by commas (e.g. --timeline=0,5), "
                             f"not {text!r}") from None
    if not blocks or any(b < 0 for b in blocks):
        raise CellUsageError(f"--timeline takes non-negative block indices (e.g. --timeline=0,5), not {text!r}")
    return blocks


def valid_options() -> str:
    """``--target TARGET, --backend {tvm_ffi,...}, ...``: every option, for error messages."""
    parts = []
    for action in PARSER._actions:
        if not action.option_strings or "-h" in action.option_strings:
            continue
        opt = max(action.option_strings, key=len)
        if action.choices:
            opt += " {" + ",".join(map(str, action.choices)) + "}"
        elif action.nargs != 0:
            opt += " " + (action.metavar or action.dest.upper())
        parts.append(opt)
    return ", ".join(parts)


def _unquote(value: str | None) -> str | None:
    """IPython splits the line keeping quotes (--args "1, 2" arrives as '"1, 2"')."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _parse_target(text: str | None) -> str | None:
    """The registered target's name (tilelab.targets.parse_target, shared with the API and CLI)."""
    if text is None:
        return None
    from ..targets import parse_target

    try:
        return parse_target(text).name
    except TargetError as err:
        raise CellUsageError(f"%%tilelang --target {text!r}: {err}") from None


def _parse_out_idx(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return tuple(value)
    raise CellUsageError("--out-idx takes an integer or a comma-separated list of integers (e.g. -1 or 0,2); "
                         f"got {text!r}")


def _parse_pass_configs(items: list[str | None]) -> dict[str, Any]:
    if not items:
        return {}
    from .. import _tilelang

    known = _tilelang.known_pass_config_keys()
    configs: dict[str, Any] = {}
    for item in items:
        key, sep, raw = (item or "").partition("=")
        key = key.strip()
        if not sep or not key:
            raise CellUsageError(f"--pass-config takes KEY=VALUE (e.g. tl.disable_tma_lower=True); got {item!r}")
        if key not in known:
            raise CellUsageError(f"unknown pass config {key!r}. Valid keys: {', '.join(known)}")
        try:
            configs[key] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            configs[key] = raw.strip()
    return configs


def _parse_show(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    if not text.strip(" ,"):
        raise CellUsageError("%%tilelang --show: give at least one tab, e.g. --show summary,tma "
                             "(leave --show out for the default tabs)")
    from ..widgets.inspector import parse_tabs

    try:
        return parse_tabs(text)
    except ValueError as err:
        raise CellUsageError(f"%%tilelang --show: {err}") from None


def _parse_sizes(text: str | None) -> tuple[dict[str, int], ...]:
    """``"M=1024,N=512;M=2048,N=512"`` -> one dict per size set (none when not given)."""
    if not text:
        return ()
    sets: list[dict[str, int]] = []
    for group in text.split(";"):
        if not group.strip():
            raise CellUsageError(f"{_SIZES_FORM}; got an empty size set in {text!r}")
        sizes: dict[str, int] = {}
        for part in group.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip().isidentifier():
                raise CellUsageError(f"{_SIZES_FORM}; got {text!r}")
            try:
                sizes[name.strip()] = int(value)
            except ValueError:
                raise CellUsageError(f"--sizes: {name.strip()} must be an integer; got {value.strip()!r}") from None
        sets.append(sizes)
    return tuple(sets)


def _parse_rep_ms(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise CellUsageError(f"--rep-ms takes a positive number of milliseconds (e.g. 20); got {text!r}")
    return value


def _parse_timeout(text: str | None) -> float | None:
    """--timeout S: a positive, finite number of seconds."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise CellUsageError("%%tilelang --timeout: expected a positive number of seconds, e.g. --timeout 10; "
                             f"got {text!r}")
    return value


def _parse_sanitize(text: str | None) -> str | None:
    if text is not None and text not in SANITIZER_TOOLS:
        raise CellUsageError(f"%%tilelang --sanitize: unknown tool {text!r}; choose one of "
                             f"{', '.join(SANITIZER_TOOLS)} (or --sanitize alone for memcheck)")
    return text


__all__ = ["CellOptions", "CellUsageError", "HELP", "PARSER", "SANITIZER_TOOLS", "options_from_namespace",
           "parse_cell_line", "valid_options"]


def _parse_trace(trace: bool, target: str | None) -> bool:
    """--trace records a launch of the tile program on the CPU, whatever the target it was written
    for (a GPU kernel through the rules of tilelab.run(device="cpu"))."""
    return bool(trace)
