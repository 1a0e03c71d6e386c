"""The small C++ runtimes that CPU kernels call (the trace runtime of ``trace_tiles``, the
emulation runtime of ``run(device="cpu")``): built once per machine into tilelab's cache, by the
C++ compiler TileLang builds target-c kernels with, and loaded with their symbols global, so that
kernels built with those functions left undefined find them."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile


def load_runtime(source: str, stem: str, error: type[Exception], needs: str) -> ctypes.CDLL:
    """``source`` compiled (once: the library is kept under a name of its content's hash) and
    loaded; ``error`` with ``needs`` (what the caller was doing) when there is no compiler or the
    build fails."""
    from .. import _tilelang
    from ..engine.cache import cache_dir

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    lib = os.path.join(str(cache_dir()), "runtimes", f"{stem}-{digest}.so")
    if not os.path.exists(lib):
        os.makedirs(os.path.dirname(lib), exist_ok=True)
        folder = tempfile.mkdtemp(prefix=f"tilelab-{stem}-", dir=os.path.dirname(lib))
        src, out = os.path.join(folder, f"{stem}.cpp"), os.path.join(folder, f"{stem}.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [_tilelang.cxx_compiler(), "-O2", "-std=c++17", "-fPIC", "-shared", src, "-o", out]
        try:
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
            except (OSError, subprocess.TimeoutExpired) as err:
                raise error(f"{needs} needs a C++ compiler (as TileLang's target c does): {err}") from err
            if done.returncode != 0:
                raise error(f"building the {stem} failed ({' '.join(cmd)}):\n{done.stderr}")
            os.replace(out, lib)  # atomic: a process building it at the same moment finds a whole file
        finally:
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
            os.rmdir(folder)
    return ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)


def header_file(source: str, stem: str) -> str:
    """``source`` written once as a header under tilelab's cache (named by its content's hash, so a
    compile that includes it by path changes when it does); its path."""
    from ..engine.cache import cache_dir

    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = os.path.join(str(cache_dir()), "runtimes", f"{stem}-{digest}.h")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{stem}-", suffix=".h", dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)  # atomic: a compile at the same moment reads a whole file
    return path
