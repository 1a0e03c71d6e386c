"""``%%tilelang --sass --passes``: the toolchain and IR tabs from a notebook cell, in its own process
(IPython keeps global state). The CUDA toolkit is named explicitly (TILELAB_CUDA_HOME): the
suite's nvcc shim stays first on PATH."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CUDA = Path("/usr/local/cuda")

SCRIPT = textwrap.dedent('''
    import json
    from IPython.testing.globalipapp import start_ipython
    ip = start_ipython()
    ip.run_line_magic("load_ext", "tilelab")
    cell = """import tilelang.language as T

    @T.prim_func
    def scale(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 3.0
    """
    r = ip.run_cell("%%tilelang --target sm_80 --no-compile --sass --passes --quiet\\n" + cell)
    assert r.success, r.error_in_exec
    m = ip.magics_manager.registry["TileLangMagics"]
    rep = m.last.report
    mc = rep.machine
    from tilelab.widgets.inspector import Inspector
    from tilelab.render.html import render_html
    insp = Inspector(rep)
    origin_lines = sorted({(o.line, o.user) for o in mc.origins})
    store = [i + 1 for i, l in enumerate(rep.sources.device.split("\\n")) if "3.000000e+00" in l]
    print(json.dumps({"titles": list(insp.titles), "missing": mc.missing, "origins": origin_lines,
                      "store": store, "store_origin": [mc.origin(n).line for n in store if mc.origin(n)],
                      "files": [f for f, _ in mc.python_sources],
                      "cell_line_8": mc.python_sources[0][1].split("\\n")[7] if mc.python_sources else "",
                      "passes": len(rep.passes.steps),
                      "regs": [r.registers for r in mc.resources], "html": "IR passes" in render_html(rep)}))
''')


@pytest.mark.heavy
@pytest.mark.skipif(not (CUDA / "bin" / "ptxas").exists(), reason=f"needs the CUDA toolkit in {CUDA}")
@pytest.mark.slow
def test_magic_sass_and_passes_tabs(tmp_path):
    env = dict(os.environ, TILELAB_CUDA_HOME=str(CUDA), TILELAB_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["missing"] is None
    assert [t for t in out["titles"] if t in ("Lines", "PTX", "SASS", "IR passes")] == ["Lines", "PTX", "SASS",
                                                                                         "IR passes"]
    # the store B[...] = A[...] * 3.0 is line 8 of the notebook cell (line 1 is the %%tilelang line)
    assert out["store"] and out["store_origin"] == [8] * len(out["store"])
    assert len(out["files"]) == 1 and "<ipython-input-" in out["files"][0]
    assert out["cell_line_8"].strip().startswith("B[bx * 128 + i] = A[bx * 128 + i] * 3.0")
    assert out["passes"] > 20 and out["regs"][0] > 0 and out["html"]
