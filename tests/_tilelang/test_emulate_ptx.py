"""The CPU's table of PTX instructions (tilelab/_tilelang/emulate_ptx.py) against values derived by
hand from NVIDIA's PTX ISA: the device functions of ptx_kernels (CUDA C with inline PTX), translated,
built with the host C++ compiler once for the module and run; each case prints the bits its asm
statement produced. What the table does not know is refused by name with its line."""

from __future__ import annotations

import re
import shutil
import subprocess

import ptx_kernels as pk
import pytest

from tilelab._tilelang import emulate_ptx as ptx

# Forms checked on the CPU only: GCC's named operands (nvcc has none), "%%" for a register whose name
# starts with "%", an asm with no outputs, dp4a and CUDA's __dp4a.
GCC_FORMS = r"""
__device__ uint no_outputs(uint* p) {
  asm volatile("bfi.b32 %0, %0, 0, 0, 0;" :: "r"(*p));  // no outputs: "::" (the operand is read only)
  return *p;
}
__device__ uint dot4(uint a, uint b, uint c, int is_signed) {
  uint d;
  if (is_signed) asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  else asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ uint named(uint x) {
  uint y;
  asm("{ .reg .b32 %%r<2>; shl.b32 %%r0, %[in], 4; or.b32 %%r1, %%r0, 1; mov.b32 %[out], %%r1; }"
      : [out] "=r"(y) : [in] "r"(x));
  return y;
}
"""

MAIN = r"""
#include <stdio.h>
int main() {
  unsigned out[256];
  ptx_cases(out);
  for (int i = 0; i < @N@; i++) printf("%x\n", out[i]);
  printf("%x\n", named(5));
  uint seven = 7;
  printf("%x\n", no_outputs(&seven));
  printf("%x\n", dot4(0xFF020304u, 0x01010101u, 10, 1));
  printf("%x\n", dot4(0xFF020304u, 0x01010101u, 10, 0));
  printf("%x\n", (unsigned)__dp4a((int)0xFF020304u, 0x01010101, 10));
  return 0;
}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler on this machine")
    folder = tmp_path_factory.mktemp("ptx")
    source = folder / "cases.cpp"
    source.write_text(ptx.translate_source(pk.DEVICE_SOURCE + GCC_FORMS) + MAIN.replace("@N@", str(len(pk.CASES))))
    exe = folder / "cases"
    subprocess.run([cxx, "-std=c++17", "-O1", str(source), "-o", str(exe)], check=True, capture_output=True,
                   text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    names = (*pk.CASES, "named", "no_outputs", "dp4a_s", "dp4a_u", "__dp4a")
    return dict(zip(names, (int(value, 16) for value in out.split()), strict=True))


@pytest.mark.parametrize("case", pk.CASES)
def test_each_instruction_computes_what_the_isa_defines(results, case):
    want = pk.EXPECTED[case]
    assert results[case] == want, f"{case}: got {results[case]:#x}, expected {want:#x}"


def test_named_operands_percent_registers_and_no_outputs_are_read(results):
    assert results["named"] == (5 << 4) | 1
    assert results["no_outputs"] == 7  # an input is a copy: writing it changes nothing outside


def test_dp4a_sums_the_byte_products_signed_by_type(results):
    assert results["dp4a_s"] == 10 + 4 + 3 + 2 - 1  # bytes 04 03 02 ff, signed: ff is -1
    assert results["dp4a_u"] == 10 + 4 + 3 + 2 + 255
    assert results["__dp4a"] == results["dp4a_s"]  # CUDA's int __dp4a is the signed form


def test_the_source_is_kept_and_its_asm_statements_replaced():
    text = ptx.translate_source(pk.DEVICE_SOURCE)
    body = text[text.index("#define __nv_bfloat162"):]
    assert not re.search(r"\basm\b", body)
    # the C around each asm statement stays as written, line for line
    assert "__device__ __forceinline__ uint prmt(uint a, uint b, uint c) {" in body
    lines = body.splitlines()
    start = lines.index("#include <cuda_fp16.h>") if "#include <cuda_fp16.h>" in lines else \
        next(i for i, line in enumerate(lines) if "cuda_fp16.h" in line)
    assert len(lines) - start >= pk.DEVICE_SOURCE.count("\n") - 1


@pytest.mark.parametrize("asm, named", [
    ('asm volatile("ld.global.u32 %0, [%1];" : "=r"(d) : "l"(p));', r"the PTX instruction ld\.global\.u32"),
    ('asm volatile("add.rz.f32 %0, %1, %1;" : "=f"(f) : "f"(g));', r"rounding mode \.rz"),
    ('asm volatile("mov.u32 %0, %tid.x;" : "=r"(d));', r"the special register %tid\.x"),
    ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(d));', r"the special register %laneid"),
    ('asm volatile("bar.sync 0;");', r"the PTX instruction bar\.sync \(the CPU's table of PTX instructions has "),
    ('asm volatile("prmt.b32.xyz %0, %1, %1, %1;" : "=r"(d) : "r"(e));', r"modifier \.xyz"),
    ('asm volatile("add.u32 %0, %1, %2;" : "=r"(d) : "r"(e));', r"the operand %2, which the asm statement does not"),
    ('ASM(d, e)  // #define ASM(d, e) asm("add.u32 %0, %1, 1;" : "=r"(d) : "r"(e))', None),
])
def test_what_the_table_does_not_know_is_refused_by_name_with_its_line(asm, named):
    source = "__device__ void f(uint d, uint e, float f, float g, uint* p) {\n  int x = 0;\n  " + asm + "\n}\n"
    if named is None:  # an asm statement in a macro: refused where the macro is defined
        source = "#define ASM(d, e) \\\n  asm(\"add.u32 %0, %1, 1;\" : \"=r\"(d) : \"r\"(e))\n" + source
        with pytest.raises(ptx.PtxUnsupported, match=r"an asm statement in a macro") as info:
            ptx.translate_source(source)
        assert info.value.line == 2
        return
    with pytest.raises(ptx.PtxUnsupported, match=named) as info:
        ptx.translate_source(source)
    assert info.value.line == 3 and info.value.text.strip() == asm


def test_the_table_names_each_instruction_with_its_types():
    for name, sem in ptx.INSTRUCTIONS.items():
        assert sem.types and sem.meaning, name
        assert all(t in ptx.TYPE_BITS for t in sem.types), name
