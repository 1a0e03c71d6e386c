"""A device-side assert or a trap located without a GPU, and a TMA descriptor refused at launch
mapped to the driver's rule.

The assert output is what the CUDA runtime prints (its format, taken from real runs of other
programs), with TileLang's helper's file and line read from TileLang's own debug.h; the kernels
are ours (tests/fault_kernels.py), lowered for sm_90a here, and the expected lines are found by
reading that file. The TMA refusals are TileLang's own findings, read from its runtime source.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import fault_kernels as fk
import pytest
import worker_fakes as fakes

from tilelab.engine import tma_rules as _tma_rules
from tilelab.launch import KernelLaunchError
from tilelab.launch import _device_faults as df
from tilelab.launch import _tma_refusal as tr
from tilelab.launch._cuda_errors import classify_cuda_error, launch_error

KERNELS_FILE = Path(fk.__file__)


def _line_of(text: str) -> int:
    """The 1-based line of tests/fault_kernels.py that contains ``text`` (exactly one)."""
    found = [n for n, line in enumerate(KERNELS_FILE.read_text().splitlines(), start=1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


def _debug_header() -> tuple[str, list[str]]:
    import tilelang

    path = Path(tilelang.__file__).parent / "src" / "tl_templates" / "cuda" / "debug.h"
    return str(path), path.read_text().splitlines()


def _helper_assert_line(with_msg: bool) -> int:
    """The line of TileLang's helper whose assert() fires: CUDA's message names this line."""
    _, lines = _debug_header()
    name = "device_assert_with_msg" if with_msg else "device_assert"
    start = next(n for n, line in enumerate(lines) if re.search(rf"\b{name}\(bool", line))
    return next(n for n in range(start, len(lines)) if "assert(" in lines[n] and name not in lines[n]) + 1


def _cuda_assert_lines(with_msg: bool, threads: list[tuple[int, int, int]], block=(3, 0, 0)) -> str:
    """stderr as the CUDA runtime prints a failing assert of TileLang's helper, one line per thread."""
    path, _ = _debug_header()
    function = ("void device_assert_with_msg(bool, const char *)" if with_msg else "void device_assert(bool)")
    expression = "0" if with_msg else "cond"
    return "".join(f"{path}:{_helper_assert_line(with_msg)}: {function}: block: [{block[0]},{block[1]},{block[2]}], "
                   f"thread: [{t[0]},{t[1]},{t[2]}] Assertion `{expression}` failed.\n" for t in threads)


@pytest.fixture(scope="module")
def lowered():
    """Each kernel's device source and #line origins, lowered for sm_90a (no GPU, no nvcc)."""
    names = ("asserting", "asserting_bare", "trapping")
    return {name: df.line_origins(getattr(fk, name)(), "sm_90a") for name in names}


