"""Importing TileLang and reading the environment it runs in: its version, the local GPU's arch,
and TileLang's registry of pass configs."""

from __future__ import annotations

import functools
import os
from typing import Any


@functools.cache
def tilelang():  # -> module
    """Import TileLang quietly (its compile banner is on by default and floods notebooks)."""
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    import tilelang as _tl

    return _tl


def tilelang_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilelang")
    except Exception:  # pragma: no cover - only when metadata is missing
        return str(getattr(tilelang(), "__version__", "unknown"))


@functools.cache
def local_gpu_arch() -> str | None:
    """The local GPU's arch as a TileLang target name ("sm_90a" on Hopper), or None."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
    except Exception:
        return None
    suffix = "a" if (major, minor) in ((9, 0), (10, 0), (10, 3)) else ""
    return f"sm_{major}{minor}{suffix}"


def has_gpu() -> bool:
    return local_gpu_arch() is not None


def normalize_pass_configs(pass_configs: dict[str, Any] | None) -> dict[str, Any]:
    """TileLang's own normalisation (one default comes from an environment variable)."""
    from tilelang.transform.pass_config import normalize_pass_configs as _normalize

    tilelang()
    return dict(_normalize(dict(pass_configs or {})))


def known_pass_config_keys() -> list[str]:
    tilelang()
    from tilelang.transform.pass_config import PassConfigKey

    return sorted(str(k.value) for k in PassConfigKey)
