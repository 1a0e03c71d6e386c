"""Reports and page readers the tests share, made once per process: the Hopper GEMM of
examples/gemm.py inspected for sm_90a (:func:`gemm`), a hand-built report whose every free-text
field carries markup (:func:`hostile_report`), and a reader of the static page's tags and code
lines (:func:`parse`). ``tests/conftest.py`` hands the GEMM's report to tests as the fixture
``gemm_report``."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import tilelab
from tilelab import (
    Argument,
    DeviceKernel,
    KernelReport,
    LauncherSource,
    Layout,
    Sources,
    TmaDescriptor,
    WgmmaInstruction,
    WgmmaOperand,
)

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
EVIL = f"k{SCRIPT}{IMG}"


def gemm_report() -> KernelReport:
    from gemm import matmul

    return tilelab.inspect(matmul(1024, 1024, 1024, 128, 128, 32), "sm_90a")


_CACHE: dict[str, KernelReport] = {}


def gemm() -> KernelReport:
    if "gemm" not in _CACHE:
        _CACHE["gemm"] = gemm_report()
    return _CACHE["gemm"]


def hostile_report() -> KernelReport:
    """A hand-built report in which every free-text field carries markup."""
    launcher = (
        f"// {SCRIPT}\n"
        f"CUtensorMap {'A_desc'};\n"
        f"cuuint32_t A_desc_boxDim[2]= {{64,128}}; /* {IMG} */\n"
        "CUresult A_desc_result = cuTensorMapEncodeTiled(\n"
        "    &A_desc, A_desc_type, 2, A, A_desc_globalDim, A_desc_globalStride + 1, A_desc_boxDim,\n"
        "    A_desc_elementStrides, A_desc_interleave, A_desc_swizzle, A_desc_l2Promotion, A_desc_oobFill);\n"
    )
    desc = TmaDescriptor(
        name="A_desc", buffer=f"A{IMG}", kind="tiled", dtype="FLOAT16", rank=2, global_dim=(1024, 1024),
        global_stride_bytes=(2, 2048), element_strides=(1, 1), interleave="NONE", swizzle="128B",
        l2_promotion="L2_128B", oob_fill="NONE", box_dim=(64, 128), kernel=EVIL,
        problems=(f"inner box of {SCRIPT} exceeds the swizzle span",),
        launch_conditions=(f"the address of {IMG} is 16-byte aligned",),
    )
    return KernelReport(
        name=EVIL,
        target="sm_90a",
        kernels=(DeviceKernel(name=EVIL, grid=(8, "m // 128", 1), block=(256, 1, 1),
                              dynamic_shared_memory_bytes=49152),),
        sources=Sources(
            device=f"// kernel comment {SCRIPT}\n__global__ void k() {{ /* {IMG} */ }}\n",
            launchers=(
                LauncherSource("tvm_ffi", f"/* {IMG} */\nint x;", language="c"),
                LauncherSource("cython", launcher, language="c++"),
                LauncherSource("nvrtc", None, reason=f"ImportError: {SCRIPT}"),
                LauncherSource("cutedsl", f"# {SCRIPT}\nx = 1\n", language="python",
                               extra=(("launcher.cpp", f"// {IMG}\n"),)),
            ),
        ),
        tma_descriptors=(desc,),
        wgmma=(WgmmaInstruction("m64n128k16", "ss", "float16", "float16", "float32",
                                WgmmaOperand(f"A{SCRIPT}", 1, 1, 64, "K"), WgmmaOperand(f"B{IMG}", 1, 1, 64, "K"),
                                kernel=EVIL),),
        layouts=(Layout(buffer=f"S{SCRIPT}", scope="shared", dtype="float16", shape=(2, 2), offsets=(0, 1, 3, 2),
                        description=f"Layout {IMG}"),),
        arguments=(Argument(name=f"X{IMG}", kind="tensor", dtype="float16", shape=("m", 64),
                            cache_key=f"dtype {SCRIPT}"),),
        notes=(f"note {SCRIPT}",),
        versions=(("tilelang", "0.1.15"),),
        cache_key=f"key {IMG}",
        pass_configs=((f"tl.{SCRIPT}", f"{IMG}"),),
    )


class _Collect(HTMLParser):
    """Tags, attributes, and the text of every code line (without its back links), keyed
    ``{pre's data-src}-L{n}`` whether or not the line carries that id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.lines: dict[str, str] = {}
        self._stack: list[tuple[str, str | None]] = []  # (tag, role)
        self._line: str | None = None
        self._skip = 0
        self._pre: list = []  # [prefix, next line number, depth of the pre]

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        cls = (a.get("class") or "").split()
        role = None
        if tag == "pre" and "tl-src" in cls:
            self._pre = [a.get("data-src"), int(a.get("data-first") or 1), len(self._stack) + 1]
            role = "pre"
        elif tag == "span" and self._pre and len(self._stack) == self._pre[2]:
            self._line = f"{self._pre[0]}-L{self._pre[1]}"
            self._pre[1] += 1
            self.lines[self._line] = ""
            role = "line"
        elif tag == "a" and "tl-back" in cls:
            self._skip += 1
            role = "skip"
        self._stack.append((tag, role))

    def handle_endtag(self, tag):
        while self._stack:
            t, role = self._stack.pop()
            if role == "skip":
                self._skip -= 1
            if role == "line":
                self._line = None
            if role == "pre":
                self._pre = []
            if t == tag:
                break

    def handle_data(self, data):
        if self._line is not None and not self._skip:
            self.lines[self._line] += data


def parse(markup: str) -> _Collect:
    p = _Collect()
    p.feed(markup)
    p.close()
    # Each line's markup ends with its newline (see test_sources_read_line_by_line_without_styles).
    p.lines = {k: v[:-1] if v.endswith("\n") else v for k, v in p.lines.items()}
    return p


def stripped_lines(pre: str) -> list[str]:
    """A ``<pre>``'s text as a page without styles shows it: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", pre)).split("\n")
