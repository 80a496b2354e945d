"""Plain, neutralised text for anything user-, document- or tool-supplied that reaches the screen.

Textual parses ``str`` as markup in ``Static``, ``Label``, ``DataTable`` cells, ``OptionList``
prompts and notifications. A message containing ``[/x]`` then raises a ``MarkupError`` and takes the
App down, and ``[link=…]`` or ``[bold red]`` changes what the operator sees. Build widgets' content
with these helpers instead of interpolating into markup strings: the text is shown literally, and
control, escape and bidi characters are made visible by ``services.text.textsafe.neutralize``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.content import Content

from services.text.textsafe import neutralize

ELLIPSIS = "…"


def clean(value: Any, *, single_line: bool = False) -> str:
    """``value`` as a string with every control and bidi character made visible."""
    return neutralize(value if isinstance(value, str) else str(value), single_line=single_line)


def plain(value: Any, style: str = "", *, single_line: bool = False) -> Text:
    """A Rich ``Text`` of ``value`` shown literally (never parsed as markup), neutralised."""
    return Text(clean(value, single_line=single_line), style=style)


def content(value: Any, style: str = "", *, single_line: bool = False) -> Content:
    """A Textual ``Content`` of ``value`` shown literally, neutralised."""
    text = clean(value, single_line=single_line)
    return Content.styled(text, style) if style else Content(text)


def clip(value: Any, width: int) -> str:
    """One neutralised line of at most ``width`` cells, ending in an ellipsis when cut."""
    from rich.cells import cell_len, set_cell_size

    text = clean(value, single_line=True)
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1) + ELLIPSIS


__all__ = ["ELLIPSIS", "clean", "clip", "content", "plain"]
