"""Lesson 04: a GEMM written by the student (``notebooks/04_gemm.ipynb``).

First correct on the CPU (target ``c``: launched with poisoned outputs and checked against
``A @ B`` at two shapes, with the tile map of what is wrong), then lowered for Hopper (both copies
TMA bulk copies, ``T.gemm`` on WGMMA, no problems in the report), then, on a GPU, a share of the
matmul rate of ``torch.matmul`` measured in the same check; last, split-K: blocks that add their
part of K into one tile of C with ``T.atomic_add``, checked on the CPU with C starting at zero.
"""

from __future__ import annotations

from typing import Any

from tilelab.workshop import NeedsGpu, Wrong, exercise, expect

from ._common_b import where_wrong

NOTEBOOK = "04"
TARGET = "sm_90a"
# (M, N, K, block_M, block_N, block_K): M != N, so a grid or an offset with rows and columns
# swapped shows; K spans several tiles, so a loop that stops early shows.
CPU_SIZES = ((96, 64, 128, 32, 32, 32), (64, 96, 64, 16, 32, 16))
HOPPER_ARGS = (1024, 512, 1024, 128, 128, 64)
SPEED_SIZES = (4096, 4096, 4096)
SPEED_GOAL = 0.6  # of torch.matmul's rate, measured in the same check

CPU_CELL = '''\
%%tilelang --target c --args "96, 64, 128, 32, 32, 32"
import tilelang.language as T


def cpu_matmul(M, N, K, block_M, block_N, block_K):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=1) as (bx, by):
            A_tile = T.alloc_local((block_M, block_K), T.float32)
            B_tile = T.alloc_local((block_K, block_N), T.float32)
            C_tile = T.alloc_local((block_M, block_N), T.float32)
{body}
    return gemm
'''
_IND = " " * 12
CPU_PLACEHOLDER = _IND + "...  # clear C_tile; for each step of K copy a tile of A and of B and multiply; store C_tile"


def _cpu_body(*, clear_inside: bool = False, k_steps: str = "T.ceildiv(K, block_K)", a_at: str =
              "A[by * block_M, k * block_K]", store_at: str = "C[by * block_M, bx * block_N]") -> str:
    clear = _IND + "T.clear(C_tile)\n"
    loop = (_IND + f"for k in T.Pipelined({k_steps}, num_stages=0):\n"
            + (_IND + "    T.clear(C_tile)\n" if clear_inside else "")
            + _IND + f"    T.copy({a_at}, A_tile)\n"
            + _IND + "    T.copy(B[k * block_K, bx * block_N], B_tile)\n"
            + _IND + "    T.gemm(A_tile, B_tile, C_tile)\n")
    return ("" if clear_inside else clear) + loop + _IND + f"T.copy(C_tile, {store_at})"


def cpu_cell(body: str = CPU_PLACEHOLDER) -> str:
    return CPU_CELL.format(body=body)


HOPPER_CELL = '''\
%%tilelang --args "1024, 512, 1024, 128, 128, 64"
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads={threads}) as (bx, by):
{body}
    return gemm
'''
HOPPER_PLACEHOLDER = _IND + ("...  # tiles of A and B in shared memory, a float32 fragment for C, a T.Pipelined "
                             "loop over K, the store")


def _hopper_body(*, tiles: str = "T.alloc_shared", accum: str = "T.alloc_fragment", stages: int = 3) -> str:
    return "\n".join(_IND + line for line in (
        f"A_shared = {tiles}((block_M, block_K), T.float16)",
        f"B_shared = {tiles}((block_K, block_N), T.float16)",
        f"C_local = {accum}((block_M, block_N), T.float32)",
        "T.clear(C_local)",
        f"for k in T.Pipelined(T.ceildiv(K, block_K), num_stages={stages}):",
        "    T.copy(A[by * block_M, k * block_K], A_shared)",
        "    T.copy(B[k * block_K, bx * block_N], B_shared)",
        "    T.gemm(A_shared, B_shared, C_local)",
        "T.copy(C_local, C[by * block_M, bx * block_N])",
    ))


