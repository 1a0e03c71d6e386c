"""The one display hook: every record shows itself through the records' one registry of
renderers (``tilelab.records.display``, filled by the render layer's modules), honouring
IPython's ``include``/``exclude``; the drawings are those of the renderer functions, called
directly here as ground truth."""

import inspect

import pytest

from tilelab import targets
from tilelab.launch import BenchResult, SanitizerReport, TileMap
from tilelab.records import display
from tilelab.records import kernel as _model
from tilelab.records import launch as _launch_model
from tilelab.records import profile as profiling
from tilelab.records.display import Displayed, DisplayedText
from tilelab.render import launch as render_launch
from tilelab.render import sanitizer as render_sanitizer
from tilelab.render import tiles as render_tiles


def _records() -> list[type]:
    modules = (_launch_model, _model, profiling, targets)
    return [cls for m in modules for _, cls in inspect.getmembers(m, inspect.isclass)
            if issubclass(cls, Displayed) and cls.__module__ == m.__name__]


def test_every_record_with_the_hook_has_renderers_in_the_dispatch():
    found = _records()
    assert {c.__name__ for c in found} >= {"KernelReport", "BenchResult", "RunResult", "SweepTable", "TileMap",
                                           "Ceilings", "LaunchOverhead", "SanitizerReport", "Profile",
                                           "TargetComparison"}
    for cls in found:
        assert display.renderers(cls), cls


def test_a_record_whose_repr_is_its_text_keeps_it_and_says_so_to_ipython():
    result = BenchResult("gemm", samples_ms=(1.0, 2.0, 3.0), flops=2e9)
    assert repr(result) == render_launch.bench_result_text(result)
    assert result._repr_html_() == render_launch.bench_result_html(result)

    class Printer:
        def __init__(self):
            self.out = []

        def text(self, s):
            self.out.append(s)

    p = Printer()
    result._repr_pretty_(p, False)
    assert p.out == [render_launch.bench_result_text(result)]
    # no dataclass-generated repr hides the hook's (each is declared @dataclass(repr=False))
    assert all("__repr__" not in c.__dict__ for c in _records() if issubclass(c, DisplayedText))


def test_the_mime_bundle_honours_include_and_exclude():
    tiles = TileMap(output="C", shape=(4, 4), tile=(2, 2), cells=(("X", "."), (".", "o")))
    full = tiles._repr_mimebundle_()
    assert full == {"text/plain": render_tiles.tile_map_text(tiles), "text/html": render_tiles.tile_map_html(tiles)}
    assert tiles._repr_mimebundle_(include={"text/html"}) == {"text/html": full["text/html"]}
    assert tiles._repr_mimebundle_(exclude={"text/html"}) == {"text/plain": full["text/plain"]}
    assert tiles._repr_png_() is None  # nothing draws a tile map as a picture


def test_a_record_without_a_text_renderer_falls_back_to_its_repr():
    comparison = targets.TargetComparison(targets=("sm_90a", "c"), rows=(("threads", ("128", "-")),))
    bundle = comparison._repr_mimebundle_(exclude={"image/png"})
    assert bundle["text/plain"] == repr(comparison) and "sm_90a" in bundle["text/html"]


@pytest.mark.parametrize("record", [SanitizerReport(kernel="k", tool="memcheck", findings=(), raw="", summary="")])
def test_sanitizer_report_is_drawn_by_its_renderer(record):
    assert repr(record) == render_sanitizer.sanitizer_text(record)
    assert record._repr_html_() == render_sanitizer.sanitizer_html(record)


def test_the_records_load_the_renderers_only_when_one_is_shown():
    """The records import no renderer; the first display loads the render layer, whose modules
    fill the records' registry."""
    import subprocess
    import sys

    code = ("import sys\nfrom tilelab.launch import BenchResult\n"
            "print('tilelab.render' in sys.modules)\n"
            "text = repr(BenchResult('gemm', samples_ms=(1.0, 2.0, 3.0), flops=2e9))\n"
            "print('tilelab.render' in sys.modules, text.startswith('gemm'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "True", "True"]


def test_a_renderer_registers_only_known_mime_types():
    class Note(Displayed):
        pass

    with pytest.raises(ValueError, match="text/markdown"):
        display.register(Note, {"text/markdown": str})
    display.register(Note, {"text/html": lambda n: "<b>note</b>"})
    display.register(Note, {"text/plain": lambda n: "note"})  # added to what was there
    assert Note()._repr_mimebundle_() == {"text/plain": "note", "text/html": "<b>note</b>"}
