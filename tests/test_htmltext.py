"""HTML to text: one walk (services.text.htmltext) behind the retrieval loaders and builtin:web:extract."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from services.text.htmltext import HtmlTooDeep, HtmlTooLarge, html_sections, html_to_text

ROOT = Path(__file__).resolve().parents[1]

PAGE = """<!doctype html><html><head><title> A  page </title><style>p { color: red }</style></head>
<body><p>Intro <b>bold</b>   text.</p>
<h1>Install</h1><p>Run it.</p><ul><li>one<li>two</ul>
<h2>From source</h2><pre>  make
    install</pre><script>steal()</script>
<h1>Use</h1><table><tr><td>a<td>b</table><noscript><li>hidden</li></noscript></body></html>"""


def test_one_html_parser_in_the_services() -> None:
    """Only services/text/htmltext.py subclasses html.parser.HTMLParser (the loaders and the web tool share it)."""
    found = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(b, ast.Name) and b.id == "HTMLParser")
                or (isinstance(b, ast.Attribute) and b.attr == "HTMLParser")
                for b in node.bases
            ):
                found.append(path.relative_to(ROOT).as_posix())
    assert found == ["services/text/htmltext.py"]


def test_sections_split_at_headings_with_their_path() -> None:
    sections, title = html_sections(PAGE, 64)
    assert title == "A page"
    assert sections == [
        ("Intro bold text.", None),
        ("Install\nRun it.\none\ntwo", "Install"),
        ("From source\nmake\ninstall", "Install > From source"),
        ("Use\na\nb", "Use"),
    ]


def test_page_text_keeps_paragraphs_lists_and_pre() -> None:
    title, text = html_to_text(PAGE)
    assert title == "A page"
    assert text == (
        "Intro bold text.\n\nInstall\n\nRun it.\n\n- one\n\n- two\n\n"
        "From source\n\n  make\n    install\n\nUse\n\na\n\nb"
    )
    assert "steal" not in text and "hidden" not in text and "-\n" not in text  # skipped content adds nothing


def test_bounds_raise_typed_errors() -> None:
    with pytest.raises(HtmlTooDeep, match="nested deeper than 3"):
        html_sections("<div>" * 4 + "x", 3)
    with pytest.raises(HtmlTooLarge, match="more than 5 characters"):
        html_sections("<p>abcdef</p>", 64, max_chars=5)
    with pytest.raises(HtmlTooLarge, match="more than 2 sections"):
        html_sections("<h1>a</h1><h2>b</h2><h3>c</h3>", 64, max_sections=2)


def test_same_markup_same_text() -> None:
    assert html_to_text(PAGE) == html_to_text(PAGE)
    assert html_sections(PAGE, 64) == html_sections(PAGE, 64)
    assert html_to_text("") == ("", "") and html_sections("", 64) == ([], None)