def _device_line(source: str, text: str) -> int:
    found = [n for n, line in enumerate(source.split("\n"), start=1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


# --------------------------------------------------------------------------------------------
# CUDA's assert lines
# --------------------------------------------------------------------------------------------

REAL_LINES = [  # as printed by CUDA programs on Linux (a function) and Windows (none), lambdas included
    ("/opt/conda/conda-bld/pytorch_1695392067780/work/aten/src/ATen/native/cuda/Loss.cu:94: operator(): "
     "block: [1,0,0], "
     "thread: [53,0,0] Assertion `input_val >= zero && input_val <= one` failed.",
     ("/opt/conda/conda-bld/pytorch_1695392067780/work/aten/src/ATen/native/cuda/Loss.cu", 94, "operator()", (1, 0, 0),
      (53, 0, 0), "input_val >= zero && input_val <= one")),
    ("C:/cb/pytorch_1000000000000/work/aten/src/THC/THCTensorIndex.cu:218: block: [0,0,0], thread: [106,0,0] "
     "Assertion `srcIndex < srcSelectDimSize` failed.",
     ("C:/cb/pytorch_1000000000000/work/aten/src/THC/THCTensorIndex.cu", 218, None, (0, 0, 0), (106, 0, 0),
      "srcIndex < srcSelectDimSize")),
    ("/tmp/pip-req-build-ufslq_a9/aten/src/ATen/native/cuda/IndexKernel.cu:60: lambda ->auto::operator()(int)->auto: "
     "block: [36,0,0], thread: [104,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` "
     "failed.",
     ("/tmp/pip-req-build-ufslq_a9/aten/src/ATen/native/cuda/IndexKernel.cu", 60,
      "lambda ->auto::operator()(int)->auto",
      (36, 0, 0), (104, 0, 0), 'index >= -sizes[i] && index < sizes[i] && "index out of bounds"')),
]


@pytest.mark.parametrize("line, expected", REAL_LINES)
def test_cuda_assert_lines_are_parsed_field_by_field(line, expected):
    (found,) = df.parse_assert_lines("some other output\n" + line + "\n")
    assert (found.file, found.line, found.function, found.block, found.thread, found.expression) == expected


def test_a_whole_grid_of_assert_lines_is_folded_to_a_few_and_a_count():
    text = "before\n" + _cuda_assert_lines(True, [(t, 0, 0) for t in range(300)]) + "after\n"
    folded = df.fold_assert_lines(text, keep=3)
    assert len(df.parse_assert_lines(folded)) == 3
    assert "before" in folded and "after" in folded and "297 more thread(s)" in folded


def test_a_device_side_assert_is_its_own_kind_and_loses_the_context():
    assert classify_cuda_error("CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` to enable "
                               "device-side assertions.") == ("device_assert", True)
    assert classify_cuda_error("cudaErrorAssert: device-side assert triggered") == ("device_assert", True)
    # torch's hint on every CUDA error names device-side assertions: a trap's error is a launch failure
    assert classify_cuda_error("CUDA error: unspecified launch failure\nSearch for `cudaErrorLaunchFailure' in "
                               "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more "
                               "information.\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
                               ) == ("launch_failure", True)
    assert classify_cuda_error("CUDA error: unspecified launch failure") == ("launch_failure", True)


# --------------------------------------------------------------------------------------------
# Locating an assert or a trap in our kernels
# --------------------------------------------------------------------------------------------


def test_an_assert_with_a_message_names_its_line_the_thread_and_the_message(lowered):
    source, origins = lowered["asserting"]
    line = _line_of('T.device_assert(A[bx * block + i] >= 0.0, "A must be non-negative")')
    # TileLang's helper printf()s the message and T.device_assert's stack, once per failing thread
    stdout = "".join(f"Device assert failed: A must be non-negative\n  at {KERNELS_FILE}:{line} in checked\n\n"
                     for _ in range(2))
    fault = df.locate("assert", source, stdout=stdout, stderr=_cuda_assert_lines(True, [(17, 0, 0), (18, 0, 0)]),
                      origins=origins)
    assert fault.device_line == _device_line(source, "device_assert_with_msg(")
    assert (fault.cell_file, fault.cell_line) == (str(KERNELS_FILE), line)
    assert fault.message == "A must be non-negative"
    assert fault.block == (3, 0, 0) and fault.thread == (17, 0, 0) and fault.threads == 2
    text = df.describe(fault)
    assert f"your line {line} (fault_kernels.py)" in text and "A must be non-negative" in text
    assert "block (3, 0, 0), thread (17, 0, 0)" in text and "2 threads" in text


def test_an_assert_without_a_message_is_found_through_the_line_directives(lowered):
    source, origins = lowered["asserting_bare"]
    fault = df.locate("assert", source, stderr=_cuda_assert_lines(False, [(5, 0, 0)], block=(9, 0, 0)),
                      origins=origins)
    assert fault.device_line == _device_line(source, "device_assert(")
    # T.device_assert is a macro: the directives name TileLang's file; the line that calls it is ours
    assert fault.cell_line == _line_of("T.device_assert(A[bx * block + i] >= 0.0, no_stack_info=True)")
    assert fault.message is None and fault.block == (9, 0, 0) and fault.thread == (5, 0, 0)
    assert fault.unlocated is None


def test_a_trap_names_its_line_and_says_it_reports_no_thread(lowered):
    source, origins = lowered["trapping"]
    fault = df.locate("trap", source, origins=origins)
    assert fault.device_line == _device_line(source, "__trap()")
    assert fault.cell_line == _line_of('T.call_extern("void", "__trap")')
    assert fault.block is None and "a trap reports no block, thread or message" in df.describe(fault)


def test_a_launch_failure_of_a_kernel_without_a_trap_is_not_called_a_trap(lowered):
    source, _ = lowered["asserting"]
    assert df.locate("trap", source) is None


def test_two_asserts_without_messages_are_both_named_not_guessed():
    source = "\n".join(["__global__ void k(float* A) {", "  device_assert(A[0] > 0);", "  device_assert(A[1] > 0);",
                         "}"])
    fault = df.locate("assert", source, stderr=_cuda_assert_lines(False, [(0, 0, 0)]))
    assert fault.device_line is None and fault.candidates == (2, 3)
    assert "give each T.device_assert a message" in fault.unlocated


def test_the_located_error_crosses_from_the_worker_intact(lowered):
    source, origins = lowered["trapping"]
    err = KernelLaunchError("trap_on_negative", "launch_failure", "RuntimeError: unspecified launch failure",
                            sticky=True)
    err.device_fault = df.locate("trap", source, origins=origins)
    err.refresh()
    again = pickle.loads(pickle.dumps(err))
    assert again.device_fault == err.device_fault and str(again) == str(err)
    assert df.DeviceFault.from_dict(err.device_fault.to_dict()) == err.device_fault
    assert "your line" in str(again) and "device line" in str(again)


def test_the_notebook_side_locates_an_assert_from_the_workers_output():
    """with_device_fault: the kernel re-lowered with #line directives, the worker's text."""
    from tilelab.launch._device_faults import with_device_fault
    from tilelab.launch._kernel import Prepared

    func = fk.asserting_bare()
    prepared = Prepared(func, "checked_bare", [], "tvm_ffi")  # a prim_func: no launched source to read
    err = KernelLaunchError("checked_bare", "device_assert", "RuntimeError: CUDA error: device-side assert triggered",
                            sticky=True)
    err.worker_stderr = _cuda_assert_lines(False, [(7, 0, 0)], block=(2, 0, 0))
    with_device_fault(err, prepared)
    line = _line_of("T.device_assert(A[bx * block + i] >= 0.0, no_stack_info=True)")
    assert err.device_fault is not None and err.device_fault.cell_line == line
    assert f"your line {line}" in str(err) and "block (2, 0, 0), thread (7, 0, 0)" in str(err)
    assert str(err).startswith("checked_bare: a device-side assert failed")


# --------------------------------------------------------------------------------------------
# The worker's stderr
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker():
    from tilelab.launch._worker import Worker

    w = Worker(device=0)
    yield w
    w.close()


def test_the_workers_stderr_is_kept_on_the_error_and_shown_folded(worker, capfd):
    with pytest.raises(KernelLaunchError) as info:
        worker.call(fakes.fail_device_assert, 5)
    assert len(df.parse_assert_lines(info.value.worker_stderr)) == 5  # all of them, for locating
    shown = capfd.readouterr().err
    assert len(df.parse_assert_lines(shown)) == 3 and "2 more thread(s)" in shown
    assert not worker.alive  # sticky: the context is lost, the process discarded
    assert worker.call(fakes.add, 1, 2) == 3


def test_a_crash_keeps_its_last_words_on_stderr(worker):
    from tilelab.launch._worker import WorkerDied

    with pytest.raises(WorkerDied) as info:
        worker.call(fakes.crash_with_last_words, 6)
    assert "terminate called after throwing" in info.value.stderr
    assert worker.call(fakes.add, 2, 2) == 4


# --------------------------------------------------------------------------------------------
# TMA descriptors refused at launch
# --------------------------------------------------------------------------------------------


def _runtime_findings() -> list[str]:
    """Every finding TileLang's launcher prints before cuTensorMapEncodeTiled, from its C++ source,
    with each number it puts in written as 16 and each name as FLOAT16."""
    import tilelang

    text = (Path(tilelang.__file__).parent / "src" / "cuda" / "runtime.cc").read_text()
    body = text[text.index("ValidateTensorMapArgs"):]
    body = body[:body.index("return issues;")]
    out = []
    for start in (m.end() for m in re.finditer(r"issues\.push_back\(", body)):
        argument = body[start:body.index(");", start)]
        parts = re.split(r'("(?:[^"\\]|\\.)*")', argument)
        pieces = []
        for part in parts:
            if part.startswith('"'):
                pieces.append(part[1:-1])
            elif "to_string" in part:
                pieces.append("16")
            elif "ToString" in part:
                pieces.append("FLOAT16")
        out.append("".join(pieces))
    return out


def test_every_finding_of_tilelangs_launcher_maps_to_one_of_our_rules():
    findings = _runtime_findings()
    assert len(findings) >= 20, findings
    for text in findings:
        rule_id = tr.rule_of_runtime_finding(text)
        if text.startswith("tensorMap "):
            assert rule_id is None  # TileLang's own 64-byte map buffer: no rule of the user's
        else:
            assert rule_id in _tma_rules.RULES, text


def test_a_refusal_message_is_mapped_to_the_rule():
    message = ("Invalid TMA descriptor arguments for __tvm_tensormap_create_tiled:\n"
               "  [1] effective cuda globalStrides[0] (raw globalStride[1] = 2002) must be a multiple of 16 bytes\n"
               "TMA Desc Addr:   0x7ffd4c0 (mod64=0)\nformat         6 (FLOAT16)\n")
    assert tr.rules_from_message(message) == [
        ("global_stride_multiple",
         "effective cuda globalStrides[0] (raw globalStride[1] = 2002) must be a multiple of 16 bytes")]


class _Tensor:
    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


@pytest.fixture(scope="module")
def tma_rows_descriptors():
    import tilelab

    return tilelab.inspect(fk.tma_rows(), "sm_90a").tma_descriptors


@pytest.mark.parametrize("K", [1001, 1004, 1024, 1032])
def test_a_dynamic_size_whose_row_stride_the_driver_refuses_names_the_rule(K, tma_rows_descriptors):
    params = [SimpleNamespace(name="A"), SimpleNamespace(name="B")]
    args = [_Tensor(0x7F0000000000), _Tensor(0x7F0000200000)]
    found = tr.broken_rules(tma_rows_descriptors, params, args, {"K": K})
    refused = (K * 2) % 16 != 0  # fp16 rows of K elements: the driver's 16-byte stride rule
    assert [(name, rule) for name, rule, _ in found] == ([("B_desc", "global_stride_multiple")] if refused else [])
    if refused:
        assert f"globalStrides[1] is {K * 2}" in found[0][2]


def test_the_launch_error_of_a_refused_descriptor_says_the_rule_in_the_drivers_words(tma_rows_descriptors):
    prepared = SimpleNamespace(params=[SimpleNamespace(name="A", passed_at_launch=True),
                                       SimpleNamespace(name="B", passed_at_launch=True),
                                       SimpleNamespace(name="K", passed_at_launch=False)],
                               tma_descriptors=lambda: tma_rows_descriptors)
    args = [_Tensor(0x7F0000000000), _Tensor(0x7F0000200000)]
    refusal = RuntimeError("Invalid TMA descriptor arguments for __tvm_tensormap_create_tiled:\n  [1] effective cuda "
                           "globalStrides[0] (raw globalStride[1] = 2002) must be a multiple of 16 bytes\n")
    err = launch_error("tma_rows_kernel", refusal, tma_rules=lambda m: tr.refused_rules(prepared, args, {"K": 1001}, m))
    assert err.kind == "tma_descriptor" and not err.sticky
    assert err.tma_rules and err.tma_rules[0].startswith("B_desc: global_stride_multiple: globalStrides[1] is 2002")
    assert "must be a multiple of 16" in str(err) and "the driver's rule it breaks" in str(err)
    # the bare driver error of the C++ launcher (no findings) still gets the rule from the descriptors
    bare = RuntimeError("Error: Failed to initialize the TMA descriptor B_desc")
    err = launch_error("tma_rows_kernel", bare, tma_rules=lambda m: tr.refused_rules(prepared, args, {"K": 1001}, m))
    assert err.tma_rules and "global_stride_multiple" in err.tma_rules[0]


# --------------------------------------------------------------------------------------------
# What the CUDA toolkit makes of our kernel: the assert is compiled in
# --------------------------------------------------------------------------------------------


CUDA = Path("/usr/local/cuda")  # as tests/test_toolchain.py: the toolkit, not the test run's nvcc shim


def _ptx(kernel) -> str:
    import tilelab
    from tilelab.engine.toolchain import find_toolchain

    tools = find_toolchain(CUDA)
    if tools.nvcc is None or tools.ptxas is None:
        pytest.skip(f"needs nvcc and ptxas in {CUDA}/bin to compile the kernel's device source")
    machine = tilelab.inspect(kernel, "sm_90a", toolchain=True, cuda_home=CUDA).machine
    if machine is None or machine.missing:
        pytest.skip(f"the toolchain tier did not compile: {machine.missing if machine else 'no machine code'}")
    return machine.ptx


@pytest.mark.slow
def test_the_kernels_assert_is_compiled_in():
    """TileLang compiles without NDEBUG: a false T.device_assert calls CUDA's __assertfail (which
    prints the line parsed above) after printf-ing its message (one nvcc run, about 10 s)."""
    ptx = _ptx(fk.asserting())
    assert "__assertfail" in ptx and "vprintf" in ptx


def test_the_per_thread_messages_on_stdout_are_folded_too():
    block = "Device assert failed: A must be non-negative\n  at /k.py:8 in checked\n\n"
    text = "before\n" + block * 50 + "after\n"
    folded = df.fold_assert_messages(text, keep=3)
    assert folded.count("Device assert failed: A must be non-negative") == 4  # 3 shown, 1 in the count
    assert "47 more thread(s) printed" in folded and "before" in folded and "after" in folded
    assert df.parse_messages(folded) == [("A must be non-negative", (("/k.py", 8, "checked"),))]


def test_without_the_printf_the_one_assert_that_can_have_fired_gives_its_message(lowered):
    source, origins = lowered["asserting"]
    fault = df.locate("assert", source, stderr=_cuda_assert_lines(True, [(1, 0, 0)]), origins=origins)
    assert fault.message == "A must be non-negative"
    assert fault.cell_line == _line_of('T.device_assert(A[bx * block + i] >= 0.0, "A must be non-negative")')


# --------------------------------------------------------------------------------------------
# The catalogue the GPU test and benchmarks/isolation.py share
# --------------------------------------------------------------------------------------------


def test_the_catalogue_has_fifteen_faults_and_says_which_it_cannot_run_here():
    import fault_catalogue as catalogue

    ids = [case.id for case in catalogue.CASES]
    assert len(ids) >= 15 and len(set(ids)) == len(ids)

    def must_not_run() -> catalogue.Outcome:
        raise AssertionError("a case whose code is missing must not run")

    absent = catalogue.Case("later", "code another module will provide", must_not_run, lambda o: None,
                            needs=("fault_kernels:no_such_kernel",))
    outcome = catalogue.run_case(absent)
    assert not outcome.available and "fault_kernels:no_such_kernel" in outcome.shown
    present = catalogue.Case("here", "code that exists", lambda: catalogue.Outcome("err", "timeout", 1.0, True),
                             lambda o: None if o.kind == "timeout" else "wrong kind", needs=("fault_kernels:copy",))
    assert catalogue.run_case(present).problem is None
