"""The IPython test shell the magic tests drive (tests/cell/test_magic.py, tests/cell/test_magic_gpu.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    # IPython's test shell is global to the process: start_ipython() makes it once and returns
    # None after, so a second test module in the same process takes the one already there
    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tilelab")
    return shell


@pytest.fixture
def shown(ip):
    from IPython.core.displaypub import CapturingDisplayPublisher

    ip.display_pub = CapturingDisplayPublisher()
    return ip.display_pub.outputs


def magics(ip):
    return ip.magics_manager.registry["TileLangMagics"]


def run(ip, line, cell):
    return ip.run_cell(f"%%tilelang {line}\n{cell}")
