"""Pure data models: what TileLang generated for a kernel, as frozen, JSON-serialisable records.

Nothing here imports TileLang, IPython or ipywidgets. Every model round-trips through
``to_dict``/``from_dict`` (plain JSON types only), so a report can be saved, cached, diffed
and rendered in a process that never saw the kernel.

Symbolic sizes (a dynamic ``M``) are kept as strings (``"m"``, ``"m * 2"``); concrete ones are
ints. ``Dim`` names that union.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ..cuda_facts import CDNA_LDS_BANK_BYTES, CDNA_LDS_BANKS, SWIZZLE_SPAN_BYTES, TMA_DTYPE_BYTES
from .display import Displayed
from .machine import MachineCode, PassTrace
from .record import MAPPING, Record, custom
from .record import from_dict as _from_dict
from .record import to_dict as _to_dict

Dim = Union[int, str]  # noqa: UP007 (a runtime alias: int | str needs Python 3.10 where annotations do not)

SCHEMA_VERSION = 1
BACKENDS = ("tvm_ffi", "cython", "nvrtc", "cutedsl")


def _dims(values: Any) -> tuple[Dim, ...]:
    return tuple(v if isinstance(v, (int, str)) else int(v) for v in values)


# The lowering explainer's result (tilelab.engine.explain builds it).


@dataclass(frozen=True)
class TileOpPath(Record):
    """One tile op of the kernel and what it became."""

    op: str  # "T.copy A -> A_shared"
    path: str  # "TMA bulk copy", "cp.async", "plain loads (16-byte vectors)", "WGMMA", "MMA", "FMA", ...
    fast: bool  # True when this is the fastest path the target offers for the op
    evidence_line: int | None = None  # device-CUDA line that carries it
    evidence: str = ""
    reason: str = ""  # why not the fast path (empty when fast, or when tilelab cannot tell)
    stages: int | None = None


@dataclass(frozen=True)
class Lowering(Record):
    """The explainer's result for a kernel: per tile op, plus warp specialization and the pipeline."""

    ops: tuple[TileOpPath, ...] = ()
    warp_specialized: bool = False
    warp_specialization_reason: str = ""
    stages: int | None = None
    stage_bytes: int | None = None  # shared memory one pipeline stage holds (the copies' destinations)

    def __repr__(self) -> str:
        ops = "; ".join(f"{o.op}: {o.path}" for o in self.ops)
        ws = "warp-specialized" if self.warp_specialized else "not warp-specialized"
        stages = f", {self.stages} stages" if self.stages else ""
        return f"Lowering({ws}{stages}; {ops})"

    @property
    def fallbacks(self) -> tuple[TileOpPath, ...]:
        return tuple(o for o in self.ops if not o.fast)


@dataclass(frozen=True)
class DeviceKernel(Record):
    """One ``__global__`` function: its launch configuration as the host code sets it.

    ``programmatic_dependent_launch``: the kernel's code waits on the previous kernel of the
    stream (``T.pdl_sync``, compiled to ``cudaGridDependencySynchronize``).
    ``programmatic_serialization_by``: the backends whose launcher sets the launch attribute
    ``programmaticStreamSerializationAllowed``, which lets this kernel start before the previous
    one ends. The two differ: TileLang 0.1.15's cython launcher sets the attribute on every
    non-cooperative launch, a kernel that calls ``T.pdl_sync`` or not, while tvm_ffi never sets it.
    """

    name: str
    grid: tuple[Dim, Dim, Dim]
    block: tuple[Dim, Dim, Dim]
    dynamic_shared_memory_bytes: Dim = 0
    cluster_dims: tuple[int, int, int] | None = None
    programmatic_dependent_launch: bool = False
    cooperative: bool = False
    programmatic_serialization_by: tuple[str, ...] = ()

    @property
    def threads_per_block(self) -> Dim:
        x, y, z = self.block
        if all(isinstance(v, int) for v in self.block):
            return int(x) * int(y) * int(z)
        return f"{x} * {y} * {z}"


@dataclass(frozen=True)
class LauncherSource(Record):
    """Host launcher text of one execution backend, or the reason it could not be generated."""

    backend: str
    text: str | None
    reason: str | None = None
    language: str = "c++"  # "c", "c++" or "python": what a highlighter should use
    # further named texts (cutedsl: the C++ launcher)
    extra: tuple[tuple[str, str], ...] = field(default=(), metadata=MAPPING)

    def __repr__(self) -> str:
        if self.text is None:
            return f"LauncherSource({self.backend}: absent, {self.reason})"
        return f"LauncherSource({self.backend}: {self.language}, {self.text.count(chr(10)) + 1} lines; .text holds it)"


