"""The suite's guard against nvcc: the shim is first on PATH and the per-test check catches a call."""

import os
import shutil
import subprocess

import pytest


def _hidden() -> None:
    if os.environ.get("TILELAB_NVCC_HIDDEN") != "1":
        pytest.skip("a GPU is present: nvcc is not hidden on this machine")


def test_the_shim_stands_first_on_path_and_as_cuda_home():
    _hidden()
    found = shutil.which("nvcc")
    assert found and "cuda-hidden" in found
    assert os.environ["CUDA_HOME"] in found


@pytest.mark.calls_nvcc
def test_a_call_to_the_hidden_nvcc_fails_and_is_recorded(nvcc_log):
    _hidden()
    before = nvcc_log.read_text() if nvcc_log.exists() else ""
    done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True)
    assert done.returncode == 127 and "hidden" in done.stderr
    after = nvcc_log.read_text()
    assert after[len(before):] == "nvcc --version\n"
