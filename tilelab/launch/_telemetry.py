"""GPU telemetry during a measurement: clocks, power, temperature and throttle reasons from NVML.

``Telemetry`` is a record (:mod:`tilelab.records.launch`); ``NvmlSampler`` samples in a background
thread through NVIDIA's ``nvidia-ml-py`` bindings (``pip install "tilelab[telemetry]"``). Without them, or without a
driver, the sampler records nothing and says why.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..records.launch import THROTTLE_REASONS, Telemetry

SAMPLE_INTERVAL_S = 0.01


class NvmlSampler:
    """``with NvmlSampler(device_index) as s: ...`` then ``s.result()``: a Telemetry."""

    def __init__(self, index: int = 0, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.index, self.interval_s = index, interval_s
        self._samples: list[tuple[float, int, int, float, int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._note = ""
        self._max_sm: int | None = None
        self._nvml: Any = None
        self._handle: Any = None

    def __enter__(self) -> NvmlSampler:
        try:
            import pynvml  # from nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            self._max_sm = int(pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM))
        except ImportError:
            self._note = 'nvidia-ml-py is not installed (pip install "tilelab[telemetry]")'
            return self
        except Exception as err:  # no driver, no device
            self._note = f"NVML unavailable: {err}"
            return self
        self._t0 = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="tilelab-nvml", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        n, h = self._nvml, self._handle
        try:
            read_reasons = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) \
                or n.nvmlDeviceGetCurrentClocksThrottleReasons
            reasons = read_reasons(h)
            self._samples.append((
                time.perf_counter() - self._t0, int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
                int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)), n.nvmlDeviceGetPowerUsage(h) / 1000.0,
                int(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)), int(reasons)))
        except Exception as err:
            self._note = f"NVML sampling failed: {err}"
            self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._sample()
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def result(self) -> Telemetry:
        return Telemetry(tuple(self._samples), self._max_sm, self._note)


__all__ = ["NvmlSampler", "THROTTLE_REASONS", "Telemetry"]
