"""GPU telemetry during a measurement: clocks, power, temperature and throttle reasons from NVML.

``Telemetry`` is plain data; ``NvmlSampler`` samples in a background thread through NVIDIA's
``nvidia-ml-py`` bindings (``pip install "tilelab[telemetry]"``). Without them, or without a
driver, the sampler records nothing and says why.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

# nvmlClocksEventReasons bits (nvml.h). Idle, application-clock and display settings are not throttling.
THROTTLE_REASONS = {
    0x1: "gpu idle", 0x2: "applications clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
    0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown", 0x100: "display clock setting",
}
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
SAMPLE_INTERVAL_S = 0.01


@dataclass(frozen=True)
class Telemetry:
    """Samples taken during one measurement: (seconds since start, SM MHz, memory MHz, W, deg C, reasons)."""

    samples: tuple[tuple[float, int, int, float, int, int], ...] = ()
    max_sm_mhz: int | None = None  # the GPU's maximum SM clock
    note: str = ""

    @property
    def sm_mhz(self) -> list[int]:
        return [s[1] for s in self.samples]

    @property
    def throttle_mask(self) -> int:
        mask = 0
        for s in self.samples:
            mask |= s[5]
        return mask

    @property
    def throttled(self) -> bool:
        """True when any sample carries a power, thermal or hardware slowdown reason."""
        return bool(self.throttle_mask & THROTTLING)

    @property
    def reasons(self) -> list[str]:
        mask = self.throttle_mask
        return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]

    def summary(self) -> str:
        if not self.samples:
            return f"no telemetry ({self.note})" if self.note else "no telemetry"
        sm, power, temp = self.sm_mhz, [s[3] for s in self.samples], [s[4] for s in self.samples]
        text = (f"SM {min(sm)}-{max(sm)} MHz (median {statistics.median(sm):.0f}), mem {self.samples[0][2]} MHz, "
                f"{statistics.median(power):.0f} W median (max {max(power):.0f}), {max(temp)} C max, "
                f"{len(self.samples)} samples")
        if self.throttled:
            text += "; THROTTLED: " + ", ".join(r for r in self.reasons
                                                 if any(b for b, n in THROTTLE_REASONS.items() if n == r and b & THROTTLING))
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"samples": [list(s) for s in self.samples], "max_sm_mhz": self.max_sm_mhz, "note": self.note,
                "throttled": self.throttled, "reasons": self.reasons}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Telemetry:
        return cls(tuple((float(a), int(b), int(c), float(e), int(f), int(g)) for a, b, c, e, f, g in d.get("samples", ())),
                   d.get("max_sm_mhz"), d.get("note", ""))


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
            reasons = n.nvmlDeviceGetCurrentClocksEventReasons(h) if hasattr(n, "nvmlDeviceGetCurrentClocksEventReasons") \
                else n.nvmlDeviceGetCurrentClocksThrottleReasons(h)
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