@dataclass(frozen=True)
class Sources(Record):
    device: str
    # written as an object keyed by backend
    launchers: tuple[LauncherSource, ...] = field(default=(), metadata=custom(
        lambda launchers: {item.backend: item.to_dict() for item in launchers},
        lambda d: tuple(LauncherSource.from_dict(v) for v in d.values())))

    def __repr__(self) -> str:
        """One line: the texts and their lengths (``.device``, ``.launcher(backend).text`` hold them)."""
        launchers = ", ".join(f"{x.backend} {x.text.count(chr(10)) + 1} lines" if x.text is not None
                              else f"{x.backend} absent" for x in self.launchers)
        return f"Sources(device: {self.device.count(chr(10)) + 1} lines; launchers: {launchers or 'none'})"

    def launcher(self, backend: str) -> LauncherSource | None:
        for item in self.launchers:
            if item.backend == backend:
                return item
        return None


@dataclass(frozen=True)
class TmaDescriptor:
    """A ``CUtensorMap`` as the host code encodes it (``cuTensorMapEncodeTiled``/``Im2col``).

    Dimensions are innermost first, as the driver takes them. ``global_stride_bytes[0]`` is the
    element size (TileLang's convention); the driver receives ``global_stride_bytes[1:]``.
    Enumerators are the driver's names with their prefix stripped.
    """

    name: str
    buffer: str | None
    kind: str  # "tiled" | "im2col"
    dtype: str
    rank: int
    global_dim: tuple[Dim, ...]
    global_stride_bytes: tuple[Dim, ...]
    element_strides: tuple[Dim, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str
    box_dim: tuple[Dim, ...] = ()
    lower_corner: tuple[int, ...] = ()
    upper_corner: tuple[int, ...] = ()
    channels_per_pixel: Dim | None = None
    pixels_per_column: Dim | None = None
    kernel: str | None = None
    problems: tuple[str, ...] = ()
    launch_conditions: tuple[str, ...] = ()  # rules that depend on sizes known only at launch

    def __repr__(self) -> str:
        """One line a person reads (every field stays an attribute; ``dataclasses.asdict`` has them all)."""
        box = "x".join(str(d) for d in self.box_dim) or "-"
        dims = "x".join(str(d) for d in self.global_dim)
        problems = f", {len(self.problems)} problem(s)" if self.problems else ""
        return (f"TmaDescriptor({self.name}: {self.kind} {self.dtype} of {self.buffer or '?'} [{dims}], box {box}, "
                f"swizzle {self.swizzle}{problems})")

    @property
    def element_bytes(self) -> float | None:
        return TMA_DTYPE_BYTES.get(self.dtype)

    @property
    def swizzle_span_bytes(self) -> int | None:
        return SWIZZLE_SPAN_BYTES.get(self.swizzle)

    @property
    def inner_box_elements(self) -> Dim | None:
        if self.kind == "im2col":
            return self.channels_per_pixel
        return self.box_dim[0] if self.box_dim else None

    @property
    def inner_box_bytes(self) -> float | None:
        inner, size = self.inner_box_elements, self.element_bytes
        if isinstance(inner, int) and size is not None:
            return inner * size
        return None

    @property
    def box_elements(self) -> int | None:
        if self.kind == "im2col":
            c, p = self.channels_per_pixel, self.pixels_per_column
            return c * p if isinstance(c, int) and isinstance(p, int) else None
        if not self.box_dim or not all(isinstance(b, int) for b in self.box_dim):
            return None
        total = 1
        for b in self.box_dim:
            total *= int(b)
        return total

    @property
    def box_bytes(self) -> float | None:
        n, size = self.box_elements, self.element_bytes
        return n * size if n is not None and size is not None else None

    def derived(self) -> dict[str, Any]:
        return {
            "element_bytes": self.element_bytes,
            "box_elements": self.box_elements,
            "box_bytes": self.box_bytes,
            "inner_box_bytes": self.inner_box_bytes,
            "swizzle_span_bytes": self.swizzle_span_bytes,
        }

    # hand-written: the derived sizes go under "derived", and the im2col fields only for im2col
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "buffer": self.buffer,
            "kind": self.kind,
            "kernel": self.kernel,
            "dtype": self.dtype,
            "rank": self.rank,
            "global_dim": list(self.global_dim),
            "global_stride_bytes": list(self.global_stride_bytes),
            "box_dim": list(self.box_dim),
            "element_strides": list(self.element_strides),
            "interleave": self.interleave,
            "swizzle": self.swizzle,
            "l2_promotion": self.l2_promotion,
            "oob_fill": self.oob_fill,
            "problems": list(self.problems),
            "launch_conditions": list(self.launch_conditions),
            "derived": self.derived(),
        }
        if self.kind == "im2col":
            d.update(
                lower_corner=list(self.lower_corner),
                upper_corner=list(self.upper_corner),
                channels_per_pixel=self.channels_per_pixel,
                pixels_per_column=self.pixels_per_column,
            )
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TmaDescriptor:
        return cls(
            name=d["name"],
            buffer=d.get("buffer"),
            kind=d["kind"],
            kernel=d.get("kernel"),
            dtype=d["dtype"],
            rank=int(d["rank"]),
            global_dim=_dims(d["global_dim"]),
            global_stride_bytes=_dims(d["global_stride_bytes"]),
            box_dim=_dims(d.get("box_dim", ())),
            element_strides=_dims(d["element_strides"]),
            interleave=d["interleave"],
            swizzle=d["swizzle"],
            l2_promotion=d["l2_promotion"],
            oob_fill=d["oob_fill"],
            lower_corner=tuple(int(v) for v in d.get("lower_corner", ())),
            upper_corner=tuple(int(v) for v in d.get("upper_corner", ())),
            channels_per_pixel=d.get("channels_per_pixel"),
            pixels_per_column=d.get("pixels_per_column"),
            problems=tuple(d.get("problems", ())),
            launch_conditions=tuple(d.get("launch_conditions", ())),
        )


