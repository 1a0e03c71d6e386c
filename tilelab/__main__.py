"""``python -m tilelab inspect FILE.py:EXPR``: the inspection engine from a shell;
``python -m tilelab corpus DIR``: inspect and check every kernel a folder of scripts builds;
``python -m tilelab workshop grade DIR``: grade a room's submitted course notebooks.

EXPR is evaluated in FILE's namespace, e.g.
``python -m tilelab inspect "examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)" --json out.json``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import traceback
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .records.errors import TilelabError


class CliError(Exception):
    """One clear message for the user; the CLI prints it and exits non-zero."""


def _load_namespace(path: Path) -> dict[str, Any]:
    if not path.is_file():
        hint = " (the part before ':' is a Python file)" if path.suffix != ".py" else ""
        raise CliError(f"no such file: {path}{hint}")
    name = f"_tilelab_cli_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so inspect.getsource finds kernels defined in it
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise CliError(f"{path}:{err.lineno}: syntax error: {err.msg}") from err
    except SystemExit as err:
        raise CliError(
            f"{path} called sys.exit({err.code!r}) while tilelab ran it to find the kernel, so nothing was "
            "inspected. Put the script's own main code under `if __name__ == \"__main__\":` "
            "(tilelab runs the file under another name)") from None
    except Exception as err:
        raise CliError(f"running {path} failed: {type(err).__name__}: {err}") from err
    namespace = vars(module)
    defined = [k for k, v in namespace.items() if not k.startswith("__") and not isinstance(v, types.ModuleType)]
    if not defined:
        raise CliError(
            f"{path} defines nothing to inspect: no function, kernel or value at its top level. Define the "
            "kernel (or the function that builds it) at the top level of the file, not only inside "
            "`if __name__ == \"__main__\":` or another function")
    return namespace


def _split_spec(spec: str) -> tuple[Path, str]:
    file_part, sep, expr = spec.partition(".py:")
    if not sep:
        if spec.endswith(".py"):
            raise CliError(f"{spec!r} names a file but no expression: write FILE.py:EXPR, "
                           "e.g. examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)")
        raise CliError(f"{spec!r} is not FILE.py:EXPR, e.g. examples/gemm.py:matmul(1024, 1024, 1024, 128, 128, 32)")
    if not expr.strip():
        raise CliError(f"no expression after ':' in {spec!r}")
    return Path(file_part + ".py"), expr.strip()


def _evaluate(expr: str, namespace: dict[str, Any], path: Path) -> Any:
    try:
        code = compile(expr, f"<{path.name}:EXPR>", "eval")
    except SyntaxError as err:
        raise CliError(f"bad expression {expr!r}: {err.msg}") from err
    from . import _tilelang

    try:
        with _tilelang.tilelang_errors(expr.split("(")[0].strip()):
            return eval(code, namespace)
    except TilelabError as err:
        raise CliError(str(err)) from err
    except SystemExit as err:
        raise CliError(f"evaluating {expr!r} called sys.exit({err.code!r}), so nothing was inspected. Give an "
                       "expression that returns the kernel, e.g. the function that builds it") from None
    except NameError as err:
        names = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise CliError(f"{err} in {path}; it defines: {', '.join(names) or 'nothing callable'}") from err
    except Exception as err:
        where = _tilelang._user_frame(err.__traceback__)
        at = f"\n  at {where[0]}:{where[1]}: {where[2].strip()}" if where and where[0] == str(path.resolve()) else ""
        raise CliError(f"evaluating {expr!r} failed: {type(err).__name__}: {err}{at}") from err


def _check_output(option: str, value: str | None) -> Path | None:
    """Refuse an output path that cannot be written before the (slow) inspection, not after."""
    if not value:
        return None
    path = Path(value)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CliError(f"{option} {value}: is a folder; give a file name, e.g. {path / ('report.' + option[2:])}")
    if not folder.is_dir():
        raise CliError(f"{option} {value}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CliError(f"{option} {value}: cannot write there (permission denied)")
    return path


def _write(option: str, path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as err:
        raise CliError(f"{option} {path}: cannot write it: {err.strerror or err}") from err


def _inspect_command(args: argparse.Namespace) -> int:
    from .engine.inspect import inspect

    if args.target is not None:  # refused before the (slow) script runs, as the API and magic do
        from .targets import parse_target

        try:
            parse_target(args.target)
        except TilelabError as err:
            raise CliError(f"--target {args.target}: {err}") from err
    json_path = _check_output("--json", args.json)
    html_path = _check_output("--html", args.html)
    path, expr = _split_spec(args.spec)
    namespace = _load_namespace(path)
    kernel = _evaluate(expr, namespace, path)
    try:
        report = inspect(kernel, args.target, force=args.force, toolchain=args.sass, passes=args.passes)
    except TilelabError as err:
        raise CliError(str(err)) from err
    if json_path:
        _write("--json", json_path, report.to_json(indent=1))
    if html_path:
        from .render.html import render_html

        _write("--html", html_path, "<!doctype html><meta charset='utf-8'>\n" + render_html(report, standalone=True))
    if not json_path and not html_path:
        from .render.text import render_text

        print(render_text(report))
    return 0


def _corpus_command(args: argparse.Namespace) -> int:
    from .engine import corpus as _corpus

    folder = Path(args.directory)
    if not folder.is_dir():
        raise CliError(f"{folder}: not a folder; give the folder of TileLang example scripts, e.g. tilelang/examples")
    if not _corpus.find_scripts(folder, args.tests):
        raise CliError(f"{folder}: no example scripts in it (*.py other than test_*.py, regression_*.py, conftest.py)"
                       + ("" if args.tests else "; for a folder of pytest files add --tests"))
    json_path = _check_output("--json", args.json)
    from .engine.inspect import resolve_target

    try:
        resolved, _ = resolve_target(args.target)  # the one target validation inspect uses
    except (TilelabError, ValueError) as err:
        raise CliError(f"--target: {err}") from err
    if resolved.family != "cuda":
        raise CliError(f"--target {resolved.name}: the corpus checks reports against CUDA launchers; "
                       "give a CUDA arch such as sm_90a")
    arch = resolved.name
    if args.jobs < 1 or args.timeout <= 0:
        raise CliError("--jobs must be at least 1 and --timeout positive (seconds per script)")
    if args.repeat < 1:
        raise CliError(f"--repeat {args.repeat}: give at least 1 round of lowering and inspect per kernel")
    try:
        _corpus.select_scripts(folder, args.only, args.tests)
    except ValueError as err:
        raise CliError(str(err)) from err

    def progress(rows: list) -> None:
        if not args.quiet:
            print(f"  {rows[0].script}: " + ", ".join(r.verdict for r in rows), file=sys.stderr, flush=True)

    rows = _corpus.run_corpus(folder, jobs=args.jobs, arch=arch, timeout_s=args.timeout, on_script=progress,
                              repeat=args.repeat, only=args.only, lower_only=args.lower_only,
                              tests=args.tests)
    print(_corpus.render_table(rows))
    if json_path:
        import json

        _write("--json", json_path, json.dumps([r.to_dict() for r in rows], indent=1))
    bad = _corpus.totals(rows)
    return 1 if bad[_corpus.MISMATCH] or bad[_corpus.INSPECT_ERROR] else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tilelab",
                                     description="Inspect what TileLang generated for a kernel.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="inspect FILE.py:EXPR")
    p.add_argument("spec", metavar="FILE.py:EXPR", help="a Python file and an expression evaluated in its namespace")
    p.add_argument("--target", default=None,
                   help='a CUDA arch ("sm_90a", the default without a GPU; "sm_80", ...), '
                        'an AMD one ("gfx942"), "metal" or "c"')
    p.add_argument("--json", metavar="PATH", help="write KernelReport.to_dict() as JSON")
    p.add_argument("--html", metavar="PATH", help="write the static HTML report")
    p.add_argument("--force", action="store_true", help="bypass the report cache")
    p.add_argument("--sass", action="store_true",
                   help="also compile with the CUDA toolkit: PTX, SASS, registers, spills, occupancy")
    p.add_argument("--passes", action="store_true", help="record TileLang's lowering pass by pass")
    p.set_defaults(func=_inspect_command)
    c = sub.add_parser("corpus", help="inspect and check every kernel a folder of TileLang scripts builds")
    c.add_argument("directory", metavar="DIR", help="a folder of TileLang example scripts (searched recursively)")
    c.add_argument("--target", default="sm_90a",
                   help="arch for scripts whose own target is the local GPU (default sm_90a)")
    c.add_argument("--jobs", type=int, default=2, help="scripts run at once, each in its own process (default 2)")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds each script may run (default 300)")
    c.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="time each kernel in N interleaved rounds of lowering and inspect; the ratio is "
                        "their median, with its range (default 1)")
    c.add_argument("--lower-only", action="store_true",
                   help="only TileLang's lowering of each kernel, and the diagnosis of each failure (no inspect, no "
                        "checks): the quick way to find and explain the kernels TileLang cannot lower")
    c.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="only the scripts whose path relative to DIR matches (repeatable), e.g. 'gemm/*.py'")
    c.add_argument("--tests", action="store_true",
                   help="also the pytest files (test_*.py): each runs its test functions (each parametrized one "
                        "with its first parameter sets) and the kernels they build are lowered; rows name "
                        "file.py::test")
    c.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    c.add_argument("--quiet", action="store_true", help="no per-script progress on stderr")
    c.set_defaults(func=_corpus_command)
    from .workshop._grade import add_parser as add_workshop_parser

    add_workshop_parser(sub)  # workshop grade DIR
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as err:
        print(f"tilelab: error: {err}", file=sys.stderr)
        return 2
    except TilelabError as err:
        print(f"tilelab: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a bug in tilelab (or TileLang): one message, the trace on request
        if os.environ.get("TILELAB_DEBUG") == "1":
            traceback.print_exc()
        print(f"tilelab: error: internal error: {type(err).__name__}: {err}\n"
              "This is a bug in tilelab; please report it with the command you ran"
              + ("." if os.environ.get("TILELAB_DEBUG") == "1"
                 else " and the traceback that TILELAB_DEBUG=1 prints."), file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
