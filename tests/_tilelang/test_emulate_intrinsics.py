"""The intrinsics rule of the CPU path (tilelab/_tilelang/emulate_intrinsics.py): each TileLang
intrinsic its C back end lacks runs with TileLang's meaning of it, checked against numpy on the
same inputs (tests/intrinsic_kernels.py); an intrinsic outside the table is refused by name with
its line."""

from __future__ import annotations

from fractions import Fraction

import intrinsic_kernels as ik
import numpy as np
import pytest
import torch

import tilelab
from tilelab.launch import KernelLaunchError


def _np(t):
    return t.detach().cpu().numpy()


def _round_away(x):  # numpy's round is ties-to-even: halves away from zero by hand
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def test_elementwise_intrinsics_run_with_their_meaning():
    a = torch.tensor(np.concatenate([np.arange(-64, 64) + 0.5, np.linspace(-9.7, 9.3, 128)]).astype(np.float32))
    outs = [torch.zeros(ik.N) for _ in range(4)]
    result = tilelab.run(ik.elementwise(), a, *outs, device="cpu", outputs=["R", "Q", "L", "M"])
    assert result.passed, result
    assert any("intrinsics" in n for n in result.notes), result.notes
    x = _np(a)
    np.testing.assert_array_equal(_np(outs[0]), _round_away(x))
    np.testing.assert_allclose(_np(outs[1]), 1.0 / x, rtol=1e-6)
    np.testing.assert_array_equal(_np(outs[2]), x)
    np.testing.assert_array_equal(_np(outs[3]), np.abs(x))


def test_all_of_and_any_of_reduce_a_tile_and_a_region_of_flags():
    m = torch.tensor([[1] * 8, [1] * 7 + [0], [0] * 8, [0] * 3 + [5] + [0] * 4], dtype=torch.int32)
    flags = [torch.full((4,), -1, dtype=torch.int32) for _ in range(2)]
    result = tilelab.run(ik.row_flags(), m, *flags, device="cpu", outputs=["All", "Any"])
    assert result.passed, result
    nonzero = _np(m) != 0
    assert _np(flags[0]).tolist() == nonzero.all(1).astype(np.int32).tolist() == [1, 0, 0, 0]
    assert _np(flags[1]).tolist() == nonzero.any(1).astype(np.int32).tolist() == [1, 1, 0, 1]


