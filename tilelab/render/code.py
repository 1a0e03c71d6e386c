"""Syntax-highlighted source with an anchor on every line: ``text -> HTML`` (pygments).

Each line is a ``<span id="{prefix}-L{n}">`` with its number, so other parts of a
report (a TMA table row) can point at the lines that encode something and those lines can point
back. Colours come from a stylesheet scoped under ``.tilelab-report`` (see ``STYLE_CSS``) that
reads JupyterLab's editor CSS variables, so the code follows the light and the dark theme and
still has readable fallbacks outside Jupyter. Pygments' own token classes are kept (short names,
``k``, ``s``, ``c``...), with no inline colours.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

# Pygments lexer names by the LauncherSource.language values and the names we use elsewhere.
_LEXERS = {"c": "c", "c++": "cpp", "cpp": "cpp", "cuda": "cuda", "python": "python", "py": "python",
           "text": "text", "hip": "cuda", "metal": "cpp"}

# Token colours: JupyterLab's editor variables (themed), with GitHub-like light fallbacks.
STYLE_CSS = """
.tilelab-report .tl-src{margin:0;padding:4px 0;overflow-x:auto;font-family:var(--jp-code-font-family,monospace);
 font-size:var(--jp-code-font-size,12px);line-height:1.4;background:var(--jp-cell-editor-background,#f7f7f7);
 color:var(--jp-content-font-color1,#1f2328);border:1px solid var(--jp-border-color2,#ddd);border-radius:2px;
 white-space:pre;tab-size:4}
.tilelab-report .tl-line{display:block;padding-right:8px}
.tilelab-report .tl-line:target,.tilelab-report .tl-line.tl-mark:target{outline:2px solid var(--jp-brand-color1,#1976d2)}
.tilelab-report .tl-ln{display:inline-block;min-width:4.5em;padding-right:8px;margin-right:8px;text-align:right;
 color:var(--jp-content-font-color3,#8c959f);border-right:1px solid var(--jp-border-color2,#ddd);
 text-decoration:none;user-select:none}
.tilelab-report .tl-mark{background:rgba(255,179,0,.18);box-shadow:inset 3px 0 0 rgba(255,160,0,.8)}
.tilelab-report .tl-back{margin-left:1em;font-family:var(--jp-ui-font-family,sans-serif);font-size:90%;
 color:var(--jp-brand-color1,#1565c0)}
.tilelab-report .tl-src span[class^="k"]{color:var(--jp-mirror-editor-keyword-color,#cf222e);font-weight:bold}
.tilelab-report .tl-src .kt{color:var(--jp-mirror-editor-variable-2-color,#0550ae);font-weight:normal}
.tilelab-report .tl-src span[class^="s"]{color:var(--jp-mirror-editor-string-color,#0a3069)}
.tilelab-report .tl-src span[class^="c"]{color:var(--jp-mirror-editor-comment-color,#6e7781);font-style:italic}
.tilelab-report .tl-src .cp,.tilelab-report .tl-src .cpf{color:var(--jp-mirror-editor-meta-color,#8250df);font-style:normal}
.tilelab-report .tl-src span[class^="m"]{color:var(--jp-mirror-editor-number-color,#0550ae)}
.tilelab-report .tl-src .o,.tilelab-report .tl-src .ow{color:var(--jp-mirror-editor-operator-color,#953800)}
.tilelab-report .tl-src .nf,.tilelab-report .tl-src .fm,.tilelab-report .tl-src .nc{color:var(--jp-mirror-editor-def-color,#8250df)}
.tilelab-report .tl-src .nb,.tilelab-report .tl-src .bp{color:var(--jp-mirror-editor-builtin-color,#0550ae)}
.tilelab-report .tl-src .nd{color:var(--jp-mirror-editor-meta-color,#8250df)}
"""


_PLAIN_TOKEN = re.compile(r'<span class="(?:p|w|n|nn|nv|nx|x|g|esc|ni)">([^<]*)</span>')


@dataclass(frozen=True)
class LineMark:
    """A highlighted line that links back to something else in the report."""

    href: str  # e.g. "#tl-abc-tma-0"
    label: str  # plain text; escaped when rendered
    title: str = ""


def lexer_name(language: str | None) -> str:
    return _LEXERS.get((language or "text").lower(), "text")


@functools.lru_cache(maxsize=64)
def _highlight_lines(text: str, lexer: str) -> tuple[str, ...]:
    """The source as escaped HTML, one self-contained string per line (balanced spans)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    if lexer == "text":
        return tuple(html.escape(line) for line in text.split("\n"))
    formatter = HtmlFormatter(nowrap=True)
    out = highlight(text, get_lexer_by_name(lexer, stripnl=False, stripall=False, ensurenl=False), formatter)
    # Tokens we do not colour (punctuation, whitespace, plain names) lose their span: a C launcher
    # is mostly such tokens and the markup would be ten times the source.
    out = _PLAIN_TOKEN.sub(r"\1", out)
    lines = out.split("\n")
    # Pygments adds a final newline; keep exactly one entry per source line.
    want = text.count("\n") + 1
    if len(lines) > want:
        lines = lines[:want]
    while len(lines) < want:
        lines.append("")
    return tuple(lines)


def highlight_code(text: str, language: str | None, *, anchor_prefix: str,
                   marks: Mapping[int, Iterable[LineMark]] | None = None) -> str:
    """``<pre class="tl-src">`` of ``text`` with line anchors ``{anchor_prefix}-L{n}`` (1-based).

    ``marks`` maps line numbers to highlight to the back links shown at the end of those lines
    (an empty list highlights the line with no link). Every character of ``text`` is escaped (pygments escapes token text; the
    plain-text path uses ``html.escape``).
    """
    marks = marks or {}
    lines = _highlight_lines(text, lexer_name(language))
    prefix = html.escape(anchor_prefix, quote=True)
    out = [f'<pre class="tl-src" data-lines="{len(lines)}">']
    for number, body in enumerate(lines, 1):
        anchor = f"{prefix}-L{number}"
        line_marks = list(marks.get(number, ()))
        css = "tl-line tl-mark" if number in marks else "tl-line"
        backs = "".join(
            f'<a class="tl-back" href="{html.escape(m.href, quote=True)}" title="{html.escape(m.title, quote=True)}">'
            f"&#8617; {html.escape(m.label)}</a>"
            for m in line_marks
        )
        # A real newline ends each line, inside its span: where styles are stripped (GitHub,
        # nbviewer sanitisers) the <pre> still shows one source line per line; with the
        # stylesheet the spans are blocks and a trailing newline adds no empty line. The space
        # after the number keeps it apart from the code when the number's box style is gone.
        out.append(f'<span class="{css}" id="{anchor}"><span class="tl-ln">{number} </span>{body}{backs}\n</span>')
    out.append("</pre>")
    return "".join(out)


__all__ = ["LineMark", "STYLE_CSS", "highlight_code", "lexer_name"]
