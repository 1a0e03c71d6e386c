"""Text parsing of what TileLang generates, in one place: its device source (CUDA and HIP), its
launchers (the host C++ of the cython and nvrtc backends, tvm_ffi's C, HIP's and the CPU's C) and
its ``#line`` directives. Each function's docstring names the text it reads.

- Device CUDA: where each ``__global__`` kernel is declared and what its body holds, the WGMMA calls
  with the descriptors they read, the lines that use a TMA descriptor or issue a WGMMA instruction,
  the line that carries a tile op (the lowering explainer's evidence), whether a kernel multiplies
  matrices (for FLOP counts), and the ``#line`` directives that name the user's Python lines.
- Device HIP: the MFMA calls, the LDS buffers and the patterns of the LDS reads that fill MFMA
  operands (``tilelab.engine.mfma`` evaluates those reads under the bank model).
- Launchers: grid, block and dynamic shared memory of each ``cudaLaunchKernelEx``, the fields of
  each ``cuTensorMapEncode*`` call, the lines that encode each TMA descriptor, the lines that launch
  each kernel.

Pure text, no TileLang import. Two readings of the WGMMA calls live here on purpose, each serving
a different check: :func:`source_wgmma_calls` is what the IR readers hold their descriptor
associations against (``ir.wgmma_instructions``), and :func:`source_wgmma` is the corpus's own
ground truth (``python -m tilelab corpus``), which a report built from the IR must agree with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..records.machine import SourceOrigin

# The head of a kernel's declaration or definition: extern "C" __global__ void
# __launch_bounds__(256, 1) gemm_kernel(...
KERNEL_HEAD = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(")
# A definition: the head, its parameters, and the brace that opens the body.
KERNEL_DEFINITION = re.compile(KERNEL_HEAD.pattern + r"[^;{]*\)\s*\{")


def split_top_level(text: str) -> list[str]:
    """``text`` split at its top-level commas (not those inside brackets), each part stripped."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def source_kernels(device: str) -> list[str]:
    """Names of the ``__global__`` functions the device source declares or defines, in order."""
    names: list[str] = []
    for m in KERNEL_HEAD.finditer(device):
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def kernel_bodies(device: str) -> list[tuple[str, str]]:
    """(kernel name, body text) for each ``__global__`` definition: the text from the brace that
    opens it to the next definition (or the end of the source)."""
    found = list(KERNEL_DEFINITION.finditer(device))
    return [(m.group(1), device[m.end():found[i + 1].start() if i + 1 < len(found) else len(device)])
            for i, m in enumerate(found)]


def is_kernel_declaration(line: str) -> bool:
    """Whether a device-source line declares a kernel (its parameters name every descriptor)."""
    return "__global__" in line


def mentions(name: str) -> re.Pattern[str]:
    """An identifier ``name`` as a whole word (``A_desc``, not ``A_desc2`` or ``xA_desc``)."""
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![A-Za-z0-9])")


def descriptor_use_lines(lines: Sequence[str], name: str) -> tuple[int, ...]:
    """The 1-based device-source ``lines`` that use TMA descriptor ``name`` (``tl::tma_load(A_desc,
    ...)``, its prefetch), kernel declarations left out."""
    m = mentions(name)
    return tuple(n for n, line in enumerate(lines, 1)
                 if name in line and m.search(line) and not is_kernel_declaration(line))


def wgmma_lines(lines: Sequence[str], variant: str, instruction: str,
                descriptors: Sequence[tuple[int, int, int]]) -> tuple[int, ...]:
    """The 1-based device-source ``lines`` that issue the WGMMA ``instruction`` ("m64n128k16") of
    ``variant`` ("ss" or "rs"), or initialise one of its ``descriptors`` (layout type, LBO, SBO)."""
    shape = re.match(r"m(\d+)n(\d+)k(\d+)", instruction)
    issue = re.compile(rf"\btl::wgmma_{re.escape(variant)}<[^>]*?\b{shape.group(1)},\s*{shape.group(2)},\s*"
                       rf"{shape.group(3)}\b") if shape else re.compile(r"\btl::wgmma_")
    descs = [re.compile(rf"\binitialize_wgmma_descriptor<\s*{layout},\s*{lbo},\s*{sbo}\s*>")
             for layout, lbo, sbo in descriptors]
    return tuple(n for n, line in enumerate(lines, 1) if issue.search(line) or any(d.search(line) for d in descs))


