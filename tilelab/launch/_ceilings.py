"""The device's ceilings, measured once per device and cached.

A large device-to-device copy (bytes read plus bytes written per second) and a large matmul
through torch, both timed in ``sustained`` mode. The cache is a JSON file under
``~/.cache/tilelab/`` (``$TILELAB_CEILINGS`` overrides the path), keyed by device name, driver
version and torch version, so a driver or torch upgrade measures again.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ..records.launch import Ceilings


def cache_path() -> Path:
    override = os.environ.get("TILELAB_CEILINGS")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tilelab" / "ceilings.json"


def cache_key(device: str, driver: str, torch_version: str) -> str:
    return f"{device} | driver {driver} | torch {torch_version}"


def read_cache(key: str, path: Path | None = None) -> Ceilings | None:
    path = path or cache_path()
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = entries.get(key) if isinstance(entries, dict) else None
    return Ceilings.from_dict(entry) if entry else None


def write_cache(ceilings: Ceilings, path: Path | None = None) -> Path:
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        entries = json.loads(path.read_text())
        if not isinstance(entries, dict):
            entries = {}
    except (OSError, ValueError):
        entries = {}
    entries[ceilings.key] = ceilings.to_dict()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    tmp.replace(path)
    return path


def driver_version() -> str:
    """The NVIDIA driver version ("580.159.04"), by NVML, else nvidia-smi, else the CUDA driver API."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        value = pynvml.nvmlSystemGetDriverVersion()
        return value.decode() if isinstance(value, bytes) else str(value)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from cuda.bindings import driver

        err, version = driver.cuDriverGetVersion()
        return f"cuda {version // 1000}.{(version % 1000) // 10}"
    except Exception:
        return "unknown"


def current_key(torch: Any) -> str:
    """The cache key of the GPU ``torch`` sees now."""
    return cache_key(torch.cuda.get_device_name(), driver_version(), torch.__version__)


def measure_once(*, copy_bytes: int, matmul_n: int, dtype: str, rep_ms: float, key: str) -> Ceilings:
    """The two measurements, uncached, here (:func:`tilelab.launch.measure_ceilings` chooses where)."""
    import torch

    from ._bench import measure
    from ._options import BenchOptions

    device = torch.cuda.get_device_name()
    src = torch.randn(copy_bytes // 2, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    copy = measure(torch, lambda: dst.copy_(src), (),  # noqa: F821 (called before the del below)
                   BenchOptions(bytes=2.0 * copy_bytes, flush_l2=False, rep_ms=rep_ms, name="copy"), {})
    del src, dst
    tdt = getattr(torch, dtype)
    a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=tdt)
    b = torch.randn(matmul_n, matmul_n, device="cuda", dtype=tdt)
    mm = measure(torch, lambda: torch.matmul(a, b), (),  # noqa: F821 (called before the del below)
                 BenchOptions(flops=2.0 * matmul_n ** 3, rep_ms=rep_ms, name="torch.matmul"), {})
    del a, b
    torch.cuda.empty_cache()
    ceilings = Ceilings(
        device=device, copy_gbps=float(copy.gbps or 0.0), matmul_tflops=float(mm.tflops or 0.0),
        matmul_dtype=dtype, matmul_shape=(matmul_n, matmul_n, matmul_n), copy_bytes=copy_bytes,
        driver=key.split(" | driver ")[1].split(" | torch ")[0], torch_version=torch.__version__,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        method=(f"median of sustained CUDA-event timings: Tensor.copy_ of {copy_bytes >> 20} MiB "
                f"(bytes read + written), torch.matmul {dtype} {matmul_n}^3 on random data"),
    )
    return ceilings
