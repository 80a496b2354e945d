"""The Markdown preview: markdown-it-py (CommonMark + tables, raw HTML off) then nh3 with an allow-list.

Two layers, so that a mistake in one is caught by the other:

1. markdown-it-py renders with ``html=False``: raw HTML in the source (``<script>``, ``<img onerror>``,
   ``<svg>``) comes out as escaped text.  Its own link validation already refuses ``javascript:``,
   ``vbscript:``, ``file:`` and most ``data:`` URLs; ours (:func:`_safe_url`) keeps only ``http(s)``,
   relative and ``#`` URLs for links, and only relative or ``#`` ones for images.
2. nh3 (ammonia) keeps only the tags and attributes of :data:`TAGS` / :data:`ATTRIBUTES`, the URL
   schemes ``http`` and ``https``, and adds ``rel="noopener noreferrer"`` to links.

A remote image (``![x](https://host/y.png)``) becomes a link to it: the page would not load it anyway
(``img-src 'self' data:``), and a reader can still follow it.  ``data:`` images are dropped (their alt
text stays).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

TAGS = frozenset(
    {
        "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "img", "li",
        "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}}
"""No ``style`` anywhere: the CSP (``style-src 'self'``) would refuse it; table alignment is dropped."""
URL_SCHEMES = frozenset({"http", "https"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _scheme(url: str) -> str | None:
    cleaned = re.sub(r"[\x00-\x20\x7f]+", "", url)
    match = _SCHEME.match(cleaned)
    return match.group(0)[:-1].lower() if match else None


def _safe_url(url: str, *, image: bool) -> bool:
    scheme = _scheme(url)
    if scheme is None:
        return not url.strip().startswith("//")  # protocol-relative is remote
    return not image and scheme in URL_SCHEMES


@lru_cache(maxsize=1)
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    md.validateLink = lambda url: _safe_url(url, image=False)  # type: ignore[method-assign]
    renderer: Any = md.renderer
    default_image = renderer.rules.get("image")

    def image(_renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        if _safe_url(src, image=True):
            return str(default_image(tokens, idx, options, env)) if default_image else ""
        alt = renderer.renderInlineAsText(token.children or [], options, env)
        if _scheme(src) in URL_SCHEMES:  # remote: a link instead of an image the CSP would block
            from markdown_it.common.utils import escapeHtml

            return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'
        from markdown_it.common.utils import escapeHtml

        return escapeHtml(alt)

    md.add_render_rule("image", image)
    return md


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href" and not _safe_url(value, image=False):
        return None
    if attribute == "src" and not _safe_url(value, image=True):
        return None
    return value


def render_markdown(text: str) -> str:
    """Sanitized HTML for ``text`` (see the module docstring)."""
    import nh3

    html = _renderer().render(text)
    return str(
        nh3.clean(
            html,
            tags=set(TAGS),
            attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
            attribute_filter=_attribute_filter,
            url_schemes=set(URL_SCHEMES),
            link_rel="noopener noreferrer",
            strip_comments=True,
        )
    )