_SOURCE_DESC_INIT = re.compile(
    r"tl::initialize_wgmma_descriptor<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\(\s*(\w+)\s*,\s*(?:\(\(void\*\)\(\(char\*\))?\(&\((?:\(\([^)]*\))?(\w+)\)?\[")
_SOURCE_WGMMA = re.compile(r"tl::wgmma_(ss|rs)<[^>]*>\(([^;]*)\);")
_SOURCE_DESC_USE = re.compile(r"uint64_t\(\s*(\w+)")


def source_wgmma_calls(device_source: str) -> dict[str, list[dict[str, Any]]]:
    """Per kernel, each ``tl::wgmma_ss/rs`` call of the generated CUDA in source order, with the
    ``(buffer, layout_type, lbo, sbo)`` of the latest ``tl::initialize_wgmma_descriptor`` of each
    descriptor variable it reads (the code generator gives every variable a distinct name)."""
    result: dict[str, list[dict[str, Any]]] = {}
    for name, body in kernel_bodies(device_source):
        events = sorted([(m.start(), "init", m) for m in _SOURCE_DESC_INIT.finditer(body)]
                        + [(m.start(), "mma", m) for m in _SOURCE_WGMMA.finditer(body)], key=lambda e: e[0])
        current: dict[str, tuple] = {}
        calls: list[dict[str, Any]] = []
        for _, kind, m in events:
            if kind == "init":
                layout, lbo, sbo, var, buffer = m.groups()
                current[var] = (buffer, int(layout), int(lbo), int(sbo))
                continue
            used = _SOURCE_DESC_USE.findall(m.group(2))
            if m.group(1) == "ss":
                a_var, b_var = (used + [None, None])[:2]
            else:
                a_var, b_var = None, (used + [None])[0]
            calls.append({"variant": m.group(1), "a_var": a_var, "b_var": b_var,
                          "a": current.get(a_var) if a_var else None, "b": current.get(b_var) if b_var else None})
        if calls or name not in result:
            result.setdefault(name, []).extend(calls)
    return result


_WGMMA_EVENT = re.compile(
    r"tl::initialize_wgmma_descriptor<(\d+), (\d+), (\d+)>\((\w+), (.*?)\);"
    r"|tl::wgmma_(ss|rs)<([^>]*)>\((.*?)\);")


def source_wgmma(device: str) -> list[tuple]:
    """One record per ``tl::wgmma_ss/rs`` call site: (kernel, instruction, variant, a_major, b_major,
    a operand, b operand), an operand being (buffer, layout type, LBO, SBO) of the descriptor its
    variable was last initialised to before the call, or None when it comes from registers."""
    sites = []
    for kernel, body in kernel_bodies(device):
        current: dict[str, tuple] = {}
        for m in _WGMMA_EVENT.finditer(body):
            if m.group(1) is not None:
                # (&(((half_t*)A_shared)[0])), at a byte offset ((void*)((char*)(&(...)) + 4096)),
                # or, for a statically declared buffer, (&(A_shared[0]))
                pointer = (re.search(r"\(\w+\s*\*\)(\w+)\)\[", m.group(5))
                           or re.search(r"&\((\w+)\[", m.group(5)))
                buffer = pointer.group(1) if pointer else None
                current[m.group(4)] = (buffer, int(m.group(1)), int(m.group(2)), int(m.group(3)))
                continue
            variant, params, args = m.group(6), split_top_level(m.group(7)), split_top_level(m.group(8))
            mm, nn, kk = params[3:6]
            tnsp_a, tnsp_b = params[6], params[7]  # rs keeps both template arguments (A's is false)

            def operand(expr: str, current: dict[str, tuple] = current) -> tuple | None:
                for ident in re.findall(r"[A-Za-z_]\w*", expr):
                    if ident in current:
                        return current[ident]
                return ("?", -1, -1, -1)

            a = operand(args[0]) if variant == "ss" else None
            b = operand(args[1])
            sites.append((kernel, f"m{mm}n{nn}k{kk}", variant, "MN" if tnsp_a == "true" else "K",
                          "MN" if tnsp_b == "true" else "K", a, b))
    return sites


