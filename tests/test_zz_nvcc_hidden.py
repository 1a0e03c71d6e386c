"""Runs last (by name): inspection across the whole suite never called nvcc."""

import os

import pytest


def test_nvcc_was_never_called(nvcc_log):
    if os.environ.get("TILELAB_NVCC_HIDDEN") != "1":
        pytest.skip("a GPU is present: nvcc is not hidden on this machine")
    import shutil

    assert shutil.which("nvcc") and "cuda-hidden" in shutil.which("nvcc")  # the shim stands first
    calls = nvcc_log.read_text() if nvcc_log.exists() else ""
    assert calls == "", f"nvcc was called during the suite:\n{calls}"