@pytest.mark.parametrize("dim, reverse", [(1, False), pytest.param(0, True, marks=pytest.mark.heavy)])
def test_cumsum_is_the_prefix_sum_along_its_axis(dim, reverse):
    a = torch.randn(4, 16)
    b = torch.zeros(4, 16)
    result = tilelab.run(ik.cumsum(dim=dim, reverse=reverse), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    x = _np(a)
    expected = np.flip(np.cumsum(np.flip(x, dim), dim), dim) if reverse else np.cumsum(x, dim)
    np.testing.assert_allclose(_np(b), expected, rtol=1e-5, atol=1e-5)


def test_a_32_bit_load_and_store_by_hand_move_the_bits_of_a_32_bit_element():
    a = torch.randn(64) + 3
    b = torch.full((64,), 7.0)
    result = tilelab.run(ik.words(), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    expected = _np(a).copy()
    expected[1::2] = 0.0  # the load its predicate skips gives 0
    np.testing.assert_array_equal(_np(b), expected)


def test_wide_loads_and_stores_by_hand_move_the_bits_in_memory_order():
    h, f = torch.randn(64).half(), torch.randn(64)
    c, w, d = torch.zeros(64).half(), torch.zeros(32, dtype=torch.int32), torch.zeros(32, dtype=torch.int64)
    result = tilelab.run(ik.wide_words(), h, f, c, w, d, device="cpu", outputs=["C", "W", "D"])
    assert result.passed, result
    assert torch.equal(c, h)  # 128 bits through a shared tile and back
    assert torch.equal(w, h.view(torch.int32))  # two halves to a word, the first in its low bits
    expected = f.view(torch.int64).clone().reshape(8, 4)
    expected[1::2] = 0  # the 256-bit loads of odd blocks are predicated off: 0
    assert torch.equal(d, expected.reshape(-1))


def test_an_async_copy_by_hand_copies_at_once_and_zero_fills_where_its_predicate_is_false():
    a, b = torch.randn(4, 16).half(), torch.zeros(4, 16).half()
    result = tilelab.run(ik.async_copies(), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    expected = (a.float() * 2).half()
    expected[0::2, 8:] = 0  # thread 1's copy in even rows: cp.async's zero fill
    assert torch.equal(b, expected)


@pytest.mark.heavy
def test_an_async_copy_by_hand_past_its_tile_is_reported_never_performed():
    a, b = torch.randn(4, 16).half(), torch.zeros(4, 16).half()
    with pytest.raises(KernelLaunchError, match=r"write of S\[16\] \(past its end: S is 16\) in block \(0, 0, 0\)"):
        tilelab.run(ik.async_copies(shift=1), a, b, device="cpu", outputs=["B"])


def test_an_intrinsic_in_a_form_outside_the_table_is_refused_by_name_with_its_line():
    with pytest.raises(tilelab.EmulationError, match=r"the TileLang intrinsic tl\.ldg64") as info:
        tilelab.run(ik.unknown_intrinsic(), torch.randn(64), torch.zeros(64), device="cpu")
    assert "T.ldg64(A[bx * 2:bx * 2 + 2])" in str(info.value)
    assert "where it is bound or passed to a store by hand" in str(info.value)
    assert "What still works: tilelab.inspect" in str(info.value)


def test_a_device_assertion_passes_when_it_holds_and_ends_the_launch_when_it_does_not():
    b = torch.zeros(64)
    assert tilelab.run(ik.asserting(), torch.arange(64, dtype=torch.float32), b, device="cpu",
                       outputs=["B"]).passed
    with pytest.raises(KernelLaunchError, match="died"):
        tilelab.run(ik.asserting(), torch.arange(64, dtype=torch.float32) * 2, b, device="cpu", outputs=["B"])


def test_the_test_files_are_dealt_alternately_into_halves_by_their_sorted_paths():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "emulation_coverage.py"
    spec = importlib.util.spec_from_file_location("emulation_coverage", path)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    files = ["math/test_b.py", "issue/test_z.py", "cuda/test_a.py", "issue/test_a.py", "kernel/test_c.py"]
    halves = {f: coverage.test_file_half(f, files) for f in files}
    # sorted: cuda/test_a, issue/test_a, issue/test_z, kernel/test_c, math/test_b
    assert halves == {"cuda/test_a.py": "first", "issue/test_a.py": "second", "issue/test_z.py": "first",
                      "kernel/test_c.py": "second", "math/test_b.py": "first"}


# --- IEEE operations with a rounding mode: each result against the exact value (Fractions) rounded
# in the mode by hand -------------------------------------------------------------------------------

def _rounded32(exact, mode):
    """The float32 that ``exact`` (a Fraction) rounds to in ``mode``, chosen among the float32
    values around it by exact comparisons (ties to the even bit pattern)."""
    from fractions import Fraction

    near = np.float32(float(exact))
    around = sorted({near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf))},
                    key=float)
    below = max(c for c in around if Fraction(float(c)) <= exact)
    above = min(c for c in around if Fraction(float(c)) >= exact)
    if below == above:
        return below
    if mode == "rd" or (mode == "rz" and exact > 0):
        return below
    if mode in ("ru", "rz"):
        return above
    gap_below, gap_above = exact - Fraction(float(below)), Fraction(float(above)) - exact
    if gap_below != gap_above:
        return below if gap_below < gap_above else above
    return below if int(below.view(np.uint32)) % 2 == 0 else above


def _rsqrt_rounded(x):
    """1/sqrt(x) rounded to nearest float32: the float whose midpoints lo, hi with its neighbours
    bracket it, lo^2 x <= 1 <= hi^2 x, exactly."""
    from fractions import Fraction

    f = np.float32(1 / np.sqrt(np.float64(x)))
    for y in (f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(0))):
        lo = (Fraction(float(y)) + Fraction(float(np.nextafter(y, np.float32(0))))) / 2
        hi = (Fraction(float(y)) + Fraction(float(np.nextafter(y, np.float32(np.inf))))) / 2
        if lo * lo * Fraction(float(x)) <= 1 <= hi * hi * Fraction(float(x)):
            return y
    raise AssertionError(x)


