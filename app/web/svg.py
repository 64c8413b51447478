"""Matplotlib SVG made fit for inline use under a strict Content-Security-Policy.

CSP ``default-src 'self'`` forbids ``style="…"`` attributes and ``<style>`` elements in the
page, and matplotlib writes both. SVG has presentation attributes for everything matplotlib
styles (fill, stroke, opacity…), so each declaration becomes an attribute; the one ``<style>``
rule (``* {stroke-linejoin: round; stroke-linecap: butt}``) becomes inherited attributes on the
root. Ids get a per-figure prefix so several figures on one page do not share glyph or clip-path
ids. Width and height go: the CSS sizes the figure from its viewBox (usable at 360 px).
"""

from __future__ import annotations

import html
import re

from markupsafe import Markup

_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)
_DROP = re.compile(r"<metadata>.*?</metadata>|<style\b.*?</style>|<!--.*?-->", re.S)
_STYLE = re.compile(r'\sstyle="([^"]*)"')
_ID = re.compile(r'\bid="([^"]+)"')
_HREF = re.compile(r'(xlink:href|href)="#([^"]+)"')
_URL = re.compile(r"url\(#([^)]+)\)")
_ROOT = re.compile(r"<svg\b([^>]*)>", re.S)
_SIZE = re.compile(r'\s(width|height)="[^"]*"')
_PROPERTY = re.compile(r"^[a-z-]+$")
_SERIES = re.compile(r'<g id="([^"]*?)series-([^"]+)"')


def _attributes(match: re.Match[str]) -> str:
    out = []
    for decl in match.group(1).split(";"):
        name, sep, value = decl.partition(":")
        name, value = name.strip(), value.strip()
        if sep and _PROPERTY.match(name):
            out.append(f' {name}="{html.escape(value, quote=True)}"')
    return "".join(out)


def inline_svg(data: str | bytes, prefix: str, label: str) -> Markup:
    """``data`` (one matplotlib SVG document) as an inline ``<svg>`` element.

    ``prefix`` makes its ids unique on the page; ``label`` is its accessible name. Series
    groups (``gid="series-<name>"``) get ``class="series" data-series="<name>"``.
    """
    text = data.decode() if isinstance(data, bytes) else data
    text = _PROLOGUE.sub("", text, count=1)
    text = _DROP.sub("", text)
    text = _STYLE.sub(_attributes, text)
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = _HREF.sub(lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"', text)
    text = _URL.sub(lambda m: f"url(#{prefix}-{m.group(1)})", text)
    text = _SERIES.sub(
        lambda m: (
            f'<g class="series" data-series="{m.group(2)}" id="{m.group(1)}series-{m.group(2)}"'
        ),
        text,
    )
    name = html.escape(label, quote=True)

    def root(m: re.Match[str]) -> str:
        attrs = _SIZE.sub("", m.group(1))
        return (
            f'<svg{attrs} class="plot" role="img" aria-label="{name}" '
            'stroke-linejoin="round" stroke-linecap="butt">'
            f"<title>{name}</title>"
        )

    text = _ROOT.sub(root, text, count=1)
    return Markup(text.strip())  # matplotlib's output, comments dropped
