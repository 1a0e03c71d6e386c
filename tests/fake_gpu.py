"""The fakes of a GPU the tests share: :class:`FakeGpu`, a fake GPU timeline for bench's timing
loops, and :func:`timed`, the BenchResult a sweep's fake bench step returns.

Enough of torch for the sustained, warm-up and estimate loops: a launch adds its time (ms) to the
GPU's clock, an event records the clock, so an event pair around a launch reads that launch's
time. Every time is a number the test chose; nothing is measured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tilelab.launch import BenchResult


def timed(ms: float, kernel: str = "k", **fields: Any) -> BenchResult:
    """What a fake bench step returns for a kernel that took ``ms`` (three samples of it), with
    any other field of :class:`BenchResult` (``baseline=``, ``ratio_samples=``, ``flops=``)."""
    return BenchResult(kernel, samples_ms=(ms,) * 3, **fields)


class FakeGpu:
    """``series`` yields each launch's time in ms. The L2-flush buffer from ``empty`` costs
    ``flush_ms`` per zeroing, plus ``first_flush_ms`` the first time (a fill kernel loaded on first
    use), and counts its zeroings in ``flushes``."""

    int32 = "int32"

    def __init__(self, series: Iterator[float], flush_ms: float = 0.0, first_flush_ms: float = 0.0) -> None:
        self.series = series
        self.now_ms = 0.0
        self.launches = 0
        self.flushes = 0
        self.flush_ms, self.first_flush_ms = flush_ms, first_flush_ms
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t: float | None = None

            def record(self) -> None:
                self.t = gpu.now_ms

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: Event) -> float:
                return end.t - self.t

        class Cuda:
            def synchronize(self) -> None:
                pass

            def current_device(self) -> int:
                return 0

        self.cuda = Cuda()
        self.cuda.Event = Event

    def empty(self, *shape, **kw) -> FakeGpu._Flush:
        return FakeGpu._Flush(self)

    class _Flush:
        def __init__(self, gpu: FakeGpu) -> None:
            self.gpu = gpu

        def zero_(self) -> None:
            g = self.gpu
            g.now_ms += g.flush_ms + (g.first_flush_ms if g.flushes == 0 else 0.0)
            g.flushes += 1

    def launch(self) -> None:
        self.now_ms += next(self.series)
        self.launches += 1

    def clock_s(self) -> float:
        return self.now_ms / 1e3


class WanderingGpu(FakeGpu):
    """A fake GPU whose clock wanders, as a power-capped GPU's does: every launch of a kernel
    whose true time is ``true_ms`` (at the nominal clock) takes ``true_ms * slowdown * (1 + e)``,
    where ``slowdown = 1 + amplitude * x`` and ``x`` is a stationary AR(1) process in GPU time
    (standard deviation 1, correlation time ``tau_ms``: after ``dt`` ms it keeps ``exp(-dt/tau)``
    of itself) and ``e`` is independent per-launch noise of standard deviation ``noise``. The
    wander is seeded, so each test's fake is the same on every run."""

    def __init__(self, seed: int, amplitude: float = 0.02, tau_ms: float = 300.0, noise: float = 0.003,
                 flush_ms: float = 0.0) -> None:
        import random

        self.rng = random.Random(seed)
        self.amplitude, self.tau_ms, self.noise = amplitude, tau_ms, noise
        self.x = self.rng.gauss(0.0, 1.0)
        super().__init__(iter(()), flush_ms=flush_ms)

    def slowdown(self) -> float:
        return 1.0 + self.amplitude * self.x

    def _advance(self, dt_ms: float) -> None:
        import math

        keep = math.exp(-dt_ms / self.tau_ms)
        self.x = keep * self.x + math.sqrt(1.0 - keep * keep) * self.rng.gauss(0.0, 1.0)

    def idle(self, ms: float) -> None:
        """The GPU waits ``ms`` (the host between two calls): the clock goes on wandering."""
        self._advance(ms)
        self.now_ms += ms

    def kernel(self, true_ms: float):
        """A zero-argument launch of a kernel whose true time is ``true_ms``."""
        def launch() -> None:
            took = true_ms * self.slowdown() * (1.0 + self.noise * self.rng.gauss(0.0, 1.0))
            self._advance(took)
            self.now_ms += took
            self.launches += 1
        return launch


class SweepGpu:
    """The sweep tests' fake GPU, the one model of a sweep's compile and bench steps:
    ``compile_fn=gpu.compile`` makes each configuration's kernel (``kernel_of(config)``, a dict of
    the configuration by default, a new object per compile; a configuration whose ``key`` is in
    ``fail`` raises as ptxas does), and ``bench_fn=gpu.bench`` times a kernel at what the test's
    landscape ``time(kernel, size, config, **options)`` says: milliseconds, or a whole BenchResult
    (a side-by-side measurement's). Every bench call is kept in ``log`` as (kernel, size, config,
    options). A test gives its landscape as ``time=`` or as a subclass's ``time``."""

    def __init__(self, time: Any = None, *, kernel_of: Any = None, fail: Any = (), key: Any = None) -> None:
        if time is not None:
            self.time = time  # type: ignore[method-assign]
        self.kernel_of = kernel_of or dict
        self.key = key or (lambda config: tuple(config.values()))
        self.fail = set(fail)
        self.log: list[tuple[Any, Any, dict[str, Any], dict[str, Any]]] = []

    def compile(self, factory: Any, size: Any, config: dict[str, Any]) -> Any:
        def step() -> Any:
            if self.key(config) in self.fail:
                raise RuntimeError("ptxas: too many resources requested")
            return self.kernel_of(config)
        return step

    def bench(self, kernel: Any, size: Any, config: dict[str, Any], **options: Any) -> BenchResult:
        self.log.append((kernel, size, config, options))
        out = self.time(kernel, size, config, **options)
        return out if isinstance(out, BenchResult) else timed(out)

    def time(self, kernel: Any, size: Any, config: dict[str, Any], **options: Any) -> float | BenchResult:
        raise NotImplementedError("give the landscape: SweepGpu(time=...) or a subclass's time()")


def v_around_64(kernel: Any, size: Any, config: dict[str, Any], **options: Any) -> float:
    """A landscape of one parameter: ``block`` 64 is the fastest (1 ms), each 64 away costs 1 ms."""
    return 1.0 + abs(config["block"] - 64) / 64