# ---------------------------------------------------------------------------------------------
# The device source: lines that carry a tile op's evidence, GEMM calls, #line directives


def first_matching_line(device: Sequence[str], pattern: str, needle: str) -> tuple[int | None, str]:
    """The first of the device-source ``device`` lines that ``pattern`` matches (1-based) and its
    text, cut to 160 characters; ``needle`` is a literal every match contains, so the regex runs
    only on lines that hold it (the lowering explainer's evidence: ``tl::tma_load(A_desc, ...``)."""
    rx = re.compile(pattern)
    for i, line in enumerate(device):
        if needle in line and rx.search(line):
            return i + 1, line.strip()[:160]
    return None, ""


def vector_width(text: str) -> str:
    """How wide the accesses of one device-source line are, from the vector type its pointer cast
    names (``*(uint4*)(...)`` -> "16-byte vectors"): "scalar" when it names none, "" for no line."""
    m = re.search(r"\*\((u?int[124]|float[24]|half2|uint4|longlong4\w*|ulonglong4\w*)\*\)", text)
    sizes = {"uint1": 4, "uint2": 8, "uint4": 16, "int4": 16, "float2": 8, "float4": 16, "half2": 4, "int2": 8,
             "int1": 4}
    if m and m.group(1) in sizes:
        return f"{sizes[m.group(1)]}-byte vectors"
    if m and "longlong4" in m.group(1):
        return "32-byte vectors"
    return "scalar" if text else ""


# What a compiled kernel's source calls when it multiplies matrices on tensor cores (TileLang's
# tl::wgmma_ss/rs, tl::gemm_ss/rs/sr, tl::mma*, tcgen05 on Blackwell) or in inline PTX.
MATMUL_CALL = re.compile(
    r"\btl::(?:wgmma_\w+|gemm_\w+|mma\w*|tcgen05\w*|utcmma\w*)\b|\bwgmma\.mma_async\b|\bmma\.sync\b|"
    r"\bwmma::mma_sync\b|\bcute::gemm\b|\btcgen05\.mma\b")


def is_matrix_multiply(source: str | None) -> bool:
    """True when the generated source calls a matrix-multiply instruction or TileLang GEMM
    template (``#include`` lines, which every kernel carries, are ignored)."""
    if not source:
        return False
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#include"))
    return MATMUL_CALL.search(code) is not None


LINE_DIRECTIVE = re.compile(r'^\s*#line\s+(\d+)\s+"([^"]*)"\s*$')


def strip_line_directives(source: str, *, is_user_file=lambda path: True) -> tuple[str, tuple[SourceOrigin, ...]]:
    """The source without its ``#line`` directives, and which Python line each run of lines came from.

    Reads the device source TileLang generates with ``tl.emit_line_directives`` on: a directive
    (``#line 12 "/path/cell.py"``) before each statement it lowered from a Python line. A run
    belongs to its directive up to the next directive or up to the brace that closes a block opened
    before the run (what follows that brace was not generated by the directive's line).
    """
    kept: list[str] = []
    origins: list[SourceOrigin] = []
    current: tuple[str, int] | None = None
    start = depth = 0

    def close(last: int) -> None:
        if current is not None and last >= start + 1:
            origins.append(SourceOrigin(start + 1, last, current[0], current[1], bool(is_user_file(current[0]))))

    for raw in source.split("\n"):
        match = LINE_DIRECTIVE.match(raw)
        if match:
            close(len(kept))
            current, start, depth = (match.group(2), int(match.group(1))), len(kept), 0
            continue
        if current is not None:
            depth += raw.count("{") - raw.count("}")
            if depth < 0:
                close(len(kept))
                current = None
        kept.append(raw)
    close(len(kept))
    return "\n".join(kept), tuple(origins)


