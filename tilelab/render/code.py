"""Syntax-highlighted source, one ``<span>`` per line: ``text -> HTML`` (pygments).

Only the lines something links to carry an id, ``{prefix}-L{n}``, so other parts of a report (a
TMA table row) can point at the lines that encode something and those lines can point back; line
numbers are CSS counters (they weigh nothing and are not copied with the code). Colours come from
a stylesheet scoped under ``.tilelab-report`` (see ``STYLE_CSS``) that reads JupyterLab's editor
CSS variables, so the code follows the light and the dark theme and still has readable fallbacks
outside Jupyter. Pygments' own token classes are kept (short names, ``k``, ``s``, ``c``...), with
no inline colours; long launchers are coloured for comments only, by a regex per line.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..engine.links import heat_shares  # analysis; exported here too, where the heat margin is drawn

# Pygments lexer names by the LauncherSource.language values and the names we use elsewhere.
_LEXERS = {"c": "c", "c++": "cpp", "cpp": "cpp", "cuda": "cuda", "python": "python", "py": "python",
           "text": "text", "hip": "cuda", "metal": "cpp"}

# Token colours: JupyterLab's editor variables (themed), with GitHub-like light fallbacks.
STYLE_CSS = """
.tilelab-report .tl-src{margin:0;padding:4px 0;font-family:var(--jp-code-font-family,monospace);
 font-size:var(--jp-code-font-size,12px);line-height:1.4;background:var(--jp-cell-editor-background,#f7f7f7);
 color:var(--jp-content-font-color1,#1f2328);border:1px solid var(--jp-border-color2,#ddd);border-radius:2px;
 white-space:pre-wrap;overflow-wrap:anywhere;tab-size:4;counter-reset:tl-ln;max-width:100%;box-sizing:border-box}
.tilelab-report .tl-src>span{display:block;padding:0 8px 0 5.5em;text-indent:-5.5em;counter-increment:tl-ln;
 scroll-margin:3em 0}
.tilelab-report .tl-src>span::before{content:counter(tl-ln);display:inline-block;width:4.5em;padding-right:.5em;
 margin-right:.5em;text-align:right;text-indent:0;color:var(--jp-content-font-color3,#8c959f);
 border-right:1px solid var(--jp-border-color2,#ddd);user-select:none}
.tilelab-report .tl-src>span:target{outline:2px solid var(--jp-brand-color1,#1976d2);outline-offset:-2px}
.tilelab-report .tl-src>span.tl-mark{background:rgba(255,179,0,.18);box-shadow:inset 3px 0 0 rgba(255,160,0,.8)}
.tilelab-report .tl-src>span.tl-hot{position:relative}
.tilelab-report .tl-heat{position:absolute;left:0;top:0;bottom:0;width:6px;display:block}
.tilelab-report .tl-heatlist{margin:2px 0 4px;font-size:90%}
.tilelab-report .tl-back{margin-left:1em;font-family:var(--jp-ui-font-family,sans-serif);font-size:90%;
 color:var(--jp-brand-color1,#1565c0)}
.tilelab-report .tl-src span[class^="k"]{color:var(--jp-mirror-editor-keyword-color,#cf222e);font-weight:bold}
.tilelab-report .tl-src .kt{color:var(--jp-mirror-editor-variable-2-color,#0550ae);font-weight:normal}
.tilelab-report .tl-src span[class^="s"]{color:var(--jp-mirror-editor-string-color,#0a3069)}
.tilelab-report .tl-src span[class^="c"]{color:var(--jp-mirror-editor-comment-color,#6e7781);font-style:italic}
.tilelab-report .tl-src .cp,
.tilelab-report .tl-src .cpf{color:var(--jp-mirror-editor-meta-color,#8250df);font-style:normal}
.tilelab-report .tl-src span[class^="m"]{color:var(--jp-mirror-editor-number-color,#0550ae)}
.tilelab-report .tl-src .ow{color:var(--jp-mirror-editor-operator-color,#953800)}
.tilelab-report .tl-src .nf,.tilelab-report .tl-src .fm,
.tilelab-report .tl-src .nc{color:var(--jp-mirror-editor-def-color,#8250df)}
.tilelab-report .tl-src .nb,.tilelab-report .tl-src .bp{color:var(--jp-mirror-editor-builtin-color,#0550ae)}
.tilelab-report .tl-src .nd{color:var(--jp-mirror-editor-meta-color,#8250df)}
"""


_PLAIN_TOKEN = re.compile(r'<span class="(?:p|w|n|nn|nv|nx|x|g|esc|ni|o)">([^<]*)</span>')


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
    # Tokens we do not colour (punctuation, whitespace, plain names, symbolic operators) lose their
    # span: a C launcher is mostly such tokens and the markup would be ten times the source (an
    # operator's span is 24 bytes around one character; the device code has hundreds).
    out = _PLAIN_TOKEN.sub(r"\1", out)
    lines = out.split("\n")
    # Pygments adds a final newline; keep exactly one entry per source line.
    want = text.count("\n") + 1
    if len(lines) > want:
        lines = lines[:want]
    while len(lines) < want:
        lines.append("")
    return tuple(lines)


# Where a comment starts, for the comments-only colouring of long launchers: a line comment
# after code that has no quote before it, or a whole-line comment ("#" in Python).
_LINE_COMMENT = {"python": re.compile(r"^(\s*)(#.*)$"), "text": None}
_C_COMMENT = re.compile(r"^([^\"']*?)(//.*)$")


@functools.lru_cache(maxsize=64)
def _comment_lines(text: str, lexer: str) -> tuple[str, ...]:
    """The source escaped, with only its comments coloured: a regex per line instead of a lexer
    (a launcher of 10,000 lines takes milliseconds, not seconds)."""
    pattern = _LINE_COMMENT.get(lexer, _C_COMMENT)
    out = []
    for line in text.split("\n"):
        m = pattern.match(line) if pattern is not None else None
        if m:
            code, comment = html.escape(m.group(1), quote=False), html.escape(m.group(2), quote=False)
            out.append(f'{code}<span class="c1">{comment}</span>')
        else:
            out.append(html.escape(line, quote=False))
    return tuple(out)


def highlight_code(text: str, language: str | None, *, anchor_prefix: str,
                   marks: Mapping[int, Iterable[LineMark]] | None = None, anchors: Iterable[int] = (),
                   first_line: int = 1, colour: str = "all", heat: Mapping[int, float] | None = None,
                   mark_ids: bool = True, last_line: int | None = None) -> str:
    """``<pre class="tl-src">`` of ``text``, one ``<span>`` per line, numbered from ``first_line``.

    Only lines that something links to carry an id, ``{anchor_prefix}-L{n}`` (``n`` counts from
    ``first_line``): the lines in ``anchors`` and in ``marks``. ``marks`` maps line numbers to
    highlight to the back links shown at the end of those lines (an empty list highlights the line
    with no link). Line numbers are drawn by CSS counters, so they weigh nothing and are not
    copied with the code. ``colour="comments"`` keeps only comment colours (long launchers stay
    light); ``"none"`` none. Every character of ``text`` is escaped (pygments escapes token
    text; the plain-text path uses ``html.escape``). ``heat`` maps line numbers to their share
    of a profile's samples (0..1): those lines get a coloured margin titled with the share.
    ``mark_ids=False``: a marked line with no back link is highlighted without an id (a long
    highlighted span costs one id, on the line that is linked to, instead of one per line).
    ``last_line``: ``text`` is a whole source and only its lines ``first_line..last_line`` are
    drawn, coloured as they are in the whole (a string or comment open across the cut stays one).
    """
    marks = marks or {}
    heat = heat or {}
    wanted = set(anchors) | set(heat) | ({n for n, m in marks.items() if m or mark_ids})
    if colour == "comments":
        lines = _comment_lines(text, lexer_name(language))
    else:
        lines = _highlight_lines(text, lexer_name(language) if colour != "none" else "text")
    if last_line is not None:
        lines = lines[first_line - 1:last_line]
    prefix = html.escape(anchor_prefix, quote=True)
    # long lines wrap even where the stylesheet is stripped (an untrusted notebook keeps inline styles)
    reset = f";counter-reset:tl-ln {first_line - 1}" if first_line != 1 else ""
    out = [f'<pre class="tl-src" data-src="{prefix}" data-first="{first_line}" data-lines="{len(lines)}" '
           f'style="white-space:pre-wrap{reset}">']
    for number, body in enumerate(lines, first_line):
        # Quotes need no escape in element content (only in attributes): C strings stay light.
        body = body.replace("&quot;", '"').replace("&#x27;", "'").replace("&#39;", "'")
        attrs = ""
        if number in wanted:
            attrs = f' id="{prefix}-L{number}"'
        classes = " ".join(c for c, on in (("tl-mark", number in marks), ("tl-hot", number in heat)) if on)
        if classes:
            attrs = f' class="{classes}"' + attrs
        if number in heat:
            share = heat[number]
            body = (f'<i class="tl-heat" style="background:rgba(220,38,38,{0.15 + 0.85 * min(1.0, share):.2f})" '
                    f'title="{100 * share:.1f}% of warp-stall samples"></i>' + body)
        backs = "".join(
            f'<a class="tl-back" href="{html.escape(m.href, quote=True)}" title="{html.escape(m.title, quote=True)}">'
            f"&#8617; {html.escape(m.label)}</a>"
            for m in marks.get(number, ())
        )
        # A real newline ends each line, inside its span: where styles are stripped (GitHub,
        # nbviewer sanitisers) the <pre> still shows one source line per line; with the
        # stylesheet the spans are blocks and a trailing newline adds no empty line.
        out.append(f"<span{attrs}>{body}{backs}\n</span>")
    out.append("</pre>")
    return "".join(out)


def colour_lines(text: str, language: str | None) -> tuple[str, ...]:
    """``text`` escaped and coloured, one balanced HTML string per line (for diffs and excerpts)."""
    return tuple(line.replace("&quot;", '"').replace("&#x27;", "'")
                 for line in _highlight_lines(text, lexer_name(language)))


def heat_list(shares: Mapping[int, float], anchor_prefix: str, top: int = 5) -> str:
    """The hottest lines, hottest first, as links to their anchors (ties: the earlier line first)."""
    if not shares:
        return ""
    prefix = html.escape(anchor_prefix, quote=True)
    hot = sorted(shares.items(), key=lambda x: (-x[1], x[0]))[:top]
    return ('<p class="tl-heatlist">hottest lines (share of warp-stall samples): '
            + ", ".join(f'<a href="#{prefix}-L{n}">L{n}</a> {100 * s:.1f}%' for n, s in hot) + "</p>")


__all__ = ["LineMark", "STYLE_CSS", "colour_lines", "heat_list", "heat_shares", "highlight_code", "lexer_name"]
