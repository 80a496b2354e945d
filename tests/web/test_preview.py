"""Hostile Markdown through /api/preview comes out inert: no script, no event handler, no
javascript:/data:/vbscript: URL, no remote or data: image, no raw HTML that runs."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

from services.web.preview import render_markdown
from tests.web.conftest import TOKEN

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click]( javascript:alert(1))",
    "[click](<javascript:alert(1)>)",
    "[click](java\tscript:alert(1))",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![pixel](data:image/png;base64,iVBORw0KGgo=)",
    "![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "![remote](https://evil.example/track.png)",
    "![remote](//evil.example/track.png)",
    '<svg onload="alert(1)"><script>alert(1)</script></svg>',
    '<iframe src="https://evil.example"></iframe>',
    "<style>body{background:url(https://evil.example/x)}</style>",
    '<div style="background:url(https://evil.example/x)">x</div>',
    '![x"onerror="alert(1)](a.png)',
    "[ref]\n\n[ref]: javascript:alert(1)",
    "<details open ontoggle=alert(1)>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
]


class _Elements(HTMLParser):
    """The real elements of an HTML fragment (escaped text is text, not markup)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))


ALLOWED = {"a", "p", "img", "em", "strong", "code", "pre", "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
           "blockquote", "table", "thead", "tbody", "tr", "th", "td", "hr", "br", "del", "s"}  # fmt: skip


def _assert_inert(html: str) -> None:
    parser = _Elements()
    parser.feed(html)
    for tag, attrs in parser.elements:
        assert tag in ALLOWED, html
        for name, value in attrs:
            assert name in {"href", "src", "alt", "title", "rel"}, html
            url = re.sub(r"[\x00-\x20]", "", value or "").lower()
            if name in ("href", "src"):
                assert not url.startswith(("javascript:", "vbscript:", "data:", "//", "file:")), html
            if name == "src":
                assert not url.startswith(("http:", "https:")), html  # no remote image


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markdown_renders_inert(source: str) -> None:
    _assert_inert(render_markdown(source))


def test_plain_markdown_keeps_its_structure() -> None:
    html = render_markdown(
        "# Title\n\nSome *em* and **strong** and `code`.\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n"
        "[site](https://example.org) [local](other.md) [anchor](#title) ![pic](img/a.png)\n"
    )
    for piece in ("<h1>Title</h1>", "<em>em</em>", "<strong>strong</strong>", "<code>code</code>", "<li>a</li>"):
        assert piece in html
    assert "<table>" in html and "<td>1</td>" in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer"' in html
    assert 'href="other.md"' in html and 'href="#title"' in html and 'src="img/a.png"' in html


def test_a_remote_image_becomes_a_link() -> None:
    html = render_markdown("![the chart](https://example.org/chart.png)")
    assert "<img" not in html
    assert 'href="https://example.org/chart.png"' in html and "the chart" in html


async def test_the_preview_endpoint_sanitizes_every_hostile_sample(served: Any) -> None:
    client, _state = served
    for source in HOSTILE:
        response = await client.post("/api/preview", json={"content": source}, headers={"X-Aries-Token": TOKEN})
        assert response.status == 200
        assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
        _assert_inert((await response.json())["html"])
    bad = await client.post("/api/preview", data=b"not json", headers={"X-Aries-Token": TOKEN})
    assert bad.status == 400
    unauthorized = await client.post("/api/preview", json={"content": "# x"})
    assert unauthorized.status == 401