# ---------------------------------------------------------------------------------------------
# HIP device source: kernels, MFMA calls, LDS buffers and the reads that fill MFMA operands

MFMA_INTRINSIC = re.compile(
    r"__builtin_amdgcn_(?P<op>mfma_scale|smfmac|mfma)_(?P<out>f32|i32|f64)_(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)_?"
    r"(?P<in>[a-z0-9_]+?)\s*\("
)


def call_arguments(text: str) -> list[str]:
    """Top-level comma-separated arguments of a call whose '(' precedes ``text``; stops at ')'."""
    args: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    return args


def operand_buffer(expr: str) -> str:
    """The buffer an operand expression reads (``*(((float16x4*)B_local) + j_1)`` -> ``B_local``)."""
    stripped = re.sub(r"\(\s*[\w:]+\s*\*+\s*\)", " ", expr)  # drop pointer casts
    names = [n for n in re.findall(r"[A-Za-z_]\w*", stripped) if not re.fullmatch(r"(?:u?int|float|half|bfloat)\w*", n)]
    return names[0] if names else expr.strip()


def kernel_spans(source: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of each ``__global__`` function of a device source (CUDA or HIP): from
    its head to the next kernel's head (or the end of the source)."""
    spans = []
    starts = [(m.group(1), m.start()) for m in KERNEL_HEAD.finditer(source)]
    for i, (name, start) in enumerate(starts):
        spans.append((name, start, starts[i + 1][1] if i + 1 < len(starts) else len(source)))
    return spans


def kernel_at(spans: list[tuple[str, int, int]], pos: int) -> str | None:
    """The kernel of :func:`kernel_spans` whose text holds offset ``pos``, or None."""
    return next((name for name, start, end in spans if start <= pos < end), None)


def mfma_calls(source: str) -> list[dict[str, Any]]:
    """Every MFMA call site of a HIP device source (``__builtin_amdgcn_mfma_*(...)``): kernel,
    intrinsic, the three operand expressions, source line (1-based)."""
    spans = kernel_spans(source)
    calls = []
    for match in MFMA_INTRINSIC.finditer(source):
        args = call_arguments(source[match.end():])
        calls.append({
            "kernel": kernel_at(spans, match.start()),
            "intrinsic": match.group(0).rstrip("(").strip(),
            "operands": tuple(args[:3]),
            "line": source.count("\n", 0, match.start()) + 1,
        })
    return calls


def shared_buffers(source: str) -> dict[str, int]:
    """LDS buffers of a HIP device source and their byte offsets in the kernel's dynamic LDS block
    (``void* A_shared = ((void*)((char*)buf_dyn_shmem + 4096))``; static ``__shared__`` arrays at 0)."""
    found = {m.group(1): int(m.group(2) or 0) for m in re.finditer(
        r"void\*\s+(\w+)\s*=\s*\(\(void\*\)\(\(char\*\)buf_dyn_shmem(?:\s*\+\s*(\d+))?\)\)", source)}
    for m in re.finditer(r"__shared__\s+[\w\s]*?\s(\w+)\[", source):
        found.setdefault(m.group(1), 0)
    return found


# Lines of a HIP device source: a counted loop, and the LDS reads that fill operand registers.
LDS_LOOP = re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\)")
# *(uint2*)(A_local + (i * 4)) = *(uint2*)(((half_t*)A_shared) + (EXPR));
LDS_VECTOR_READ = re.compile(
    r"^\s*\*\((\w+)\*\)\((\w+) \+ .*?\)\s*=\s*\*\((\w+)\*\)\(\(\(([\w ]+?)\*\)(\w+)\) \+ (.+)\);\s*$")
# B_local[(j * 4) + local_id] = ((half_t*)B_shared)[EXPR];
LDS_SCALAR_READ = re.compile(r"^\s*(\w+)\[.*?\]\s*=\s*\(\(([\w ]+?)\*\)(\w+)\)\[(.+)\];\s*$")