@pytest.mark.heavy  # one compile and launch (about 2 s); make test keeps the Philox kernel as this group's quick proof
def test_ieee_operations_round_once_in_their_mode_as_ieee_754_defines():
    from fractions import Fraction

    rng = np.random.default_rng(7)
    n = 64
    a = (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-8, 9, n)).astype(np.float32)
    b = (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-8, 9, n)).astype(np.float32)
    c = (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-8, 9, n)).astype(np.float32)
    a[:4] = [1.0, 1.0, -1.0, 3.0]  # 1 + 2^-24 is a tie: to even (1.0), up, down; -1 - 2^-24 a tie too
    b[:4] = [2.0 ** -24, 3 * 2.0 ** -25, -(2.0 ** -24), 2.0 ** -23]
    out = torch.zeros(8, n)
    result = tilelab.run(ik.ieee_rounding(n), torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c), out,
                         device="cpu", outputs=["R"])
    assert result.passed, result
    got = _np(out)
    fa, fb, fc = ([Fraction(float(v)) for v in x] for x in (a, b, c))
    expected = np.array([
        *[[_rounded32(x + y, m) for x, y in zip(fa, fb)] for m in ("rn", "rz", "ru", "rd")],
        [_rounded32(x * y, "rd") for x, y in zip(fa, fb)],
        [_rounded32(x * y + z, "ru") for x, y, z in zip(fa, fb, fc)],
        [_rounded32(x / y, "rz") for x, y in zip(fa, fb)],
        [_rsqrt_rounded(abs(x)) for x in a],
    ], dtype=np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert got[0, 0] == 1.0 and got[2, 0] == np.nextafter(np.float32(1), np.float32(2))  # the tie: even, up
    # the modes differ where the sum is inexact: one plain float32 sum (to nearest) is wrong for rd and ru
    plain = (a + b).astype(np.float32)
    assert (plain != expected[3]).sum() > n // 4 and (plain != expected[2]).sum() > n // 4


# --- curand's Philox4_32_10 (T.rng_*): the stream against Random123's published known answers and a
# reference written from the paper and curand's documented subsequence/offset rules ---------------

_MASK = 0xFFFFFFFF
# Random123's kat_vectors for philox4x32-10: (counter, key) -> the block
_PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((_MASK,) * 4, (_MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _philox_block(ctr, key):
    """Philox4x32-10 (Salmon et al. 2011): ten rounds of two 32x32->64 multiplications, the key
    bumped by the Weyl constants between rounds."""
    c, (k0, k1) = list(ctr), key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & _MASK, (k1 + 0xBB67AE85) & _MASK
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & _MASK, (p0 >> 32) ^ c[3] ^ k1, p0 & _MASK]
    return c


def _curand_words(seed, subsequence, offset, count, subsequence_low=False):
    """curand_init(seed, subsequence, offset) then ``count`` curand() words: the counter is a
    128-bit integer, the subsequence its high 64 bits, offset // 4 blocks on, offset % 4 words into
    the block (``subsequence_low``: the wrong variant that adds the subsequence to the low bits)."""
    key = (seed & _MASK, (seed >> 32) & _MASK)
    counter = ((subsequence if subsequence_low else subsequence << 64) + offset // 4) % 2 ** 128
    words, place = [], offset % 4
    while len(words) < count:
        block = _philox_block([(counter >> (32 * i)) & _MASK for i in range(4)], key)
        words += block[place:]
        place, counter = 0, (counter + 1) % 2 ** 128
    return words[:count]


def test_the_reference_philox_gives_random123s_known_answers():
    for ctr, key, block in _PHILOX_KAT:
        assert tuple(_philox_block(ctr, key)) == block


@pytest.mark.parametrize("seed, offset, first_seq", [
    (0, 0, 0), pytest.param(0x123456789ABCDEF0, 6, 2 ** 32 - 3, marks=pytest.mark.heavy)])
def test_rng_draws_curands_philox_stream_for_each_thread(seed, offset, first_seq):
    threads, draws = 8, 6
    words = torch.zeros(threads, draws, dtype=torch.int32)
    uniform, normal = torch.zeros(threads), torch.zeros(threads, 3)
    result = tilelab.run(ik.philox(threads, draws, seed, offset, first_seq), words, uniform, normal, device="cpu",
                         outputs=["W", "U", "G"])
    assert result.passed, result
    got = _np(words).view(np.uint32)
    streams = [_curand_words(seed, first_seq + t, offset, draws + 5) for t in range(threads)]
    assert got.tolist() == [s[:draws] for s in streams]
    if (seed, offset, first_seq) == (0, 0, 0):
        assert tuple(got[0, :4]) == _PHILOX_KAT[0][2]  # the first block of seed 0: Random123's first vector
    # curand_uniform: the next word x as float32, x * 2^-32 + 2^-33 (float32 arithmetic)
    last = np.array([s[draws] for s in streams], dtype=np.float64).astype(np.float32)
    np.testing.assert_array_equal(_np(uniform), last * np.float32(2.0 ** -32) + np.float32(2.0 ** -33))
    # curand_normal: Box-Muller on the next two words, sqrt(-2 ln u) sin(2 pi v) then its cos, then two more
    # (float64 here: the GPU's fast log and sine agree within their error, not bit for bit)
    def u01(w):
        return (np.array(w, dtype=np.float64) + 0.5) * 2.0 ** -32

    first, second, third = (np.array([s[draws + 1 + k] for s in streams]) for k in (0, 1, 2))
    fourth = np.array([s[draws + 4] for s in streams])
    radius = np.sqrt(-2 * np.log(u01(first)))
    expected = [radius * np.sin(2 * np.pi * u01(second)), radius * np.cos(2 * np.pi * u01(second)),
                np.sqrt(-2 * np.log(u01(third))) * np.sin(2 * np.pi * u01(fourth))]
    np.testing.assert_allclose(_np(normal), np.array(expected).T, rtol=1e-4, atol=1e-5)
    wrong = [_curand_words(seed, first_seq + t, offset, draws, subsequence_low=True) for t in range(threads)]
    assert got.tolist() != wrong  # a generator that put the subsequence in the counter's low bits is caught


def test_each_thread_keeps_its_own_generator_state_across_a_barrier():
    words = torch.zeros(8, 2, dtype=torch.int32)
    assert tilelab.run(ik.philox_across_a_barrier(8, 99), words, device="cpu", outputs=["W"]).passed
    assert _np(words).view(np.uint32).tolist() == [_curand_words(99, t, 0, 2) for t in range(8)]


def test_a_random_draw_in_a_parallel_loop_of_many_threads_is_refused_with_its_line():
    with pytest.raises(tilelab.EmulationError, match=r"a random draw \(T\.rng_rand_float\) inside a T\.Parallel loop "
                                             r"\(line \d+: U\[i\] = T\.rng_rand_float\(\)\)"):
        tilelab.run(ik.draws_in_a_parallel_loop(), torch.zeros(64), device="cpu", outputs=["U"])
    one = torch.zeros(64)  # one thread draws every element in the loop's order: its stream, as on a GPU
    assert tilelab.run(ik.draws_in_a_parallel_loop(threads=1), one, device="cpu", outputs=["U"]).passed
    words = np.array(_curand_words(7, 0, 0, 64), dtype=np.float64).astype(np.float32)
    np.testing.assert_array_equal(_np(one), words * np.float32(2.0 ** -32) + np.float32(2.0 ** -33))


@pytest.mark.heavy
@pytest.mark.parametrize("scalar, line", [(False, r"T\.stg128\(Y\[0:4\], T\.ldg64"), (True, r"T\.stg64\(Y\[0:2\]")])
def test_a_store_by_hand_of_a_value_of_another_width_is_refused_not_cut(scalar, line):
    dtype = torch.uint32 if scalar else torch.float32
    with pytest.raises(tilelab.EmulationError, match=rf"the TileLang intrinsic tl\.stg(64|128) \(line \d+: {line}"):
        tilelab.run(ik.store_of_another_width(scalar=scalar), torch.zeros(8).to(dtype), torch.zeros(8).to(dtype),
                    device="cpu", outputs=["Y"])


# --- the rest of the math surface: fast math, exp10, fmod, fma, fmul, pow by an integer, isfinite,
# bit counts, packed pairs --------------------------------------------------------------------------

@pytest.mark.heavy
def test_math_intrinsics_compute_their_meaning():
    rng = np.random.default_rng(3)
    a = rng.uniform(-3, 3, 64).astype(np.float32)
    a[0] = 0.0  # log: -inf at 0, NaN below it
    i = rng.integers(-2 ** 31, 2 ** 31, 64, dtype=np.int64).astype(np.int32)
    i[:3] = [0, 1, -1]
    f, k = torch.zeros(9, 64), torch.zeros(5, 64, dtype=torch.int32)
    result = tilelab.run(ik.math_group(), torch.from_numpy(a), torch.from_numpy(i), f, k, device="cpu",
                         outputs=["F", "K"])
    assert result.passed, result
    x = a.astype(np.float64)
    np.testing.assert_allclose(_np(f)[:4], [np.exp(x), np.log(np.abs(x) + 1), np.sin(x), 10 ** x], rtol=2e-6)
    np.testing.assert_array_equal(_np(f)[4], np.fmod(a, np.float32(0.75)))
    np.testing.assert_allclose(_np(f)[5], x * x - 1 + 2 * x, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_np(f)[6], (a * a) * a)
    np.testing.assert_array_equal(_np(f)[7], np.isfinite(np.log(x)).astype(np.float32))
    u = i.view(np.uint32).astype(np.int64)
    clz = np.array([32 - int(v).bit_length() for v in u])
    ffs = np.array([(int(v) & -int(v)).bit_length() for v in u])
    np.testing.assert_array_equal(_np(f)[8], a * 8)
    bits = [[(int(v) >> p) & 1 for p in range(32)] for v in u]
    up = [([p for p in range(3, 32) if b[p]] + [-1, -1])[1] for b in bits]  # the second set bit from 3 up
    down = [([p for p in range(3, -1, -1) if b[p]] + [-1])[0] for b in bits]  # the first from 3 down
    np.testing.assert_array_equal(_np(k), [clz, [bin(int(v)).count("1") for v in u], ffs, up, down])
    assert _np(k)[3, 0] == -1 and _np(k)[4, 2] == 3  # 0 has no set bit (0xffffffff); -1 has bit 3


@pytest.mark.heavy
def test_shuffle_elect_picks_lane_0_of_each_group():
    e = torch.full((2, 128), -1, dtype=torch.int32)
    result = tilelab.run(ik.elect(), e, device="cpu", outputs=["E"])
    assert result.passed, result
    t = np.arange(128)
    np.testing.assert_array_equal(_np(e), [(t % 64 == 0).astype(np.int32), (t == 0).astype(np.int32)])


@pytest.mark.heavy
def test_packed_pair_arithmetic_is_per_lane():
    a, b = torch.randn(64), torch.randn(64)
    p = torch.zeros(3, 64)
    result = tilelab.run(ik.packed_pairs(), a, b, p, device="cpu", outputs=["P"])
    assert result.passed, result
    np.testing.assert_array_equal(_np(p), [_np(a) + _np(b), _np(a) - _np(b), _np(a) * _np(b)])


def test_dp4a_adds_the_dot_product_of_four_signed_bytes_wrapping_as_int32():
    gen = torch.Generator().manual_seed(7)
    a = torch.randint(-128, 128, (16, 8), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (16, 8), generator=gen, dtype=torch.int8)
    a[0], b[0] = -128, -128  # 8 * 16384 past 2**31 - 100: wraps
    c = torch.randint(-1000, 1000, (16,), generator=gen, dtype=torch.int32)
    c[0] = 2**31 - 100
    expected = (a.long() * b.long()).sum(1) + c.long()
    expected = ((expected + 2**31) % 2**32 - 2**31).to(torch.int32)  # two's complement of the 64-bit sum
    out = torch.zeros(16, dtype=torch.int32)
    result = tilelab.run(ik.byte_dots(), a, b, c, out, device="cpu", outputs=["C"])
    assert result.passed, result
    assert torch.equal(out, expected), (out, expected)
    assert out[0] < 0  # the wrapped row
def test_an_explicit_wgmma_gemm_is_the_tile_gemm_and_its_wait_nothing():
    """T.wgmma_gemm over two slices of K of shared tiles, T.wait_wgmma after: torch's A @ B.T (the
    float16 products are exact in float32, so only the order of the sums can differ)."""
    gen = torch.Generator().manual_seed(3)
    a, b = (torch.randn(16, 32, generator=gen).half() for _ in range(2))
    d = torch.zeros(16, 16)
    result = tilelab.run(ik.explicit_wgmma(16, 16), a, b, d, device="cpu", outputs=["D"])
    assert result.passed, result
    assert any("explicit-wgmma" in n for n in result.notes), result.notes
    np.testing.assert_allclose(_np(d), _np(a.double() @ b.double().T), rtol=1e-5, atol=1e-5)


def test_a_wgmma_wait_with_no_wgmma_gemm_stays_refused_by_name():
    with pytest.raises(tilelab.EmulationError, match=r"tl\.wait_wgmma.*T\.wait_wgmma\(0\)"):
        tilelab.run(ik.wgmma_wait_alone(), torch.zeros(64), torch.zeros(64), device="cpu")


TORCH_OF = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SIGNIFICANT_BITS = {"float32": 24, "float16": 11, "bfloat16": 8}


def _rounded_once(exact, bits):
    """The rational ``exact`` rounded once to nearest even with ``bits`` significant bits (a normal
    number of the narrow type: torch's conversions from float64 go through float32, rounding twice)."""
    if exact == 0:
        return 0.0
    magnitude = abs(exact)
    e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** e > magnitude:
        e -= 1
    scale = Fraction(2) ** (bits - 1 - e)
    return float(Fraction(round(exact * scale)) / scale)  # Fraction's round: halves to even


@pytest.mark.parametrize("dtype", ["float16", pytest.param("float32", marks=pytest.mark.heavy),
                                   pytest.param("bfloat16", marks=pytest.mark.heavy)])
def test_fma2_and_abs2_are_lanewise_fma_and_abs_rounded_once(dtype):
    """D = T.fma2(A, B, C), E = T.abs2(A) on pairs: a * b + c of each lane, its exact value (fractions)
    rounded once to the pair's type, as
    the GPU's fused multiply-add rounds it; |a| with -0.0 giving +0.0. The first lane is a case
    where rounding twice (to float32, then to float16) lands on a tie and goes the wrong way: a * b
    = 2^-11 - 2^-27, c = 1 + 2^-10, the exact sum just below the half-way point 1 + 2^-10 + 2^-11,
    so float16's answer is 1 + 2^-10 (float32 would round it up onto the tie, then to 1 + 2^-9)."""
    tdt = TORCH_OF[dtype]
    gen = torch.Generator().manual_seed(11)
    a, b, c = (torch.randn(64, generator=gen).to(tdt) for _ in range(3))
    a[0], b[0], c[0] = 0.99609375 * 2 ** -5, 1.00390625 * 2 ** -6, 1 + 2 ** -10
    a[1] = -0.0
    d, e, f = (torch.zeros(64, dtype=tdt) for _ in range(3))
    result = tilelab.run(ik.packed_fma_abs(dtype), a, b, c, d, e, f, device="cpu", outputs=["D", "E", "F"])
    assert result.passed, result
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a.double().tolist(), b.double().tolist(),
                                                                          c.double().tolist())]
    once = torch.tensor([_rounded_once(q, SIGNIFICANT_BITS[dtype]) for q in exact], dtype=torch.float64).to(tdt)
    assert torch.equal(d, once), (d - once).abs().max()
    if dtype == "float16":
        assert d[0].item() == 1 + 2 ** -10
    assert torch.equal(e, a.abs()) and not e[1].signbit()
    assert torch.equal(f, a + b)


@pytest.mark.heavy  # the lanewise stores' quick proof is fma2's
def test_wide_loads_by_hand_reinterpreted_as_float_lanes_store_their_bits():
    x = torch.randn(64)
    x[3] = float("nan")
    y2, y4 = torch.zeros(64), torch.zeros(64)
    result = tilelab.run(ik.wide_loads_as_floats(), x, y2, y4, device="cpu", outputs=["Y2", "Y4"])
    assert result.passed or result.outputs  # a NaN input: the outputs are checked for finiteness only
    assert torch.equal(y2.view(torch.int32), x.view(torch.int32))
    assert torch.equal(y4.view(torch.int32), x.view(torch.int32))


@pytest.mark.parametrize("dtype", ["bfloat16", pytest.param("float16", marks=pytest.mark.heavy)])
def test_a_vector_local_of_a_narrow_type_is_held_as_its_lanes_each_rounded(dtype):
    """T.alloc_var(bfloat16x2) built from A[1] * 3 and A[0], read by T.extract_lane: torch's own
    arithmetic in the narrow type (1.0078125 * 3 = 3.0234375 is a tie in bfloat16, between 3.015625 and
    3.03125: it rounds to the even one, 3.03125)."""
    tdt = TORCH_OF[dtype]
    a, b = torch.tensor([-2.5, 1.0078125], dtype=tdt), torch.zeros(2, dtype=tdt)
    result = tilelab.run(ik.pair_lanes(dtype), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    assert torch.equal(b, torch.stack([a[1] * 3, a[0]]))
    if dtype == "bfloat16":
        assert b[0].item() == 3.03125


def test_a_view_of_a_shared_tile_reads_its_bytes_or_is_refused_by_name_with_its_line():
    """T.view of a float32 shared tile as int8: the tile's bytes, as torch's view of the same floats
    (the CPU holds float32 as the GPU does); as bfloat16: refused with the view's line (the CPU holds
    a bfloat16 element in float32, so the halves of a word have no place), never a wrong read."""
    a = torch.randn(4, 8)
    b = torch.zeros(4, 32, dtype=torch.int8)
    result = tilelab.run(ik.shared_views("int8"), a, b, device="cpu", outputs=["B"])
    assert result.passed, result
    assert torch.equal(b, a.view(torch.int8))
    with pytest.raises(tilelab.EmulationError, match=r"a view of tile \(float32\) as bfloat16 \(line \d+: seen = "
                                                     r"T\.view\(tile"):
        tilelab.run(ik.shared_views("bfloat16"), a, torch.zeros(4, 16, dtype=torch.bfloat16), device="cpu",
                    outputs=["B"])


_M1, _M2 = 4294967087, 4294944443  # MRG32k3a (L'Ecuyer 1999): the two moduli and the step's matrices
_A1 = [[0, 1, 0], [0, 0, 1], [_M1 - 810728, 1403580, 0]]
_A2 = [[0, 1, 0], [0, 0, 1], [_M2 - 1370589, 0, 527612]]


def _mat3(a, b, m):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)] for i in range(3)]


