"""Causes by mechanism: what went wrong, read from the kernel's state at the failure.

The catalogue (:mod:`tilelab._tilelang.doctor`) recognises failures by TileLang's wording. The rules here
look at what the failure is made of instead: the pass that failed, the tile operation it stopped
at, that operation's buffers (their scopes, dtypes and shapes), a ``T.Parallel`` loop's variables
and the indices of each access, a ``T.Pipelined`` loop's annotations, the block's threads and the
target's instructions. TileLang's sentence is only evidence (it may say which check failed; the
rule still has to find the mechanism in the state). Each rule returns a :class:`Finding`: the
cause's id, what happened in this kernel's terms (which buffers, which loop, which two iterations
collide, which dimension does not divide), what to change, and the facts it used (``evidence``).

Pure: no TileLang import; the adapter gathers the state (:class:`tilelab._tilelang.doctor.TileSite`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "State", "RULES", "explain"]


@dataclass(frozen=True)
class State:
    """The kernel at the failure: TileLang's sentence (evidence), the pass, the tile op the trace
    names, the target (``sm_90a``, ``gfx942``) and family, the block's threads, every tile site in
    program order, and the site the failure was placed on (None when none was)."""

    message: str
    pass_name: str | None
    tile_op: str | None
    target: str | None
    family: str | None
    threads: int | None
    sites: tuple[Any, ...]
    site: Any = None


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    meaning: str
    advice: str
    evidence: tuple[str, ...] = ()
    site: Any = None  # the tile site it belongs to (its line is the failure's)


Rule = Callable[[State], "Finding | None"]
RULES: list[tuple[str, str, Rule]] = []  # (id, title, rule) in the order they are tried


def rule(id: str, title: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES.append((id, title, fn))
        return fn
    return register


def explain(state: State) -> Finding | None:
    """The first rule that finds its mechanism in ``state``."""
    for _, _, fn in RULES:
        try:
            found = fn(state)
        except Exception:  # a rule that cannot read this state says nothing
            found = None
        if found is not None:
            return found
    return None


# -- facts about the targets' instructions ----------------------------------------------------------------
def _arch_number(target: str | None) -> int:
    found = re.match(r"sm_(\d+)", target or "")
    return int(found.group(1)) if found else 0


def _bits(dtype: str) -> int:
    found = re.search(r"(\d+)", dtype)
    if dtype.startswith(("float8", "int8", "uint8")):
        return 8
    if dtype.startswith(("float4", "int4", "uint4")):
        return 4
    if dtype.startswith("float6"):
        return 6
    return int(found.group(1)) if found else 32


def _warp_size(state: State) -> int:
    return 64 if state.family == "hip" or (state.target or "").startswith("gfx") else 32


def _mma_dtypes(state: State) -> tuple[str, ...]:
    """Operand dtypes the target's matrix instruction takes (TileLang 0.1.15's lowering of T.gemm)."""
    if (state.target or "").startswith("gfx"):
        return ("float16", "bfloat16", "int8", "float32", "float8_e4m3fnuz", "float8_e5m2fnuz")
    number = _arch_number(state.target)
    base: tuple[str, ...] = ("float16", "bfloat16", "int8", "uint8", "float32")
    if number >= 89:
        base += ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e8m0fnu")
    if number >= 100:
        base += ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")
    return base


# What each tile operation or dtype needs of the target: (test on a site, the feature, the oldest
# CUDA arch with it, whether an AMD target has it).
_FEATURES: tuple[tuple[Callable[[Any], bool], str, int, bool], ...] = (
    (lambda s: "tcgen05" in s.op or any(b[2] == "shared.tmem" for b in s.buffers),
     "Blackwell's tensor-core MMA (tcgen05) and tensor memory", 100, False),
    (lambda s: "wgmma" in s.op, "Hopper's warpgroup MMA (WGMMA)", 90, False),
    (lambda s: "tma" in s.op, "TMA bulk copies", 90, False),
    (lambda s: "barrier" in s.op or "mbarrier" in s.op, "mbarriers", 90, False),
    (lambda s: "async_copy" in s.op, "cp.async asynchronous copies", 80, False),
    (lambda s: s.op.endswith("gemm") and any(re.match(r"float[46]_", b[1]) for b in s.buffers[:2]),
     "fp4/fp6 tensor-core operands", 100, False),
    (lambda s: s.op.endswith("gemm") and any(b[1].startswith("float8") for b in s.buffers[:2]),
     "fp8 tensor-core operands", 89, True),
)


def _gemms(state: State) -> list[Any]:
    return [s for s in state.sites if re.fullmatch(r"T\.(\w+_)?gemm(_sp)?", s.op) and len(s.buffers) >= 3]


def _in_failing_pass(state: State, *passes: str) -> bool:
    return state.pass_name in passes


def _elsewhere(state: State, site: Any) -> bool:
    """Whether the failure is at another operation than ``site``: the trace names a tile operation
    (a T.copy, a T.gemm) and ``site`` is not one of its kind. A T.Parallel's (or T.Pipelined's)
    failure is never elsewhere: its layout inference may fail for what a GEMM beside it chose."""
    op = state.tile_op or ""
    if not op.startswith("T.") or op in ("T.Parallel", "T.Pipelined"):
        return False
    for kind in ("gemm", "copy", "reduce"):
        if kind in op:
            return kind not in site.op
    return site.op != op


def _site_text(site: Any) -> str:
    return f"line {site.line}: {site.text.strip()}" if getattr(site, "text", "") else f"line {site.line}"


# -- the rules, most specific first ----------------------------------------------------------------------
@rule("feature-newer-arch", "an instruction of a newer architecture than the target")
def _newer_arch(state: State) -> Finding | None:
    number = _arch_number(state.target)
    amd = (state.target or "").startswith("gfx")
    if not number and not amd:
        return None
    for site in state.sites:
        if _elsewhere(state, site):
            continue
        for test, feature, oldest, on_amd in _FEATURES:
            if not _safe(test, site):
                continue
            if (amd and not on_amd) or (not amd and number < oldest):
                needs = f"sm_{oldest}" + ("a" if oldest in (90, 100) else "")
                dtypes = ", ".join(f"{b[0]} {b[1]}" for b in site.buffers[:3])
                return Finding(
                    "feature-newer-arch", "an instruction of a newer architecture than the target",
                    meaning=f"{site.op} at line {site.line} needs {feature}, which {needs} introduced; the kernel "
                            f"is lowered for {state.target}, which has no such instruction, so TileLang finds no "
                            f"way to lower it there",
                    advice=f"lower for {needs} or newer (target='{needs}'), or write the operation in the target's "
                           "terms: T.gemm and T.copy pick the instructions the target has (mma.sync and cp.async "
                           "on sm_80, MFMA on AMD), and fp16/bf16 operands where fp8/fp4 are not available",
                    evidence=(f"target {state.target}", f"{_site_text(site)}", f"operands: {dtypes}" if dtypes else
                              f"op {site.op}"),
                    site=site)
    return None


@rule("mma-dtype", "operand dtypes the target's matrix instruction does not take")
def _mma_dtype(state: State) -> Finding | None:
    allowed = _mma_dtypes(state)
    for site in _gemms(state):
        if _elsewhere(state, site):
            continue
        a, b = site.buffers[0], site.buffers[1]
        bad = [x for x in (a, b) if x[1] not in allowed]
        if not bad:
            continue
        names = ", ".join(f"{x[0]} is {x[1]}" for x in bad)
        return Finding(
            "mma-dtype", "operand dtypes the target's matrix instruction does not take",
            meaning=f"{site.op} at line {site.line} becomes {state.target}'s tensor-core instruction, which multiplies "
                    f"{', '.join(sorted(set(d for d in allowed if not d.endswith('fnuz'))))} operands; {names}",
            advice="give A and B a dtype the instruction takes (convert the tile while it is loaded: a T.copy into "
                   "a shared tile of that dtype, or a T.Parallel cast), or unpack packed 4-bit data into 8 or 16 "
                   "bits first; or lower for a target whose instruction takes it (fp8: sm_89+; fp4: sm_100a)",
            evidence=(f"target {state.target}", _site_text(site),
                      *(f"{x[0]}: {x[1]}, {x[2]}, shape {x[3]}" for x in (a, b))),
            site=site)
    return None


def _dims(shape: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", shape)] if not re.search(r"[A-Za-z_]", shape) else []


@rule("mma-tile-shape", "a GEMM tile the instruction's shape does not divide")
def _mma_tile(state: State) -> Finding | None:
    if not _in_failing_pass(state, "tl.LayoutInference", "tl.LowerTileOp"):
        return None
    warp = _warp_size(state)
    for site in _gemms(state):
        a, b, c = (_dims(x[3]) for x in site.buffers[:3])
        if len(c) < 2 or len(a) < 2 or len(b) < 2:
            continue
        m, n = c[-2], c[-1]
        k = a[-1] if a[-2] == m else a[-2]
        bits = _bits(site.buffers[0][1])
        micro_k = max(1, 256 // max(bits, 1) // 1) if state.family == "cuda" else (16 if bits >= 16 else 32)
        micro_k = 16 if bits >= 16 else 32 if bits == 8 else 64
        problems = []
        threads = state.threads or 0
        warps = threads // warp if threads else 0
        if k % micro_k:
            problems.append(f"K={k} is not a multiple of {micro_k}, the K of one {site.buffers[0][1]} instruction")
        amd = (state.target or "").startswith("gfx")
        row, col = (16, 16) if amd else (16, 8)
        if m % row:
            problems.append(f"M={m} is not a multiple of {row}, the rows of one instruction")
        if n % col:
            problems.append(f"N={n} is not a multiple of {col}, the columns of one instruction")
        if warps and not problems and (m // row) * (n // col) % warps and not _splits(m // row, n // col, warps):
            problems.append(f"the {warps} warps of {threads} threads cannot split {m // row}x{n // col} "
                            f"instruction tiles evenly")
        if threads and threads % warp:
            lanes = "wavefronts" if amd else "warps"
            problems.append(f"threads={threads} is not a whole number of {warp}-lane {lanes}")
        elif threads and threads < warp:
            problems.append(f"threads={threads} is less than one {warp}-lane wavefront")
        if not problems and _arch_number(state.target) == 90 and "GMMA" in state.message:
            row_bytes = n * _bits(site.buffers[1][1]) // 8
            problems.append(f"B's rows of N={n} {site.buffers[1][1]} are {row_bytes} bytes, which no WGMMA "
                            "shared-memory layout (rows of 32, 64 or 128 swizzled bytes, or 16-byte core "
                            "matrices) tiles")
        if not problems:
            continue
        return Finding(
            "mma-tile-shape", "a GEMM tile the instruction's shape does not divide",
            meaning=f"{site.op} at line {site.line} computes a {m}x{n} tile with K={k} as many copies of "
                    f"{state.target}'s matrix instruction, split over the block's warps: " + "; ".join(problems),
            advice="choose block sizes that are multiples of the instruction's shape (block_M and block_N multiples "
                   f"of {max(row, col) * 2 if not amd else 32}, block_K a multiple of {micro_k}) and threads= a "
                   f"multiple of {warp * (4 if _arch_number(state.target) >= 90 else 1)} that divides them",
            evidence=(f"target {state.target}, threads {threads or '?'}", _site_text(site),
                      f"A {site.buffers[0][3]}, B {site.buffers[1][3]}, C {site.buffers[2][3]}"),
            site=site)
    return None


def _splits(rows: int, cols: int, warps: int) -> bool:
    return any(rows % a == 0 and cols % (warps // a) == 0 for a in range(1, warps + 1) if warps % a == 0)


@rule("threads-below-wavefront", "fewer threads than one warp or wavefront")
def _few_threads(state: State) -> Finding | None:
    warp = _warp_size(state)
    if not state.threads or state.threads % warp == 0:
        return None
    if state.pass_name not in ("tl.LayoutInference", "tl.LowerTileOp", "tl.ThreadSync", "tl.ThreadPartialSync"):
        return None
    kind = "wavefront" if warp == 64 else "warp"
    return Finding(
        "threads-below-wavefront", "fewer threads than one warp or wavefront",
        meaning=f"the block has {state.threads} threads, and {state.target} runs threads in {warp}-lane {kind}s; the "
                f"tile operations lay fragments and reductions out over whole {kind}s",
        advice=f"give the kernel threads= a multiple of {warp} "
               f"(threads={max(warp, state.threads // warp * warp or warp)}"
               f" or {2 * warp}..)",
        evidence=(f"target {state.target}", f"threads {state.threads}"),
        site=state.site or _named_site(state) or next(iter(_gemms(state)), None))


@rule("accumulator-not-fragment", "T.gemm's accumulator is not a fragment")
def _accumulator(state: State) -> Finding | None:
    for site in _gemms(state):
        c = site.buffers[2]
        if "tcgen05" in site.op or c[2] in ("local.fragment", "shared.tmem"):
            continue
        if state.pass_name not in ("tl.LayoutInference", "tl.LowerTileOp", "elaboration"):
            continue
        return Finding(
            "accumulator-not-fragment", "T.gemm's accumulator is not a fragment",
            meaning=f"{site.op} at line {site.line} writes its result into registers spread over the block's threads "
                    f"in the instruction's layout, so C must be a register fragment; {c[0]} is {c[2]}",
            advice=f"allocate {c[0]} with T.alloc_fragment({c[3]}, {c[1]}) and copy it out with T.copy after the loop",
            evidence=(_site_text(site), f"{c[0]}: {c[1]} in {c[2]}, shape {c[3]}"), site=site)
    return None


@rule("gemm-k-mismatch", "T.gemm operands whose K extents differ")
def _gemm_k(state: State) -> Finding | None:
    # TileLang checks the K extents while it builds the kernel (its T.gemm reads transpose_A/B there):
    # a failure of a later pass is never this one
    if state.pass_name != "elaboration":
        return None
    for site in _gemms(state):
        notes = dict(site.annotations)
        ta, tb = notes.get("transpose_A") == "True", notes.get("transpose_B") == "True"
        a, b = _dims(site.buffers[0][3]), _dims(site.buffers[1][3])
        if len(a) < 2 or len(b) < 2:
            continue
        k_a = a[-2] if ta else a[-1]
        k_b = b[-1] if tb else b[-2]
        if k_a == k_b:
            continue
        return Finding(
            "gemm-k-mismatch", "T.gemm operands whose K extents differ",
            meaning=f"{site.op} at line {site.line} multiplies A {site.buffers[0][3]}"
                    f"{' (transposed)' if ta else ''} by B {site.buffers[1][3]}{' (transposed)' if tb else ''}: "
                    f"A's K is {k_a} and B's K is {k_b}; they must be the same extent",
            advice=f"give transpose_B={'False' if tb else 'True'} if B is stored N x K "
                   f"({'K x N' if tb else 'N x K'} otherwise), or allocate the tiles so that A's "
                   f"{'rows' if ta else 'columns'} and B's {'columns' if tb else 'rows'} are both block_K",
            evidence=(_site_text(site), f"A {site.buffers[0][0]} {site.buffers[0][3]}, transpose_A={ta}",
                      f"B {site.buffers[1][0]} {site.buffers[1][3]}, transpose_B={tb}"), site=site)
    return None


@rule("copy-between-memories", "a tile operation between memories it does not connect")
def _copy_scopes(state: State) -> Finding | None:
    first = state.site if state.site is not None else _named_site(state)
    for site in [first] + [s for s in state.sites if s.op in ("T.tma_copy", "T.async_copy") and s is not first]:
        found = _copy_site(state, site)
        if found is not None:
            return found
    return None


def _copy_site(state: State, site: Any) -> Finding | None:
    if site is None or len(site.buffers) < 2 or \
            not re.match(r"T\.(copy|reduce\w*|cumsum|async_copy|tma_copy)$", site.op):
        return None
    src, dst = site.buffers[0], site.buffers[1]
    pair = {src[2], dst[2]}
    amd = (state.target or "").startswith("gfx")
    reason = None
    if site.op == "T.async_copy" and (src[2] != "global" or not dst[2].startswith("shared") or amd):
        reason = (f"T.async_copy is cp.async, a load from global into shared memory on NVIDIA GPUs; {src[0]} is "
                  f"{src[2]} and {dst[0]} is {dst[2]}" + (f", and {state.target} has no cp.async" if amd else ""))
    elif site.op == "T.tma_copy" and not ({"global"} < pair and any(x.startswith("shared") for x in pair)):
        reason = (f"T.tma_copy is a TMA bulk copy, which moves a box between global and shared memory only; "
                  f"{src[0]} is {src[2]} and {dst[0]} is {dst[2]}")
    elif site.op == "T.tma_copy" and not amd and _arch_number(state.target) >= 90:
        box = _dims(dst[3] if dst[2].startswith("shared") else src[3])
        row_bytes = (box[-1] * _bits(dst[1]) // 8) if box else 0
        if box and (max(box) > 256 or row_bytes % 16):
            reason = (f"a TMA box has at most 256 elements a side and rows of a multiple of 16 bytes; the tile "
                      f"{dst[3]} of {dst[1]} has rows of {row_bytes} bytes")
        elif state.pass_name == "tl.LowerTileOp":
            reason = ("T.tma_copy is the asynchronous TMA bulk copy: it completes on an mbarrier the copy is given "
                      "(barrier=mbar[i]) and waited on, and it moves a whole box between global and shared memory; "
                      f"here it copies {src[0]} ({src[2]}) to {dst[0]} ({dst[2]})")
    if reason is None:
        return None
    return Finding(
        "copy-between-memories", "a tile operation between memories it does not connect",
        meaning=f"{site.op} at line {site.line}: {reason}",
        advice="use T.copy between other memories (it chooses the copy instruction), allocate the tiles in the "
               "memories the operation connects, or for T.tma_copy pass barrier=... and wait on it",
        evidence=(_site_text(site), *(f"{b[0]}: {b[1]} in {b[2]}, shape {b[3]}" for b in site.buffers[:2])), site=site)


@rule("codegen-intrinsic", "an intrinsic the target's code generator has no translation for")
def _codegen(state: State) -> Finding | None:
    if state.pass_name != "codegen":
        return None
    named = re.search(r'name="([\w.]+)"', state.message)
    for site in state.sites:
        if site.op.startswith("T.") or (named and site.op != named.group(1)):
            continue
        return Finding(
            "codegen-intrinsic", "an intrinsic the target's code generator has no translation for",
            meaning=f"every pass lowered the kernel, and the device code generator of {state.target} met {site.op} at "
                    f"line {site.line}, which it has no code for on this target",
            advice=f"leave {site.op} out of kernels for {state.target} (or guard it by target in the factory), or "
                   "lower for a target whose code generator emits it",
            evidence=(f"target {state.target}", _site_text(site)), site=site)
    return None


# -- layout inference of a T.Parallel loop -------------------------------------------------------------
def _buffer(state: State, name: str) -> tuple[str, str, str, str] | None:
    for site in state.sites:
        for b in site.buffers:
            if b[0] == name:
                return b
    return None


def _eval(indices: str, env: dict[str, int]) -> tuple[int, ...] | None:
    try:
        value = eval(indices, {"__builtins__": {}}, env)
    except Exception:
        return None
    return tuple(value) if isinstance(value, tuple) else (value,)


def _collision(loop_vars: Sequence[tuple[str, int]], indices: str,
               limit: int = 1 << 16) -> tuple[dict, dict, tuple] | None:
    """Two iterations of the loop that reach one element through ``indices``."""
    if any(extent <= 0 for _, extent in loop_vars):
        return None
    total = 1
    for _, extent in loop_vars:
        total *= extent
    if total > limit:
        return None
    seen: dict[tuple, dict] = {}
    names = [n for n, _ in loop_vars]
    for values in itertools.product(*(range(e) for _, e in loop_vars)):
        env = dict(zip(names, values))
        key = _eval(indices, env)
        if key is None:
            return None
        if key in seen:
            return seen[key], env, key
        seen[key] = env
    return None


def _iteration(env: dict) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in env.items()) + ")"


@rule("parallel-layout", "a T.Parallel loop whose accesses no thread layout fits")
def _parallel_layout(state: State) -> Finding | None:
    if state.pass_name not in ("tl.LayoutInference", "tl.FragmentLoopChecker"):
        return None
    loops = [s for s in state.sites if s.op == "T.Parallel" and s.loop_vars]
    if state.site is not None and getattr(state.site, "op", "") == "T.Parallel":
        loops = [state.site] + [s for s in loops if s is not state.site]
    for site in loops:
        var_names = {n for n, _ in site.loop_vars}
        names, extents = ", ".join(n for n, _ in site.loop_vars), ", ".join(str(e) for _, e in site.loop_vars)
        loop_text = f"for {names} in T.Parallel({extents})"
        by_buffer: dict[str, list[tuple[str, bool]]] = {}
        for name, indices, store in site.accesses:
            by_buffer.setdefault(name, []).append((indices, store))
        known = {n: _buffer(state, n) for n in by_buffer}
        frags = {n: b for n, b in known.items() if b is not None and b[2] in ("local.fragment", "shared", "shared.dyn")}
        # 1. a store that two iterations make to one element
        for name, uses in by_buffer.items():
            buf = frags.get(name)
            if buf is None or buf[2] != "local.fragment":
                continue
            for indices, store in uses:
                if not store:
                    continue
                hit = _collision(site.loop_vars, indices)
                if hit:
                    first, second, element = hit
                    return Finding(
                        "parallel-layout-not-injective", "a T.Parallel store that two iterations make to one element",
                        meaning=f"the loop {loop_text} at line {site.line} writes {name}[{indices}]; iterations "
                                f"{_iteration(first)} and {_iteration(second)} both write {name}"
                                f"[{', '.join(map(str, element))}], so the loop's iterations cannot be given to "
                                f"threads one element each: the layout of {name} ({buf[3]}, a fragment) cannot be a "
                                "one-to-one map of the loop, and layout inference cannot prove it injective",
                        advice=f"index {name} with every loop variable once (each iteration its own element), loop "
                               f"over {name}'s own shape {buf[3]}, or accumulate the colliding iterations "
                               "explicitly (a T.reduce_* over that dimension, or a T.serial loop inside each thread)",
                        evidence=(loop_text, f"store {name}[{indices}] into {buf[3]} {buf[2]}",
                                  f"{_iteration(first)} and {_iteration(second)} -> {name}"
                                  f"[{', '.join(map(str, element))}]"),
                        site=site)
        # 2. one fragment reached with two index patterns, or two fragments whose indices disagree
        for name, uses in by_buffer.items():
            buf = frags.get(name)
            if buf is None or buf[2] != "local.fragment":
                continue
            patterns = sorted({indices for indices, _ in uses})
            if len(patterns) > 1 and all(set(re.findall(r"[A-Za-z_]\w*", p)) <= var_names for p in patterns):
                return Finding(
                    "parallel-layout-conflict", "a fragment reached with two index patterns in one T.Parallel loop",
                    meaning=f"the loop {loop_text} at line {site.line} reads and writes fragment {name} ({buf[3]}) "
                            f"as {' and as '.join(f'{name}[{p}]' for p in patterns)}; a fragment's elements live "
                            "in fixed threads, and one thread layout of the loop cannot give each iteration both "
                            "elements, so layout inference finds the two uses in conflict",
                    advice=f"use one index pattern for {name} in this loop (copy it to shared memory with T.copy "
                           "and read the other pattern from there, or split the loop into two T.Parallel loops)",
                    evidence=(loop_text, *(f"{name}[{p}]" for p in patterns)), site=site)
        vectors = [(n, b) for n, b in frags.items() if b[2] == "local.fragment" and len(_dims(b[3])) == 1]
        matrices = [(n, b) for n, b in frags.items() if b[2] == "local.fragment" and len(_dims(b[3])) >= 2]
        if vectors and matrices:
            for vname, vbuf in vectors:
                vidx = by_buffer[vname][0][0]
                for mname, mbuf in matrices:
                    midx = [p.strip() for p in by_buffer[mname][0][0].split(",")]
                    if vidx.strip() in midx and midx.index(vidx.strip()) != 0 and len(site.loop_vars) >= 2:
                        return Finding(
                            "parallel-layout-conflict",
                            "a fragment reached with two index patterns in one T.Parallel loop",
                            meaning=f"in the loop {loop_text} at line {site.line}, {vname} ({vbuf[3]}) is indexed by "
                                    f"{vidx}, the column of {mname}[{', '.join(midx)}]; {vname} is laid out one value "
                                    f"per row (as a reduction over dim=1 leaves it: each row's threads hold its "
                                    f"value), and the threads holding column {vidx} of {mname} are not those, so no "
                                    "one thread layout serves both",
                            advice=f"index {vname} by the row ({vname}[{midx[0]}]) if it holds one value per row, or "
                                   f"make it a per-column vector (a reduction over dim=0), or keep {vname} in "
                                   "shared memory",
                            evidence=(loop_text, f"{vname}[{vidx}] ({vbuf[3]})", f"{mname}[{', '.join(midx)}] "
                                      f"({mbuf[3]})"), site=site)
    return None


# -- dtypes an instruction or intrinsic has no form for ---------------------------------------------------
# The accumulator dtypes the targets' matrix instructions write (mma.sync, WGMMA, MFMA alike)
_ACCUMULATORS = ("float32", "float16", "int32")


@rule("mma-accumulator-dtype", "a GEMM accumulator of a dtype the matrix instruction does not write")
def _mma_accumulator(state: State) -> Finding | None:
    if state.pass_name not in ("tl.LayoutInference", "tl.LowerTileOp"):
        return None
    allowed = _ACCUMULATORS
    for site in _gemms(state):
        c = site.buffers[2]
        # sums of products need range: an integer accumulator narrower than int32 or a float one narrower
        # than 8 bits has no instruction (float8 accumulators are converted by TileLang's lowering)
        narrow = _bits(c[1]) < 8 or (c[1].startswith(("int", "uint")) and c[1] != "int32")
        if _elsewhere(state, site) or c[1] in allowed or not narrow or "tcgen05" in site.op:
            continue
        return Finding(
            "mma-accumulator-dtype", "a GEMM accumulator of a dtype the matrix instruction does not write",
            meaning=f"{site.op} at line {site.line} accumulates into {c[0]}, a {c[1]} fragment; {state.target}'s "
                    f"matrix instruction writes its sums as {', '.join(allowed)} (the sum of many products "
                    f"needs their range), and TileLang has no instruction that accumulates in {c[1]}",
            advice=f"allocate {c[0]} as T.float32 (T.int32 for integer operands) and convert the result when it "
                   f"is stored (T.copy into a {c[1]} tile or tensor converts)",
            evidence=(f"target {state.target}", _site_text(site), f"{c[0]}: {c[1]} in {c[2]}, shape {c[3]}"),
            site=site)
    return None


# float types with no infinity: the finite-only fp8 formats (and their fnuz variants), fp6 and fp4
_FINITE = re.compile(r"float8_e4m3(fn|fnuz|b11fnuz)?$|float8_e5m2fnuz$|float8_e8m0fnu$|float6_\w+$|float4_\w+$")


@rule("no-infinity-dtype", "an infinity asked of a dtype that has none")
def _no_infinity(state: State) -> Finding | None:
    if state.pass_name != "tl.LowerIntrin":
        return None
    for site in state.sites:
        finite = [b for b in site.buffers if _FINITE.match(b[1])]
        calls = dict(site.annotations).get("calls", "").split(",")
        if not finite or not (any(c.endswith("infinity") for c in calls) or
                              re.search(r"\binfinity\s*\(", getattr(site, "text", "") or "")):
            continue
        b = finite[0]
        return Finding(
            "no-infinity-dtype", "an infinity asked of a dtype that has none",
            meaning=f"{site.op} at line {site.line} writes an infinity into {b[0]}, a {b[1]} buffer; {b[1]} is a "
                    "finite-only format (its largest exponent encodes numbers or NaN, not infinity), so there is no "
                    "value to lower T.infinity to",
            advice=f"keep {b[0]} in float32 (a running maximum or an accumulator wants the range anyway), or start "
                   f"from the format's most negative finite value (-T.max_value({b[1]})) instead of -infinity",
            evidence=(_site_text(site), f"{b[0]}: {b[1]} in {b[2]}, shape {b[3]}"), site=site)
    return None


# -- a GEMM's accumulator handed to another GEMM in registers ------------------------------------------
def _warp_split(state: State, site: Any) -> tuple[int, int, str] | None:
    """How T.gemm ``site`` splits the block's warps over its M x N tile, (m_warp, n_warp, instruction),
    as TileLang 0.1.15 lays out its accumulator: WGMMA on sm_90a (A and B in shared memory, 16- or
    8-bit, whole warpgroups, M a multiple of 64) gives each warpgroup 64-row slabs; mma.sync elsewhere
    splits by the GEMM's policy (FullRow: every warp its rows; Square: the split nearest the tile's
    shape in 16x8 instruction tiles). None where the state does not say."""
    notes = dict(site.annotations)
    threads, warp = state.threads or 0, _warp_size(state)
    m, n = int(notes.get("M", 0)), int(notes.get("N", 0))
    if not threads or threads % warp or not m or not n or (state.target or "").startswith("gfx"):
        return None
    warps, policy = threads // warp, notes.get("policy", "Square")
    a, b = site.buffers[0], site.buffers[1]
    if _arch_number(state.target) == 90 and warps % 4 == 0 and m % 64 == 0 and \
            all(x[2].startswith("shared") and _bits(x[1]) in (8, 16) for x in (a, b)):
        groups = warps // 4
        rows = max(g for g in range(1, groups + 1) if groups % g == 0 and m % (64 * g) == 0)
        if policy == "FullCol":
            rows = 1
        return 4 * rows, groups // rows, "WGMMA"
    if policy == "FullRow":
        rows = warps if m % (16 * warps) == 0 else max(1, m // 16)
        return rows, max(1, warps // rows), "mma.sync"
    if policy == "FullCol":
        cols = warps if n % (8 * warps) == 0 else max(1, n // 8)
        return max(1, warps // cols), cols, "mma.sync"
    best: tuple[float, int, int] | None = None
    for rows in range(1, min(m // 16, warps) + 1):
        cols = warps // rows
        if rows * cols != warps or cols > n // 8:
            continue
        balance = abs((m / (rows * 16)) / (n / (cols * 8)) - m / n)
        if best is None or balance < best[0]:
            best = (balance, rows, cols)
    return (best[1], best[2], "mma.sync") if best else None


@rule("gemm-operand-layout", "a GEMM's accumulator handed to another GEMM in registers of another layout")
def _gemm_operand_layout(state: State) -> Finding | None:
    if state.pass_name != "tl.LayoutInference":
        return None
    # a failure the trace places in a tile operation of its own (a T.gemm's operands) is that operation's
    op = state.tile_op or ""
    if op.startswith("T.") and op not in ("T.Parallel", "T.copy"):
        return None
    gemms = _gemms(state)
    made = {g.buffers[2][0]: g for g in gemms if g.buffers[2][2] == "local.fragment"}  # accumulator -> its GEMM
    taken: dict[str, tuple[Any, str]] = {}  # register operand -> (its GEMM, "A" or "B")
    for g in gemms:
        for role, x in (("A", g.buffers[0]), ("B", g.buffers[1])):
            if x[2] == "local.fragment":
                taken.setdefault(x[0], (g, role))
    if not made or not taken:
        return None
    # where an accumulator meets a register operand: a T.copy between them or a T.Parallel reaching both
    meetings = []
    for site in ([state.site] if state.site is not None else []) + list(state.sites):
        names = [b[0] for b in site.buffers] if site.op == "T.copy" else \
            [a[0] for a in site.accesses] if site.op == "T.Parallel" else []
        for c in dict.fromkeys(n for n in names if n in made):
            for r in dict.fromkeys(n for n in names if n in taken and n != c):
                if taken[r][0] is not made[c] and (site, c, r) not in meetings:
                    meetings.append((site, c, r))
    # TileLang's sentence, as evidence, may name the two fragments: then it is about those
    known = {b[0] for s in state.sites for b in s.buffers}
    said = {w for w in re.findall(r"\b\w+\b", state.message) if w in known}
    for site, c, r in meetings:
        if said and not {c, r} <= said:
            continue
        producer, (consumer, role) = made[c], taken[r]
        cbuf, rbuf = producer.buffers[2], next(b for b in consumer.buffers if b[0] == r)
        split = _warp_split(state, producer)
        reasons, fixes = [], []
        bits = _bits(rbuf[1])
        if bits != 16:
            per = f"{32 // bits} consecutive elements of a row" if bits < 32 else "one element"
            reasons.append(f"{r} is {rbuf[1]}: as a {bits}-bit {role} operand in registers it holds {per} in each "
                           f"32-bit register of a thread, while the accumulator {c} holds pairs of consecutive "
                           "columns, so the two layouts differ in every thread (they agree only for 16-bit operands)")
            fixes.append(f"make {r} float16 or bfloat16 (the T.copy into it converts)")
        if split is not None and split[1] > 1:
            policy = dict(producer.annotations).get("policy", "Square")
            reasons.append(f"{producer.op} at line {producer.line} computes {c} with {split[2]}, its {state.threads} "
                           f"threads split {split[0]} x {split[1]} warps over the {cbuf[3]} tile (policy {policy}), so "
                           f"each row of {c} is spread over {split[1]} warps; as {consumer.op}'s {role} operand in "
                           f"registers, every row of {r} must be whole in one warp (the warps that share rows hold "
                           "copies)")
            fixes.append("give the first GEMM (and the second) policy=T.GemmWarpPolicy.FullRow, so that each "
                         "warp computes whole rows")
        if dict(consumer.annotations).get(f"transpose_{role}") == "True":
            reasons.append(f"{consumer.op} reads {r} transposed (transpose_{role}=True): its register layout is "
                           f"that of the transpose, and {c}'s is not")
            fixes.append(f"store {r} the way {consumer.op} reads it and drop transpose_{role}")
        if not reasons:
            continue
        where = f"the T.copy at line {site.line}" if site.op == "T.copy" else f"the T.Parallel loop at line {site.line}"
        return Finding(
            "gemm-operand-layout", "a GEMM's accumulator handed to another GEMM in registers of another layout",
            meaning=f"{c} is the accumulator of {producer.op} at line {producer.line}, so it has that GEMM's "
                    f"accumulator layout; {r} is the {role} operand, in registers, of {consumer.op} at line "
                    f"{consumer.line}, so it has that GEMM's {role}-operand layout; {where} moves {c} into {r} "
                    "element by element, which needs each element of both in the same thread, and layout inference "
                    "finds the two layouts in conflict: " + "; ".join(reasons),
            advice="; or ".join(fixes) + f"; or stage {r} through shared memory (T.alloc_shared) so that "
                   f"{consumer.op} reads it from there",
            evidence=(_site_text(site), f"{c}: accumulator of {_site_text(producer)}",
                      f"{r}: {role} operand of {_site_text(consumer)}",
                      *((f"warps {split[0]} x {split[1]} ({split[2]}), threads {state.threads}",) if split else ()),
                      f"{r}: {rbuf[1]}, {c}: {cbuf[1]}"),
            site=site)
    return None


@rule("scope-for-op", "a tile operation given a buffer in a memory it does not take")
def _scope(state: State) -> Finding | None:
    if state.pass_name not in ("tl.LayoutInference", "tl.LowerTileOp", "elaboration"):
        return None
    site = state.site
    if site is None or not site.buffers:
        gemms = _gemms(state)
        site = gemms[0] if gemms else None
    if site is None:
        return None
    scopes = [b[2] for b in site.buffers]
    # a failure placed on one GEMM may be another's: TileLang infers every GEMM's layouts in one pass
    others = [g for g in _gemms(state) if g is not site] if \
        re.fullmatch(r"T\.(\w+_)?gemm", site.op) or "gemm" in (state.tile_op or "") else []
    for gemm in [site] + others:
        if not re.fullmatch(r"T\.(\w+_)?gemm", gemm.op) or len(gemm.buffers) < 3:
            continue
        wrong = [x for x in gemm.buffers[:2] if x[2] in ("local", "global")]
        if wrong:
            names = ", ".join(f"{x[0]} ({x[2]})" for x in wrong)
            return Finding(
                "scope-for-op", "a tile operation given a buffer in a memory it does not take",
                meaning=f"{gemm.op} at line {gemm.line} reads A and B from shared memory (or A from a register "
                        f"fragment), where every thread of the block can reach the tile; {names} is not",
                advice="allocate the operand with T.alloc_shared (or A with T.alloc_fragment) and T.copy the tile "
                       "into it; T.alloc_local is one thread's private memory",
                evidence=(_site_text(gemm), *(f"{x[0]}: {x[2]} {x[3]}" for x in gemm.buffers[:3])), site=gemm)
    if site.op.startswith("T.reduce") and scopes and any(x == "local" for x in scopes[:2]):
        odd = next(b for b in site.buffers[:2] if b[2] == "local")
        return Finding(
            "scope-for-op", "a tile operation given a buffer in a memory it does not take",
            meaning=f"{site.op} at line {site.line} reduces a register fragment spread over the threads into another "
                    f"fragment (or shared memory), combining what different threads hold; {odd[0]} is local, one "
                    "thread's private memory",
            advice=f"allocate {odd[0]} with T.alloc_fragment (T.copy a private tile into one first), then reduce",
            evidence=(_site_text(site), *(f"{b[0]}: {b[2]} {b[3]}" for b in site.buffers[:2])), site=site)
    return None


def _named_site(state: State) -> Any:
    """The first site of the operation TileLang's sentence or trace names (``T.tma_copy()``), or the
    only site; None otherwise."""
    named = set(re.findall(r"\bT\.(\w+)\(", state.message))
    if state.tile_op:
        named.add(state.tile_op.split(".", 1)[-1])
    for site in state.sites:
        if site.op.split(".", 1)[-1] in named:
            return site
    return state.sites[0] if len(state.sites) == 1 else None


def _safe(test: Callable[[Any], bool], site: Any) -> bool:
    try:
        return bool(test(site))
    except Exception:
        return False


# The order the rules are tried in: what the target lacks first, then what an operation's operands
# lack (memories, dtypes, shapes), then loops and annotations; the generic layout rule last.
_ORDER = ("feature-newer-arch", "mma-dtype", "mma-accumulator-dtype", "scope-for-op", "accumulator-not-fragment",
          "gemm-k-mismatch", "threads-below-wavefront", "mma-tile-shape",
          "copy-between-memories", "codegen-intrinsic", "parallel-layout", "gemm-operand-layout", "no-infinity-dtype")
RULES.sort(key=lambda r: _ORDER.index(r[0]) if r[0] in _ORDER else len(_ORDER))