# ---------------------------------------------------------------------------------------------
# Launchers (the host C++ of the cython/nvrtc backends, tvm_ffi's C, CuTeDSL's Python, HIP's)


def int_literal(text: str) -> int | None:
    """The integer a launcher expression spells (``256``, ``(int64_t)256``), or None for any other
    expression (``(M + 127) / 128``)."""
    text = re.sub(r"^\((?:u?int\d*_t|unsigned|int|long)\)\s*", "", text.strip())
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def launcher_launches(cpp: str) -> dict[str, dict[str, list[str] | str]]:
    """Grid, block and dynamic shared memory of each kernel launch in the C++ launcher: the
    ``cudaLaunchConfig_t config;`` block before each ``cudaLaunchKernelEx(&config, kernel, ...)``
    and each ``cudaLaunchCooperativeKernel`` call, as the expressions written there."""
    out: dict[str, dict[str, Any]] = {}
    for m in re.finditer(r"cudaLaunchKernelEx\(&config, (\w+)", cpp):
        block = cpp[:m.start()]
        start = block.rfind("cudaLaunchConfig_t config;")
        block = block[start:] if start >= 0 else block
        grid = re.findall(r"config\.gridDim = dim3\((.*?)\);", block)
        threads = re.findall(r"config\.blockDim = dim3\((.*?)\);", block)
        smem = re.findall(r"config\.dynamicSmemBytes = (.*?);", block)
        if grid and threads and smem:
            out[m.group(1)] = {"grid": split_top_level(grid[-1]), "block": split_top_level(threads[-1]),
                               "smem": smem[-1]}
    for m in re.finditer(r"cudaLaunchCooperativeKernel\(\(void\*\)(\w+), (.*?), \w+_args, (.*?), stream\)", cpp):
        dims = split_top_level(m.group(2))
        # grid_str, block_str are dim3(...) expressions
        found = re.findall(r"dim3\((.*?)\)", m.group(2))
        if len(found) == 2:
            out[m.group(1)] = {"grid": split_top_level(found[0]), "block": split_top_level(found[1]),
                               "smem": m.group(3)}
        elif len(dims) == 2:
            out[m.group(1)] = {"grid": [dims[0]], "block": [dims[1]], "smem": m.group(3)}
    return out


def launcher_tma(cpp: str) -> list[dict[str, Any]]:
    """Each ``cuTensorMapEncodeTiled/Im2col`` of the C++ launcher with the fields written for it
    (``A_desc_boxDim[2] = {64, 128};`` -> ``boxDim: [64, 128]``), integers where they are literals."""
    out = []
    for m in re.finditer(r"cuTensorMapEncode(Tiled|Im2col)\)\(\s*&(\w+),", cpp):
        kind, name = m.group(1), m.group(2)
        start = cpp.rfind(f"CUtensorMap {name};", 0, m.start())
        block = cpp[start:m.start()]
        fields: dict[str, Any] = {"name": name, "kind": "tiled" if kind == "Tiled" else "im2col"}
        for f in re.finditer(rf"\b{re.escape(name)}_(\w+?)(?:\[[^\]]*\])?\s*=\s*([^;]+);", block):
            value = f.group(2).strip()
            if value.startswith("{"):
                fields[f.group(1)] = [int_literal(v) if int_literal(v) is not None else v
                                      for v in split_top_level(value[1:-1])]
            else:
                iv = int_literal(value)
                fields[f.group(1)] = iv if iv is not None else value
        out.append(fields)
    return out


# Calls that build a CUtensorMap in each backend's launcher (C driver call, the tvm_ffi packed
# helper, CuTeDSL's Python helpers).
ENCODE_CALL = re.compile(
    r"cuTensorMapEncode(?:Tiled|Im2col)\s*\)?\s*\(|TVMFFIFunctionCall\(\s*__tvm_tensormap_create|create_tensor_map_\w+\s*\("
)