def _mat3_pow(a, e, m):
    out = [[int(i == j) for j in range(3)] for i in range(3)]
    while e:
        if e & 1:
            out = _mat3(out, a, m)
        a, e = _mat3(a, a, m), e >> 1
    return out


def _mrg_outputs(seed, subsequence, offset, count):
    """curand's MRG32k3a: every word 12345, times the salted seed's words when the seed is not 0; then
    subsequence * 2^76 + offset steps (one matrix power of Python integers); then ``count`` outputs
    p1 - p2 in (0, m1]."""
    s1, s2 = [12345] * 3, [12345] * 3
    if seed:
        x1, x2 = (seed & _MASK) ^ 0x55555555, ((seed >> 32) & _MASK) ^ 0xAAAAAAAA
        s1 = [x1 * 12345 % _M1, x2 * 12345 % _M1, x1 * 12345 % _M1]
        s2 = [x2 * 12345 % _M2, x1 * 12345 % _M2, x2 * 12345 % _M2]
    steps = (subsequence % 2 ** 51) * 2 ** 76 + offset
    p1, p2 = _mat3_pow(_A1, steps, _M1), _mat3_pow(_A2, steps, _M2)
    s1 = [sum(p1[i][k] * s1[k] for k in range(3)) % _M1 for i in range(3)]
    s2 = [sum(p2[i][k] * s2[k] for k in range(3)) % _M2 for i in range(3)]
    out = []
    for _ in range(count):
        n1, n2 = (1403580 * s1[1] - 810728 * s1[0]) % _M1, (527612 * s2[2] - 1370589 * s2[0]) % _M2
        s1, s2 = [s1[1], s1[2], n1], [s2[1], s2[2], n2]
        out.append(n1 - n2 if n1 > n2 else n1 - n2 + _M1)
    return out