def hopper_cell(body: str = HOPPER_PLACEHOLDER, threads: int = 256) -> str:
    return HOPPER_CELL.format(body=body, threads=threads)


# ------------------------------------------------------------------------------------------
# 04.1: correct on the CPU
# ------------------------------------------------------------------------------------------


def _matmul(A: Any, B: Any) -> Any:
    return A @ B


def _first_k_tile(block_k: int):
    def ref(A: Any, B: Any) -> Any:
        return A[:, :block_k] @ B[:block_k, :]

    return ref


def _short_k(block_k: int):
    def ref(A: Any, B: Any) -> Any:
        return A[:, :-block_k] @ B[:-block_k, :]

    return ref


def _last_k_tile(block_k: int):
    def ref(A: Any, B: Any) -> Any:
        return A[:, -block_k:] @ B[-block_k:, :]

    return ref


def _traced(kernel: Any, M: int, N: int, K: int) -> list[str]:
    """What ``tilelab.trace_tiles`` says about C (where this tilelab has it)."""
    import torch

    from tilelab.workshop import _kernel_checks

    args = (torch.randn(M, K), torch.randn(K, N), torch.zeros(M, N))
    return _kernel_checks.traced(kernel, args, "C")


def _tile_map(result: Any) -> str:
    tiles = result.outputs[0].tiles
    return f"\n{tiles!r}" if tiles is not None else ""


@exercise("04.1", "a GEMM on the CPU",
          question="Write the body of cpu_matmul: each block computes its block_M x block_N tile of C = A @ B, "
                   "looping over K a block_K slice at a time. It is launched on the CPU (target c).",
          kind="writes",
          hints=(("bx counts tiles across C's columns (N), by tiles down its rows (M): the block's tile of C "
                 "starts at C[by * block_M, bx * block_N]."),
                 ("Clear the accumulator once, then loop k over T.ceildiv(K, block_K): copy A's tile at row "
                 "by * block_M, column k * block_K, and B's tile at row k * block_K, column bx * block_N; "
                 "T.gemm adds their product into C_tile."),
                 ("T.clear(C_tile); for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0): T.copy(...A_tile); "
                 "T.copy(...B_tile); T.gemm(A_tile, B_tile, C_tile); then T.copy(C_tile, C[...]) after the loop.")),
          solution=cpu_cell(_cpu_body()), answer_name="cpu_matmul")
def _cpu_gemm(factory: Any) -> str:
    import tilelab

    expect(callable(factory), f"answer with your kernel factory cpu_matmul, got {type(factory).__name__}")
    shapes = []
    for M, N, K, bm, bn, bk in CPU_SIZES:
        kernel = factory(M, N, K, bm, bn, bk)
        result = tilelab.run(kernel, ref=_matmul, target="c", seed=4)
        where = f"at M={M}, N={N}, K={K} with {bm}x{bn}x{bk} tiles"
        if result.passed:
            shapes.append(f"{M}x{N}x{K}")
            continue
        out = result.outputs[0]
        if out.unwritten or out.nonfinite:  # TileLang's own warning names an accumulator never cleared
            from tilelab.workshop import _kernel_checks

            said = [w for w in _kernel_checks.tilelang_warnings(kernel) if "before initiali" in w]
            if said:
                raise Wrong(f"{where}, C holds garbage: TileLang warns \"{said[0]}\". The accumulator is read "
                            "(T.gemm adds into it) before anything sets it: it starts from whatever that memory "
                            "held.")
        if out.unwritten:
            traced = "; ".join(_traced(kernel, M, N, K)) or f"{out.unwritten} elements of C were never written"
            raise Wrong(f"{where}, {traced}: does every block store its tile where its (bx, by) say, and does the "
                        f"grid cover C?{_tile_map(result)}")
        if tilelab.run(kernel, ref=_short_k(bk), target="c", seed=4).passed:
            raise Wrong(f"{where}, C holds the product of every block_K slice of K but the last: the loop over K "
                        "stops one slice short (how many slices of block_K does K hold?)")
        if tilelab.run(kernel, ref=_first_k_tile(bk), target="c", seed=4).passed:
            raise Wrong(f"{where}, C holds only the product of the first block_K slice of K: the loop over K "
                        "must visit every slice and add each product into the accumulator")
        if tilelab.run(kernel, ref=_last_k_tile(bk), target="c", seed=4).passed:
            raise Wrong(f"{where}, C holds only the last slice's product: the accumulator is cleared on every "
                        "step of K, so each step throws the previous ones away")
        raise Wrong(f"{where}, C is written everywhere but wrong in the tiles marked X: compare the offsets of your "
                    f"two copies with the tile of A and of B that step k of block (bx, by) needs{_tile_map(result)}")
    return (f"C = A @ B on the CPU at {' and '.join(shapes)} (poisoned outputs, every element written and within "
            "the float32 tolerance)")


