"""The "why is it slow" tier: the device source with ``#line`` directives, the include paths its
compile needs, and TileLang's lowering pipeline pass by pass."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from ..records.errors import LoweringError
from .env import tilelang
from .errors import _lowering_error, tilelang_errors
from .lowering import lower
from .resolve import KernelSource

_PIPELINE_LOCK = threading.RLock()  # one patch of TileLang's pipeline at a time

LINE_DIRECTIVES_CONFIG = "tl.emit_line_directives"


def device_source_with_line_directives(source: KernelSource, arch: str, pass_configs: dict[str, Any]) -> str:
    """The device source lowered again with ``#line`` directives naming the Python lines."""
    configs = {**pass_configs, LINE_DIRECTIVES_CONFIG: True}
    return lower(source, arch, out_idx=None, pass_configs=configs, backends=()).device_source


def device_include_dirs() -> list[str]:
    """The folders TileLang's device source needs on the include path (its templates, CUTLASS)."""
    import tilelang.env as env

    return [d for d in (env.TILELANG_TEMPLATE_PATH, env.CUTLASS_INCLUDE_DIR) if d]


def is_tilelang_file(path: str) -> bool:
    """True for a file inside the installed TileLang package (its macros, not the user's code)."""
    import os.path

    root = os.path.dirname(tilelang().__file__)
    return os.path.abspath(path).startswith(root + os.sep)


def pass_trace(source: KernelSource, arch: str, pass_configs: dict[str, Any], *,
               max_diff_lines: int = 400):
    """TileLang's lowering pipeline pass by pass, through its own pass instrumentation.

    TileLang's ``StackedPassInstrument`` pairs the pass callbacks and numbers the top-level passes;
    its pass-timing instrument times them (it runs first, so the script printing here is not
    charged to the pass). A pass changed the module when its TVMScript differs.
    """
    import difflib

    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import lower_to_host_device_ir
    from tilelang.instrumentation.events import PassEventObserver, StackedPassInstrument
    from tilelang.tools.pass_timing import TileLangPassTimingInstrument

    from ..records.machine import PassStep, PassTrace

    tl = tilelang()
    events: list[tuple[Any, bool, str, bool]] = []
    state: dict[str, str] = {}  # "input": the module as the first pass saw it; "text": as last printed

    def script(mod: Any) -> str:
        try:
            return mod.script(show_meta=False)
        except Exception:  # some intermediate modules do not print as TVMScript
            return str(mod)

    class Observer(PassEventObserver):
        def pass_started(self, mod, event):
            if "text" not in state:
                state["text"] = script(mod)
                state["input"] = state["text"]
            return mod

        def pass_finished(self, mod, event, before):
            if mod.same_as(before):
                events.append((event, False, "", False))
                return
            text = script(mod)
            if text == state["text"]:
                events.append((event, False, "", False))
                return
            diff = list(difflib.unified_diff(state["text"].splitlines(), text.splitlines(), "before", "after",
                                             lineterm="", n=2))
            cut = len(diff) > max_diff_lines
            events.append((event, True, "\n".join(diff[:max_diff_lines]), cut))
            state["text"] = text

    stacked = StackedPassInstrument(Observer(), capture_nested=False)
    timing = TileLangPassTimingInstrument()
    try:
        with tilelang_errors(source.name, stage="lowering"):
            context = create_backend_context({"kind": "cuda", "arch": arch}, None, "tvm_ffi")
            with tl.transform.PassContext(opt_level=3, config=pass_configs,
                                          instruments=[timing.instrument, stacked]), context.target:
                lower_to_host_device_ir(source.prim_func, context)
    except LoweringError:
        raise
    except Exception as err:
        raise _lowering_error(err, source.name) from err
    top = [r for r in timing.records if r.depth == 0]
    steps = []
    for i, (event, changed, diff, cut) in enumerate(events):
        seconds = top[i].duration_s if i < len(top) and top[i].name == event.name else 0.0
        steps.append(PassStep(event.name, seconds, changed, diff, cut, event.phase))
    return PassTrace(tuple(steps), state.get("input") or "")


@contextlib.contextmanager
def passes_before(before: dict[str, Any]):
    """Within the block, TileLang's CPU pipeline runs each pass of ``before`` just before the pass
    of ``tilelang.transform`` its key names (the pipeline looks them up there each time it lowers);
    compiles in other threads meanwhile are left alone."""
    tl = tilelang()
    tvm = tl.tvm
    originals = {name: getattr(tl.transform, name) for name in before}
    mine = threading.get_ident()

    def preceded(name: str) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != mine:
                return originals[name](*args, **kwargs)
            return tvm.transform.Sequential([before[name], originals[name](*args, **kwargs)])

        return make

    with _PIPELINE_LOCK:
        for name in originals:
            setattr(tl.transform, name, preceded(name))
        try:
            yield
        finally:
            for name, original in originals.items():
                setattr(tl.transform, name, original)