def test_the_reference_mrg32k3a_gives_lecuyers_first_number():
    """Seed 0 is the published generator (every word 12345): its first output, by hand, is
    (592852 * 12345 mod m1) - (-842977 * 12345 mod m2) = 3023790853 - 2478282264, L'Ecuyer's first
    number of the default stream, 0.127011122 (times 1 / (m1 + 1))."""
    assert _mrg_outputs(0, 0, 0, 1) == [545508589]
    assert round(545508589 / (_M1 + 1), 9) == 0.127011122
    assert _mrg_outputs(7, 0, 3, 2) == _mrg_outputs(7, 0, 0, 5)[3:]  # an offset is that many steps


def _xorwow_outputs(seed, subsequence, offset, count):
    """curand's XORWOW: the seed's words salted and mixed into v and the Weyl counter d, then
    subsequence * 2^67 + offset steps of v (a matrix power over GF(2) of 160-bit integers: bit 32 i + j
    is bit j of v[i]) and d += 362437 * offset; then ``count`` outputs v4 + d."""
    s0, s1 = (seed & _MASK) ^ 0xAAD26B49, ((seed >> 32) & _MASK) ^ 0xF7DCEFDD
    t0, t1 = 1099087573 * s0 & _MASK, 2591861531 * s1 & _MASK
    v = [(123456789 + t0) & _MASK, 362436069 ^ t0, (521288629 + t1) & _MASK, 88675123 ^ t1, (5783321 + t0) & _MASK]
    d = (6615241 + t1 + t0) & _MASK

    def step(w):
        t = w[0] ^ (w[0] >> 2)
        return [w[1], w[2], w[3], w[4], ((w[4] ^ (w[4] << 4)) ^ (t ^ (t << 1))) & _MASK]

    def pack(w):
        return sum(x << (32 * i) for i, x in enumerate(w))

    def unpack(x):
        return [(x >> (32 * i)) & _MASK for i in range(5)]

    def apply(rows, x):
        out = 0
        while x:
            low = x & -x
            out ^= rows[low.bit_length() - 1]
            x ^= low
        return out

    rows = [pack(step(unpack(1 << i))) for i in range(160)]
    state, e = pack(v), subsequence * 2 ** 67 + offset
    while e:
        if e & 1:
            state = apply(rows, state)
        rows, e = [apply(rows, r) for r in rows], e >> 1
    v, d = unpack(state), (d + 362437 * offset) & _MASK
    out = []
    for _ in range(count):
        v, d = step(v), (d + 362437) & _MASK
        out.append((v[4] + d) & _MASK)
    return out