# ------------------------------------------------------------------------------------------
# 04.2 and 04.3: the same loop for Hopper
# ------------------------------------------------------------------------------------------


def _ops(report: Any) -> dict[str, Any]:
    params = [a.name for a in report.arguments if a.kind in ("tensor", "strided_tensor")]
    out: dict[str, Any] = {}
    for op in report.lowering.ops if report.lowering is not None else ():
        names = [n.strip() for n in op.op.split(" ", 1)[-1].split("->")]
        if op.op.startswith("T.gemm"):
            out["gemm"] = op
        elif op.op.startswith("T.copy") and len(names) == 2 and names[0] in params and names[1] not in params:
            out.setdefault(names[0], op)
    return out


def _hopper_report(kernel: Any, sizes: tuple[int, int, int], blocks: tuple[int, int] | None) -> Any:
    """Inspect for sm_90a and fail with what is not the fast path; returns the report."""
    import tilelab

    report = tilelab.inspect(kernel, TARGET)
    M, N, K = sizes
    shapes = {a.name: tuple(a.shape or ()) for a in report.arguments if a.kind in ("tensor", "strided_tensor")}
    expect(shapes.get("A") == (M, K) and shapes.get("B") == (K, N) and shapes.get("C") == (M, N),
           f"the kernel's tensors are {shapes}; the exercise asks for A: (M, K), B: (K, N), C: (M, N) with "
           f"M={M}, N={N}, K={K}")
    ops = _ops(report)
    for name in ("A", "B"):
        op = ops.get(name)
        if op is None:
            raise Wrong(f"the kernel copies no tile of {name} into shared memory: stage the tiles WGMMA "
                        "reads in T.alloc_shared buffers")
        if not op.path.startswith("TMA"):
            raise Wrong(f"{name}'s copy lowered to {op.path}, not a TMA bulk copy"
                        + (f" ({op.reason})" if op.reason and "not established" not in op.reason else "")
                        + ": which memory does the TMA unit write, and does the kernel pipeline its loop?")
    gemm = ops.get("gemm")
    if gemm is None:
        raise Wrong("the kernel has no T.gemm")
    if not gemm.path.startswith("WGMMA"):
        raise Wrong(f"T.gemm lowered to {gemm.path}, not WGMMA"
                    + (f": {gemm.reason}" if gemm.reason and "not established" not in gemm.reason else
                       ": WGMMA reads its operands from shared memory and accumulates in a register fragment"))
    dtypes = {w.a_dtype for w in report.wgmma}
    expect(dtypes == {"float16"}, f"the wgmma multiplies {', '.join(sorted(dtypes))} values; the exercise's A and "
                                  "B are fp16")
    expect(not report.problems, "the report lists problems: " + "; ".join(report.problems))
    if blocks is not None:
        grid = tuple(report.kernels[0].grid)
        want = (-(-N // blocks[1]), -(-M // blocks[0]), 1)
        expect(grid == want, f"the grid is {grid[0]} x {grid[1]} blocks: C is {M} x {N}, one block per "
                             f"{blocks[0]} x {blocks[1]} tile; which way does bx count?")
    return report


@exercise("04.2", "the GEMM on Hopper",
          question="Write matmul, the fp16 GEMM for Hopper: the same loop as cpu_matmul, with A's and B's tiles in "
                   "shared memory (so that TMA loads them and WGMMA reads them), a float32 register fragment "
                   "for C and a pipelined loop. It is graded by how TileLang lowers it for sm_90a.",
          kind="writes",
          hints=("T.alloc_shared for the tiles of A and B, T.alloc_fragment for the float32 accumulator.",
                 ("The loop is T.Pipelined(T.ceildiv(K, block_K), num_stages=3): TileLang then loads the next "
                 "tiles with TMA while WGMMA multiplies the current ones."),
                 ("Copy cpu_matmul's body, rename the buffers, swap T.alloc_local for T.alloc_shared (A, B) and "
                 "T.alloc_fragment (C), and give T.Pipelined num_stages=3.")),
          solution=hopper_cell(_hopper_body()), answer_name="matmul")
def _hopper_gemm(factory: Any) -> str:
    expect(callable(factory), f"answer with your kernel factory matmul, got {type(factory).__name__}")
    from ._common_b import gemm_on_cpu

    M, N, K, bm, bn, _ = HOPPER_ARGS
    _hopper_report(factory(*HOPPER_ARGS), (M, N, K), (bm, bn))
    right = gemm_on_cpu(factory)
    # what it lowered to is said without the TMA box, the wgmma shape or the thread count: those are
    # the answers of later exercises (06.6, 06.7, 07.1)
    return f"both loads are TMA bulk copies, T.gemm lowers to WGMMA, no problems; {right}"


def _torch_rate(torch: Any, M: int, N: int, K: int) -> Any:
    import tilelab

    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    return tilelab.bench(lambda: torch.matmul(a, b), flops=2.0 * M * N * K, name="torch.matmul", rep_ms=300,
                         ci_target=None)


@exercise("04.3", "a share of the matmul ceiling",
          question=f"Build your matmul at M = N = K = {SPEED_SIZES[0]} with the tiles you choose and answer with "
                   f"the kernel. On a GPU it must be correct and reach {int(SPEED_GOAL * 100)}% of torch.matmul's "
                   "rate, measured in the same check; without one, its Hopper lowering is checked and the speed "
                   "waits for a GPU.",
          kind="writes",
          hints=(("The block computes block_M x block_N outputs for every block_M + block_N values it loads per "
                 "step of K: larger tiles reuse each load more."),
                 "WGMMA's N can be up to 256: a 128 x 256 tile with block_K = 64 fits 3 stages in shared memory.",
                 f"answer_04_3 = matmul({SPEED_SIZES[0]}, {SPEED_SIZES[1]}, {SPEED_SIZES[2]}, 128, 256, 64)"),
          solution=f"answer_04_3 = matmul({SPEED_SIZES[0]}, {SPEED_SIZES[1]}, {SPEED_SIZES[2]}, 128, 256, 64)",
          setup=hopper_cell(_hopper_body()))
def _speed(kernel: Any) -> Any:
    import inspect

    import tilelab

    expect(not inspect.isfunction(kernel),
           "answer with the kernel your factory builds (matmul(4096, 4096, 4096, block_M, block_N, block_K)), "
           "not the factory")
    report = _hopper_report(kernel, SPEED_SIZES, None)
    if not tilelab.has_gpu():
        return NeedsGpu("lowered for Hopper as asked (TMA loads, WGMMA, no problems); its speed is measured on a "
                        "GPU: run this check where there is one")
    import torch

    M, N, K = SPEED_SIZES
    run = tilelab.run(kernel, ref=_matmul, seed=5)
    expect(run.passed, f"on the GPU your kernel is not correct at {M}x{N}x{K}:\n{run!r}")
    theirs = tilelab.bench(kernel, flops=2.0 * M * N * K, rep_ms=300, ci_target=None)
    baseline = _torch_rate(torch, M, N, K)
    share = baseline.median_ms / theirs.median_ms
    rate = f"{theirs.tflops:.0f} TFLOP/s, {share:.0%} of torch.matmul's {baseline.tflops:.0f} TFLOP/s measured now"
    expect(share >= SPEED_GOAL, f"{rate}; the goal is {SPEED_GOAL:.0%}: look at the tile sizes (how much each load "
                                "is reused) and the number of stages")
    names = sorted({w.instruction for w in report.wgmma})
    return f"{rate} on {theirs.device} (wgmma {', '.join(names)})"


# ------------------------------------------------------------------------------------------
# 04.4 split-K: blocks that add into one tile of C with T.atomic_add
# ------------------------------------------------------------------------------------------

SPLIT_K_HEAD = """\
def split_k(M, N, K, block_M=32, block_N=16, block_K=16, splits=4):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), T.float32)
            B_s = T.alloc_shared((block_K, block_N), T.float32)
            C_f = T.alloc_fragment((block_M, block_N), T.float32)
            steps = T.ceildiv(K, block_K * splits)  # the block_K slices of K that split bz adds up
"""
SPLIT_K_BODY = """\
            T.clear(C_f)
            for k in T.Pipelined(steps, num_stages=0):
                T.copy(A[by * block_M, (bz * steps + k) * block_K], A_s)
                T.copy(B[(bz * steps + k) * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            for i, j in T.Parallel(block_M, block_N):
                T.atomic_add(C[by * block_M + i, bx * block_N + j], C_f[i, j])
"""
SPLIT_K_GIVEN_BODY = """\
            ...  # clear C_f; add up this split's slices of K: slice bz * steps + k, for k in range(steps)
            ...  # then add C_f into C element by element with T.atomic_add: the other splits add to the same tile
"""
SPLIT_K_TAIL = """
    return gemm
"""
# (M, N, K, splits): M != N, K a whole number of block_K slices per split; 3 and 4 splits
SPLIT_K_SIZES = ((96, 64, 256, 4), (64, 48, 96, 3))


def _split_refs(K: int, splits: int, block_k: int) -> list[tuple[str, Any]]:
    part = -(-K // (block_k * splits)) * block_k  # the K columns one split adds up

    return [
        ("C is splits times the first split's part: every split adds the same slices of K. Split bz starts at "
         "slice bz * steps", lambda a, b: splits * (a[:, :part] @ b[:part, :])),
        ("C is splits times A @ B: every split adds up all of K instead of its share", lambda a, b: splits * (a @ b)),
        ("C misses the last split's part: are all the splits launched (the grid's third extent)?",
         lambda a, b: a[:, :(splits - 1) * part] @ b[:(splits - 1) * part, :]),
    ]


@exercise("04.4", "split-K with atomic adds",
          question="Complete split_k: C = A @ B with K cut into `splits` parts, each computed by its own block (the "
                   "grid's third axis, bz) and added into C with T.atomic_add, so that a tall-and-thin GEMM keeps "
                   "more blocks busy. C starts at zero (the host clears it). The check runs it on the CPU at two "
                   "sizes, with 4 and 3 splits.",
          kind="writes",
          hints=("Block (bx, by, bz) owns C's tile (by, bx), as in 04.1, and the slices bz * steps ... "
                 "bz * steps + steps - 1 of K.",
                 "The loop is 04.1's with the slice index shifted: A[by * block_M, (bz * steps + k) * block_K] and "
                 "B[(bz * steps + k) * block_K, bx * block_N].",
                 "After the loop, for i, j in T.Parallel(block_M, block_N): T.atomic_add(C[by * block_M + i, "
                 "bx * block_N + j], C_f[i, j]). A T.copy into C would overwrite the other splits' parts."),
          solution=SPLIT_K_HEAD + SPLIT_K_BODY + SPLIT_K_TAIL, answer_name="split_k",
          given=SPLIT_K_HEAD + SPLIT_K_GIVEN_BODY + SPLIT_K_TAIL)
def _split_k(factory: Any) -> str:
    import tilelab
    from tilelab.workshop import _kernel_checks

    expect(callable(factory), f"answer with your kernel factory split_k, got {type(factory).__name__}")
    done = []
    for M, N, K, splits in SPLIT_K_SIZES:
        kernel = factory(M, N, K, splits=splits)
        where = f"at M={M}, N={N}, K={K} with {splits} splits"

        def run(ref: Any, kernel: Any = kernel) -> Any:
            # C, written only by atomic adds, starts at zero on the CPU (the host's torch.zeros)
            return tilelab.run(kernel, ref=ref, device="cpu", seed=4, tile=(32, 16))

        result = run(_matmul)
        # who stored what (at the first size): the CPU runs blocks in turn, so a race shows only here
        trace = tilelab.trace_tiles(kernel, seed=4) if (M, N, K, splits) == SPLIT_K_SIZES[0] else None
        twice = int(trace.written_twice("C").sum()) if trace is not None else 0
        if trace is not None and twice:
            raise Wrong(f"{where}, {twice} elements of C are stored by more than one block without an atomic "
                        "update: on a GPU those blocks race and the last store wins (on the CPU, where blocks run "
                        "one after another, it may even come out right). Add into C with T.atomic_add(C[...], "
                        "C_f[i, j]): " + "; ".join(trace.problems("C")[:2]))
        if result.passed:
            done.append(f"{M}x{N}x{K} ({splits} splits)")
            continue
        said = [w for w in _kernel_checks.tilelang_warnings(kernel) if "before initiali" in w]
        if said:
            raise Wrong(f"{where}, C is wrong and TileLang warns \"{said[0]}\": the accumulator C_f is read before "
                        "anything sets it")
        if result.outputs[0].unwritten:
            raise Wrong(f"{where}, {where_wrong(result)}: does every block add its tile where its (bx, by) say?")
        for words, ref in _split_refs(K, splits, 16):
            try:
                if run(ref).passed:
                    raise Wrong(f"{where}, {words}")
            except Wrong:
                raise
            except Exception:
                continue
        raise Wrong(f"{where}, C is wrong in the tiles marked X: {result.outputs[0].tiles!r}. Look at the offsets of "
                    "the copies (which slice of K, which tile of A and B) and at where the atomic add lands")
    return (f"C = A @ B at {' and '.join(done)}: each split adds its share of K into C with atomic updates (no "
            "element stored by two blocks)")


wrong_answers = {
    "04.1": (cpu_cell(_cpu_body(k_steps="K // K")),
             cpu_cell(_cpu_body(clear_inside=True)),
             cpu_cell(_cpu_body(store_at="C[bx * block_M, by * block_N]")),
             cpu_cell(_cpu_body(a_at="A[by * block_M, 0]"))),
    "04.2": (hopper_cell(_hopper_body(stages=0)),
             hopper_cell(_hopper_body(), threads=64),
             hopper_cell(_hopper_body(accum="T.alloc_shared"))),
    "04.3": ("answer_04_3 = matmul(1024, 1024, 1024, 128, 256, 64)",),
    "04.4": (SPLIT_K_HEAD + SPLIT_K_BODY.replace("T.atomic_add(C[by * block_M + i, bx * block_N + j], C_f[i, j])",
                                                 "C[by * block_M + i, bx * block_N + j] = C_f[i, j]") + SPLIT_K_TAIL,
             SPLIT_K_HEAD + SPLIT_K_BODY.replace("(bz * steps + k)", "k") + SPLIT_K_TAIL),
}
