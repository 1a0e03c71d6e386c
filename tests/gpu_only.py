"""What a GPU test module calls first: skip the whole module, with the reason, where torch sees no
CUDA GPU (its module-level code builds GPU tensors and imports examples that need one)."""

from __future__ import annotations

import pytest


def cuda_reason() -> str | None:
    """Why CUDA tests cannot run here, or None when they can."""
    try:
        import torch
    except ImportError:
        return "torch is not importable"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch sees none on this machine (run `make test-gpu` on a machine with one)"
    return None


def skip_module_without_cuda(module: str) -> None:
    """Skip ``module`` (its ``__name__``, named in the reason) where CUDA tests cannot run."""
    reason = cuda_reason()
    if reason:
        pytest.skip(f"{module}: {reason}", allow_module_level=True)