def declares(name: str) -> re.Pattern[str]:
    """A launcher line that declares (part of) descriptor ``name``."""
    # "CUtensorMap A_desc;", "void* A_desc = ...", "A_desc_type = ...", "A_desc__dtype, ... =",
    # "// Descriptor 0: A_desc (tensor: A)"
    n = re.escape(name)
    return re.compile(
        rf"(?<![\w]){n}(?:_\w*)?\s*(?:=(?!=)|;|,\s*\w+\s*=)|CUtensorMap\s+{n}\s*;|Descriptor\s+\d+:\s*{n}\b"
    )


def encode_calls(text: str, names: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """For each descriptor name, the (first, call, last) 1-based lines of launcher ``text`` that encode it.

    Found from the launcher text alone: each encode call is attributed to the descriptor it
    names (or, when the call names none, the nearest descriptor mentioned above it); the span
    starts at that descriptor's first declaration after the previous encode call.
    """
    lines = text.split("\n")
    calls: list[tuple[int, int]] = []  # (call line, end line), 0-based
    for i, line in enumerate(lines):
        if ENCODE_CALL.search(line):
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("(") - lines[j].count(")")
                if depth <= 0:
                    break
                j += 1
            calls.append((i, min(j, len(lines) - 1)))
    mention = {n: mentions(n) for n in names}
    prefixed = {n: re.compile(rf"(?<![\w]){re.escape(n)}_") for n in names}
    declare = {n: declares(n) for n in names}
    spans: dict[str, tuple[int, int, int]] = {}
    previous_end = -1
    # A name's regexes run only where the name occurs as a substring: with fifty descriptors the
    # regexes would otherwise run fifty times on every line of every launcher.
    for call, end in calls:
        owner = None
        segment = "\n".join(lines[call:end + 1])  # "\n" reads as a line edge to the lookarounds
        for n in names:  # named inside the call itself
            if n in segment and (mention[n].search(segment) or prefixed[n].search(segment)):
                owner = n
                break
        if owner is None:  # nearest mention above, back to the previous call
            for k in range(call - 1, previous_end, -1):
                owner = next((n for n in names if n in lines[k] and mention[n].search(lines[k])), None)
                if owner:
                    break
        if owner is not None and owner not in spans:
            start = next((k for k in range(previous_end + 1, call + 1) if declare[owner].search(lines[k])), call)
            spans[owner] = (start + 1, call + 1, end + 1)
        previous_end = end
    return spans


def encode_spans(text: str, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each descriptor name, the (first, last) 1-based lines of launcher ``text`` that encode it."""
    return {n: (first, last) for n, (first, _, last) in encode_calls(text, names).items()}


# How each family's launchers start a device kernel (HIP's <<< >>>, the CPU's direct call,
# tvm_ffi's packed function handle); CUDA launchers are linked through their TMA encode calls.
LAUNCH_LINE = {
    "hip": r"{name}\s*<<<|TVMFFIFunctionCall\({name}_packed",
    "metal": r"TVMFFIFunctionCall\({name}_packed",
    "cpu": r"(?<![\w\"]){name}\s*\(",
}
# Lines that name a kernel without launching it: declarations, comments, the function's own head.
NOT_A_LAUNCH = re.compile(r"\s*(?:static|//|extern|int32_t\s+\w+\s*\()")


def kernel_launch_lines(text: str, family: str, kernels: Sequence[str]) -> dict[int, list[int]]:
    """1-based lines of a non-CUDA launcher ``text`` (of target ``family``: "hip", "metal", "cpu")
    that launch each of the device ``kernels`` -> the indices of the kernels they launch (empty for
    a family whose launches are not looked for)."""
    pattern = LAUNCH_LINE.get(family)
    found: dict[int, list[int]] = {}
    if pattern is None:
        return found
    for i, name in enumerate(kernels):
        regex = re.compile(pattern.format(name=re.escape(name)))
        for number, line in enumerate(text.split("\n"), 1):
            if regex.search(line) and not NOT_A_LAUNCH.match(line):
                found.setdefault(number, []).append(i)
    return found