# Layout type field of the WGMMA shared-memory descriptor (PTX ISA, "Matrix Descriptor Format"
# for sm_90: bits 62-63; TileLang's ``tl::initialize_wgmma_descriptor<LAYOUT_TYPE, ...>``).
WGMMA_LAYOUT_TYPES: dict[int, str] = {0: "INTERLEAVE", 1: "128B", 2: "64B", 3: "32B"}


@dataclass(frozen=True)
class WgmmaOperand(Record):
    """The shared-memory matrix descriptor of one WGMMA operand.

    ``lbo``/``sbo`` are the encoded 14-bit fields (byte offsets >> 4), exactly as the template
    arguments of ``tl::initialize_wgmma_descriptor<LAYOUT, LBO, SBO>`` in the generated CUDA.
    """

    buffer: str | None
    layout_type: int
    lbo: int
    sbo: int
    major: str  # "K" or "MN"

    _derived = ("swizzle", "lbo_bytes", "sbo_bytes")  # written for readers without tilelab

    def __repr__(self) -> str:
        return (f"WgmmaOperand({self.buffer or '?'}: {self.major}-major, swizzle {self.swizzle}, "
                f"LBO {self.lbo_bytes} B, SBO {self.sbo_bytes} B)")

    @property
    def swizzle(self) -> str:
        return WGMMA_LAYOUT_TYPES.get(self.layout_type, f"unknown({self.layout_type})")

    @property
    def lbo_bytes(self) -> int:
        return self.lbo << 4

    @property
    def sbo_bytes(self) -> int:
        return self.sbo << 4


@dataclass(frozen=True)
class WgmmaInstruction(Record):
    """One distinct ``wgmma.mma_async`` shape as the kernel issues it."""

    instruction: str  # e.g. "m64n128k16"
    variant: str  # "ss" (both operands in shared memory) or "rs" (A in registers)
    a_dtype: str
    b_dtype: str
    accum_dtype: str
    a: WgmmaOperand | None  # None for "rs": A comes from registers
    b: WgmmaOperand | None
    a_major: str = "K"
    b_major: str = "K"
    count: int = 1  # how many call sites in the device code issue this exact form
    kernel: str | None = None
    # where the descriptors tilelab associated with this instruction disagree with the generated CUDA
    problems: tuple[str, ...] = ()

    def __repr__(self) -> str:
        operands = ", ".join(f"{n} {o.buffer or '?'} {o.major}-major {o.swizzle}"
                             for n, o in (("A", self.a), ("B", self.b)) if o is not None)
        problems = f", {len(self.problems)} problem(s)" if self.problems else ""
        types = f"{self.a_dtype}x{self.b_dtype}->{self.accum_dtype}"
        return (f"WgmmaInstruction({self.instruction}.{self.variant} {types}, {operands or 'A in registers'}, "
                f"{self.count} call site(s){problems})")

    @property
    def m(self) -> int:
        return int(self.instruction.split("n")[0][1:])

    @property
    def n(self) -> int:
        return int(self.instruction.split("n")[1].split("k")[0])

    @property
    def k(self) -> int:
        return int(self.instruction.split("k")[1])


