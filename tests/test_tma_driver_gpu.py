"""The TMA rule checker held against the real CUDA driver (needs a Hopper GPU and cuda-python).

For every rule of tilelab/engine/tma_rules.py, one test id per rule:
* ``test_driver_accepts_good_variant[<rule>]``: the good variant encodes (CUDA_SUCCESS);
* ``test_driver_rejects_bad_example[<rule>]``: the hand-made bad descriptor is refused. A failure
  here names a rule the driver does not enforce: set ``driver_enforced=False`` on it.
* ``test_driver_refuses_what_arch_findings_predict[<rule>]``: on sm_9x, every good example
  that ``_tma_rules.arch_findings`` says the driver refuses there (128B_ATOM swizzles, packed
  16U4/16U6 types) is refused; such examples cannot verify their own rule on that GPU.
And every example kernel's descriptors, symbolic sizes set to 1024, encode on real buffers.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from tilelab.engine import tma_rules as rules

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch", reason="torch is needed to create a CUDA context and real buffers")
if not torch.cuda.is_available():
    pytest.skip("torch.cuda.is_available() is False: no CUDA GPU to encode descriptors on", allow_module_level=True)
pytest.importorskip("cuda.bindings.driver", reason="cuda-python (cuda.bindings.driver) is not installed: "
                    "pip install 'tilelab[nvrtc]'")

from tilelab.launch._tma_driver import encode_with_driver  # noqa: E402

EXAMPLES = rules.bad_examples()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def base_address():
    """A real device address, 256-byte aligned; the buffer lives as long as the module."""
    from cuda.bindings import driver

    (err,) = driver.cuInit(0)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    buffer = torch.empty((1 << 22) + 256, dtype=torch.uint8, device="cuda")  # makes torch's context current
    yield (buffer.data_ptr() + 255) // 256 * 256
    del buffer


def _blackwell_features(desc) -> list[str]:
    """Enumerators CUDA added for sm_100 that a Hopper driver may refuse whatever the other fields."""
    found = [f"dtype {desc.dtype}"] if desc.dtype in rules.PACKED_DTYPES else []
    return found + ([f"swizzle {desc.swizzle}"] if desc.swizzle.startswith("128B_ATOM") else [])


def _capability() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def _arch() -> str:
    return _capability() + ("a" if _capability() == "sm_90" else "")


def _good_or_skip(rule_id: str, base: int) -> None:
    _, good = EXAMPLES[rule_id]
    if rules.arch_findings(good, _arch()):
        # tilelab reports these as refused on this GPU: test_driver_refuses_what_arch_findings_predict
        # holds that finding against the driver; the rule itself cannot be verified here.
        pytest.skip(f"{rule_id}: tilelab predicts the driver on {_capability()} refuses "
                    f"{', '.join(_blackwell_features(good))} outright (asserted by "
                    f"test_driver_refuses_what_arch_findings_predict)")
    result = encode_with_driver(good, base)
    features = _blackwell_features(good)
    if result != "CUDA_SUCCESS" and features:
        pytest.skip(f"{rule_id}: this driver on {_capability()} refuses {', '.join(features)} outright "
                    f"({result}), so the rule cannot be verified on this GPU")
    assert result == "CUDA_SUCCESS", (
        f"the driver refused the GOOD variant of {rule_id} with {result}: the example (or an undocumented "
        f"driver rule) is wrong.\n{good}")


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_driver_accepts_good_variant(rule_id, base_address):
    _good_or_skip(rule_id, base_address)


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_driver_rejects_bad_example(rule_id, base_address):
    _good_or_skip(rule_id, base_address)
    rule = rules.RULES[rule_id]
    bad, _ = EXAMPLES[rule_id]
    result = encode_with_driver(bad, base_address + rule.address_offset)
    if rule.driver_enforced:
        assert result != "CUDA_SUCCESS", (
            f"the driver ACCEPTED the bad example of {rule_id}: it does not enforce \"{rule.doc}\". "
            f"Set driver_enforced=False on this rule in tilelab/engine/tma_rules.py.\n{bad}")
    else:
        assert result == "CUDA_SUCCESS", (
            f"{rule_id} is marked driver_enforced=False but the driver now refuses its bad example "
            f"({result}): set driver_enforced=True")


# Good variants break no rule, so a refusal of one of these can only be the arch's.
_ARCH_EXAMPLES = [rule_id for rule_id in sorted(EXAMPLES) if rules.arch_findings(EXAMPLES[rule_id][1], "sm_90a")]


@pytest.mark.parametrize("rule_id", _ARCH_EXAMPLES)
def test_driver_refuses_what_arch_findings_predict(rule_id, base_address):
    """Each good example tilelab flags as refused on Hopper is refused by the driver on sm_9x."""
    if not _capability().startswith("sm_9"):
        pytest.skip(f"arch findings are stated for sm_9x; this GPU is {_capability()}")
    _, good = EXAMPLES[rule_id]
    predicted = rules.arch_findings(good, _arch())
    assert predicted and rules.check(good, global_address=base_address) == ((), ())
    result = encode_with_driver(good, base_address)
    assert result != "CUDA_SUCCESS", (
        f"the driver on {_capability()} ACCEPTED the good example of {rule_id}, which tilelab reports as "
        f"refused ({'; '.join(f.text for f in predicted)}): drop that case from _tma_rules.arch_findings.\n{good}")


@pytest.mark.parametrize("swizzle", ["128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B", "128B_ATOM_64B"])
def test_which_blackwell_swizzles_this_driver_takes(swizzle, base_address):
    """Without an arch the checker reports nothing for these; on sm_9x tilelab reports them as
    refused (arch_findings), and the driver must then refuse them."""
    desc = dataclasses.replace(EXAMPLES["swizzle_span"][1], swizzle=swizzle)
    assert rules.check(desc, global_address=base_address) == ((), ())
    result = encode_with_driver(desc, base_address)
    if rules.arch_findings(desc, _arch()):
        assert result != "CUDA_SUCCESS", (
            f"the driver on {_capability()} ACCEPTED swizzle {swizzle}, which tilelab reports as refused there")
    elif result != "CUDA_SUCCESS":
        pytest.skip(f"informational: the driver on {_capability()} refuses swizzle {swizzle} ({result})")


# --------------------------------------------------------------------------------------------
# Every example kernel's descriptors, as tilelab.inspect reports them
# --------------------------------------------------------------------------------------------

_SPEC = re.compile(r'python -m tilelab inspect "examples/(\w+)\.py:([^"]+)"(?:\s+--target\s+(\S+))?')


def _example_specs() -> list[tuple[str, str, str | None]]:
    specs = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        match = _SPEC.search(path.read_text())
        if match:
            specs.append(match.groups())
    return specs


_NO_EXAMPLES = pytest.param(None, None, None, marks=pytest.mark.skip(
    reason="no examples/*.py with a `python -m tilelab inspect \"examples/X.py:EXPR\"` line in its docstring"))


@pytest.mark.parametrize("module,expr,target", _example_specs() or [_NO_EXAMPLES])
def test_example_descriptors_are_clean_and_accepted(module, expr, target):
    import tilelab

    namespace = vars(importlib.import_module(module))  # tests/conftest.py puts examples/ on sys.path
    report = tilelab.inspect(eval(expr, namespace), target or "sm_90a")
    if not report.tma_descriptors:
        pytest.skip(f"examples/{module}.py loads nothing through TMA")
    for desc in report.tma_descriptors:
        concrete = rules.concretize(desc, 1024)
        nbytes = max(int(s) * int(d) for s, d in zip(concrete.global_stride_bytes, concrete.global_dim))
        buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        assert rules.check(concrete, global_address=buffer.data_ptr()) == ((), ()), desc.name
        result = encode_with_driver(concrete, buffer.data_ptr())
        assert result == "CUDA_SUCCESS", f"examples/{module}.py: the driver refused {desc.name}: {result}\n{concrete}"