def _box_muller(u, v):
    """sqrt(-2 ln u) times sin v, then times cos v (float64: the GPU's fast log and sine agree within
    their error, not bit for bit)."""
    radius = np.sqrt(-2 * np.log(u))
    return [radius * np.sin(v), radius * np.cos(v)]


@pytest.mark.parametrize("generator", ["curandStateMRG32k3a_t",
                                       pytest.param("curandStateXORWOW_t", marks=pytest.mark.heavy),
                                       pytest.param("curandStatePhilox4_32_10_t", marks=pytest.mark.heavy)])
def test_each_generator_draws_curands_streams_for_each_thread(generator):
    """Thread t: curand_init(seed, t, 5) of the generator, five words, a uniform float, a uniform
    double, three normal floats (MRG32k3a: two normal doubles too): the references above, and curand's
    conversions. MRG32k3a: a word is the output times 1.000000048662 truncated, a uniform the output
    times 1 / m1, a normal Box-Muller on two uniforms (x, 2 pi y; doubles: x, pi 2y). XORWOW: a word,
    x * 2^-32 + 2^-33, two words x ^ (y << 21) times 2^-53 plus 2^-54, Box-Muller on two words as Philox.
    Philox: its uniform double is one word, x * 2^-32 + 2^-32 (curand_uniform.h)."""
    threads, draws, seed, offset = 4, 5, 0x0123456789ABCDEF, 5
    mrg = generator == "curandStateMRG32k3a_t"
    words, uniform, double = torch.zeros(threads, draws, dtype=torch.int32), torch.zeros(threads), \
        torch.zeros(threads, dtype=torch.float64)
    normal, normal64 = torch.zeros(threads, 3), torch.zeros(threads, 2, dtype=torch.float64)
    result = tilelab.run(ik.generator_draws(generator, threads, draws, seed, offset, double_normals=mrg), words,
                         uniform, double, normal, normal64, device="cpu",
                         outputs=["W", "U", "D", "G", *(["H"] if mrg else [])])
    assert result.passed, result
    got = _np(words).view(np.uint32).tolist()
    if mrg:
        outs = [_mrg_outputs(seed, t, offset, draws + 10) for t in range(threads)]
        assert got == [[int(float(r) * 1.000000048662) for r in o[:draws]] for o in outs]
        assert got[0] != [int(float(r) * 1.000000048662) for r in _mrg_outputs(seed, 0, 0, draws)]  # offset kept
        unit = [[r * 2.3283065498378288e-10 for r in o[draws:]] for o in outs]
        np.testing.assert_array_equal(_np(uniform), [np.float32(u[0]) for u in unit])
        np.testing.assert_array_equal(_np(double), [u[1] for u in unit])
        f32 = [[float(np.float32(x)) for x in u] for u in unit]
        expected = [_box_muller(f[2], float(np.float32(f[3]) * np.float32(2 * np.pi))) + _box_muller(
            f[4], float(np.float32(f[5]) * np.float32(2 * np.pi)))[:1] for f in f32]
        np.testing.assert_allclose(_np(normal), expected, rtol=1e-4, atol=1e-5)
        expected64 = [_box_muller(u[6], np.pi * 2 * u[7]) for u in unit]
        np.testing.assert_allclose(_np(normal64), expected64, rtol=1e-12, atol=1e-12)
    elif generator == "curandStatePhilox4_32_10_t":
        outs = [_curand_words(seed, t, offset, draws + 6) for t in range(threads)]
        assert got == [o[:draws] for o in outs]
        np.testing.assert_array_equal(_np(double), [o[draws + 1] * 2.0 ** -32 + 2.0 ** -32 for o in outs])
        u01 = [[(w + 0.5) * 2.0 ** -32 for w in o[draws + 2:]] for o in outs]
        expected = [_box_muller(u[0], 2 * np.pi * u[1]) + _box_muller(u[2], 2 * np.pi * u[3])[:1] for u in u01]
        np.testing.assert_allclose(_np(normal), expected, rtol=1e-4, atol=1e-5)
    else:
        outs = [_xorwow_outputs(seed, t, offset, draws + 7) for t in range(threads)]
        assert got == [o[:draws] for o in outs]
        np.testing.assert_array_equal(_np(uniform), [np.float32(o[draws]) * np.float32(2.0 ** -32)
                                                     + np.float32(2.0 ** -33) for o in outs])
        np.testing.assert_array_equal(_np(double), [(o[draws + 1] ^ (o[draws + 2] << 21)) * 2.0 ** -53 + 2.0 ** -54
                                                    for o in outs])
        u01 = [[(w + 0.5) * 2.0 ** -32 for w in o[draws + 3:]] for o in outs]
        expected = [_box_muller(u[0], 2 * np.pi * u[1]) + _box_muller(u[2], 2 * np.pi * u[3])[:1] for u in u01]
        np.testing.assert_allclose(_np(normal), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.heavy  # a compile (about 1.5 s) for a refusal's text
def test_a_double_normal_of_xorwow_is_refused_by_name_with_the_forms_that_run():
    with pytest.raises(tilelab.EmulationError, match=r"tl\.rng_rand_float \(line \d+: .*normal of float64 from "
                                                     r"MRG32k3a"):
        tilelab.run(ik.generator_draws("curandStateXORWOW_t", double_normals=True),
                    torch.zeros(4, 5, dtype=torch.int32), torch.zeros(4), torch.zeros(4, dtype=torch.float64),
                    torch.zeros(4, 3), torch.zeros(4, 2, dtype=torch.float64), device="cpu", outputs=["W"])