@dataclass(frozen=True)
class MfmaInstruction(Record):
    """One distinct AMD matrix-core instruction (``__builtin_amdgcn_mfma_*``) as the HIP source issues it.

    ``a_operand``/``b_operand``/``accumulator`` name the register buffers the call passes as the
    instruction's A, B and C (TileLang may pass the kernel's B tile as the instruction's A: it
    computes the transposed product). The per-lane layouts are those of the instruction.
    """

    intrinsic: str  # e.g. "__builtin_amdgcn_mfma_f32_16x16x16f16"
    variant: str  # "dense", "scaled (gfx950)", "sparse (smfmac)"
    m: int
    n: int
    k: int
    a_dtype: str
    b_dtype: str
    accum_dtype: str
    a_operand: str
    b_operand: str
    accumulator: str
    a_lanes: str = ""
    b_lanes: str = ""
    c_lanes: str = ""
    count: int = 1  # call sites in the device code issuing this exact form
    kernel: str | None = None
    lines: tuple[int, ...] = ()  # 1-based lines of the device source
    a_lds: str | None = None  # the LDS buffer the A operand's registers are loaded from
    b_lds: str | None = None

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class LdsRead(Record):
    """One LDS read that fills an MFMA operand, under the CDNA LDS bank model (``tilelab.engine.mfma``).

    ``byte_addresses``: the LDS byte each lane 0..63 of the first wavefront reads first (loop
    variables at 0); ``phase_clocks``: clocks per phase for the worst value of the enclosing loop
    variables; ``ideal`` clocks are one per phase.
    """

    buffer: str
    destination: str
    width_bytes: int
    expression: str
    byte_addresses: tuple[int, ...]
    phase_clocks: tuple[int, ...]
    loop_variables: tuple[str, ...] = ()
    line: int = 0
    kernel: str | None = None

    @property
    def clocks(self) -> int:
        return int(sum(self.phase_clocks))

    @property
    def ideal_clocks(self) -> int:
        return len(self.phase_clocks)

    @property
    def conflict_degree(self) -> float:
        return self.clocks / self.ideal_clocks if self.ideal_clocks else 1.0

    @property
    def banks(self) -> tuple[int, ...]:
        """The first bank each lane touches (the CDNA LDS: 32 banks of 4 bytes)."""
        return tuple((a // CDNA_LDS_BANK_BYTES) % CDNA_LDS_BANKS for a in self.byte_addresses)


@dataclass(frozen=True)
class Layout:
    """Where each logical element of an on-chip buffer lives.

    ``scope == "shared"``: ``offsets`` holds, for each logical index in row-major order, the
    physical element offset in the buffer after the compiler's (swizzled) layout.
    ``scope == "fragment"``: ``threads`` and ``locals_`` hold the owning thread (relative to
    ``thread_base``) and the register index within that thread; a replicated fragment
    (``replicate > 1``) records replica 0 and says how many threads hold each element.
    Arrays are flat tuples; ``array(name)`` gives them as numpy arrays of ``shape``.
    """

    buffer: str
    scope: str  # "shared" | "fragment"
    dtype: str
    shape: tuple[int, ...]
    offsets: tuple[int, ...] = ()
    threads: tuple[int, ...] = ()
    locals_: tuple[int, ...] = ()
    replicate: int = 1
    thread_base: int = 0
    thread_count: int | None = None
    description: str = ""  # the compiler's own printout of the layout
    kernel: str | None = None

    def __repr__(self) -> str:
        """One line: what the buffer is and where its data is (the arrays hold an entry per element)."""
        shape = "x".join(str(d) for d in self.shape)
        if self.scope == "fragment":
            last = self.thread_base + (self.thread_count or 0) - 1
            where = f"threads {self.thread_base}..{last}" + (f", replicated {self.replicate}x" if self.replicate > 1
                                                            else "")
            data = ".array('threads'), .array('locals')"
        else:
            where = (self.description.split("\n")[0][:60] + ("..." if len(self.description) > 60 else "")
                     if self.description else "")
            data = ".array('offsets')"
        return (f"Layout({self.buffer}: {self.scope} {self.dtype} [{shape}]{', ' + where if where else ''}; "
                f"{data} per element)")

    def array(self, which: str) -> Any:  # a numpy.ndarray (numpy is imported only here)
        import numpy as np

        data = {"offsets": self.offsets, "threads": self.threads, "locals": self.locals_}[which]
        return np.asarray(data, dtype=np.int64).reshape(self.shape)

    # hand-written: a shared layout writes its offsets, a fragment its threads and locals, not both
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "buffer": self.buffer,
            "scope": self.scope,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "replicate": self.replicate,
            "thread_base": self.thread_base,
            "thread_count": self.thread_count,
            "description": self.description,
            "kernel": self.kernel,
        }
        if self.scope == "shared":
            d["offsets"] = list(self.offsets)
        else:
            d["threads"] = list(self.threads)
            d["locals"] = list(self.locals_)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layout:
        return cls(
            buffer=d["buffer"],
            scope=d["scope"],
            dtype=d["dtype"],
            shape=tuple(int(v) for v in d["shape"]),
            offsets=tuple(d.get("offsets", ())),
            threads=tuple(d.get("threads", ())),
            locals_=tuple(d.get("locals", ())),
            replicate=int(d.get("replicate", 1)),
            thread_base=int(d.get("thread_base", 0)),
            thread_count=d.get("thread_count"),
            description=d.get("description", ""),
            kernel=d.get("kernel"),
        )


@dataclass(frozen=True)
class L2Window(Record):
    """An L2 access-policy window from ``T.annotate_l2_hit_ratio``.

    ``bytes`` is the annotated buffer's size: an int, or an expression (``"m * 16384"``) where the
    buffer has a dynamic dimension.
    """

    buffer: str
    hit_ratio: float
    bytes: Dim
    emitted_by: tuple[str, ...] = ()  # backends whose launcher sets the window
    missing_in: tuple[str, ...] = ()  # backends whose launcher omits it


@dataclass(frozen=True)
class Argument(Record):
    """How one parameter of the kernel is read.

    kind: "tensor", "strided_tensor", "scalar", "dynamic_dim" or "constant".
    ``binds_from`` maps each symbolic dim of the shape to where its value comes from at launch
    (``{"M": "A.shape[0]"}``). ``cache_key`` is the part of the JIT cache key this argument
    contributes, as text (None when it contributes none).
    """

    name: str
    kind: str
    dtype: str | None = None
    shape: tuple[Dim, ...] | None = None
    strides: tuple[Dim, ...] | None = None
    passed_at_launch: bool = True
    binds_from: tuple[tuple[str, str], ...] = field(default=(), metadata=MAPPING)
    cache_key: str | None = None
    value: str | None = None  # compile-time constants: the value they were specialised with
    is_output: bool = False


def family_of_target_name(name: str) -> str:
    """The family of a target by its canonical name (``sm_90a`` cuda, ``gfx942`` hip, ``metal``,
    ``c`` cpu), for a report that does not say it; cuda for a name of none of these forms.
    (The records import nothing above them: tests/test_targets.py holds this rule to the registry.)"""
    if name.startswith("gfx"):
        return "hip"
    return {"metal": "metal", "c": "cpu", "llvm": "cpu"}.get(name, "cuda")


@dataclass(frozen=True)
class KernelReport(Displayed):
    """Everything TileLang generated for one kernel, as one checked model."""

    name: str
    target: str  # "sm_90a"
    kernels: tuple[DeviceKernel, ...]
    sources: Sources
    tma_descriptors: tuple[TmaDescriptor, ...] = ()
    wgmma: tuple[WgmmaInstruction, ...] = ()
    layouts: tuple[Layout, ...] = ()
    l2_persistence: tuple[L2Window, ...] = ()
    arguments: tuple[Argument, ...] = ()
    notes: tuple[str, ...] = ()  # what the engine chose or could not do, in sentences
    versions: tuple[tuple[str, str], ...] = field(default=(), metadata=MAPPING)
    cache_key: str | None = None  # the JIT cache key parts, as text
    pass_configs: tuple[tuple[str, str], ...] = field(default=(), metadata=MAPPING)
    # Opt-in tiers: what the CUDA toolchain made of the device source, and TileLang's passes.
    machine: MachineCode | None = None
    passes: PassTrace | None = None
    lowering: Lowering | None = None  # per tile op: the hardware path and why not the fast one
    mfma: tuple[MfmaInstruction, ...] = ()  # AMD targets
    lds_reads: tuple[LdsRead, ...] = ()  # AMD targets: LDS reads feeding MFMA operands
    # The target's family: "cuda", "hip", "metal" or "cpu", as tilelab.targets registers it; the
    # inspection that builds the report sets it. A report built without it (by hand, or read from a
    # file written before the field) has it read from its target's name (family_of_target_name).
    family: str = ""

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", family_of_target_name(self.target))

    @property
    def launcher_backends(self) -> tuple[str, ...]:
        """The backends whose launchers the renderers list: every CUDA backend for a CUDA report
        (absent ones say why), else the launchers TileLang has for the target."""
        if self.family == "cuda":
            return BACKENDS
        return tuple(item.backend for item in self.sources.launchers)

    # -- queries ---------------------------------------------------------------------------
    @property
    def problems(self) -> tuple[str, ...]:
        tma = tuple(f"{d.name}: {p}" for d in self.tma_descriptors for p in d.problems)
        wgmma = tuple(f"wgmma {w.instruction} in {w.kernel}: {p}" for w in self.wgmma for p in w.problems)
        return tma + wgmma

    def layout(self, buffer: str) -> Layout:
        for item in self.layouts:
            if item.buffer == buffer:
                return item
        raise KeyError(f"no layout for buffer {buffer!r}; have {[x.buffer for x in self.layouts]}")

    def tma(self, name_or_buffer: str) -> TmaDescriptor:
        for item in self.tma_descriptors:
            if name_or_buffer in (item.name, item.buffer):
                return item
        have = [(d.name, d.buffer) for d in self.tma_descriptors]
        raise KeyError(f"no TMA descriptor named or over {name_or_buffer!r}; have {have}")

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA_VERSION, **_to_dict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelReport:
        schema = d.get("schema", SCHEMA_VERSION)
        if schema != SCHEMA_VERSION:
            raise ValueError(
                f"this report was written with schema {schema}; tilelab reads schema "
                f"{SCHEMA_VERSION}. Re-run tilelab.inspect on the kernel to regenerate it."
            )
        return _from_dict(cls, d)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> KernelReport:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json(indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> KernelReport:
        """Read a report written by ``save``; a file that is not one is refused, naming the file."""
        from .errors import ReportFileError

        path = Path(path)
        advice = "Load a file written by KernelReport.save or `python -m tilelab inspect --json`"
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ReportFileError(f"{path}: no such file. {advice}") from None
        except IsADirectoryError:
            raise ReportFileError(f"{path}: is a folder, not a report file. {advice}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ReportFileError(f"{path}: cannot be read ({err}). {advice}") from err
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ReportFileError(f"{path}: not a tilelab report: it is not JSON ({err}). {advice}") from err
        if not isinstance(data, dict):
            raise ReportFileError(f"{path}: not a tilelab report: it holds a JSON {type(data).__name__}, "
                                  f"not an object. {advice}")
        missing = [k for k in ("name", "target", "kernels", "sources") if k not in data]
        if missing:
            raise ReportFileError(f"{path}: not a tilelab report: it has no {', '.join(repr(k) for k in missing)} "
                                  f"field{'s' if len(missing) > 1 else ''}. {advice}")
        try:
            return cls.from_dict(data)
        except ValueError as err:
            if "schema" in str(err):
                raise ReportFileError(f"{path}: {err}") from err
            raise ReportFileError(f"{path}: a malformed tilelab report: {err}. {advice}") from err
        except (KeyError, TypeError, AttributeError, IndexError) as err:
            what = f"missing field {err}" if isinstance(err, KeyError) else f"{type(err).__name__}: {err}"
            raise ReportFileError(f"{path}: a malformed tilelab report ({what}). {advice}") from err

    def replace(self, **changes: Any) -> KernelReport:
        return dataclasses.replace(self, **changes)

    # -- display: text and HTML come from the one display hook (tilelab.records.display) ----------
    def __repr__(self) -> str:
        return (
            f"KernelReport(name={self.name!r}, target={self.target!r}, kernels={len(self.kernels)}, "
            f"tma={len(self.tma_descriptors)}, wgmma={len(self.wgmma)}, problems={len(self.problems)})"
        )





__all__ = [
    "Argument",
    "BACKENDS",
    "DeviceKernel",
    "Dim",
    "KernelReport",
    "L2Window",
    "LauncherSource",
    "Layout",
    "LdsRead",
    "MfmaInstruction",
    "Sources",
    "TmaDescriptor",
    "WgmmaInstruction",
    "WgmmaOperand",
    "field",
]
