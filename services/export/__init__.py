"""A conversation exported as a document a colleague can read: Markdown or one self-contained HTML file.

:mod:`~services.export.document` reads what the export says (the transcript, the audit store's
decisions, the cited chunks) and makes every text safe once; :mod:`~services.export.markdown` and
:mod:`~services.export.html` only lay it out. The same records always give the same bytes.

``aries -w W history export ID --format md|html [-o FILE]`` and ``/history export [md|html]`` (which
writes ``<workspace>/exports/<conversation>.<ext>``, see :func:`export_path`) are the two callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.errors import InvalidInput

if TYPE_CHECKING:
    from services.workspace.manager import Workspace

FORMATS = ("md", "html")


@dataclass(frozen=True)
class Export:
    conversation_id: str
    format: str
    data: bytes


def export_conversation(workspace: Workspace, reference: str, fmt: str = "md") -> Export:
    """The conversation ``reference`` (an id, a unique start of one, or ``last``) as ``fmt``;
    ``NotFound`` / ``InvalidInput`` (one line) for an unknown or ambiguous reference or format."""
    from services.conversation.history import resolve
    from services.export.document import build

    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}; use md or html")
    conversation_id = resolve(workspace, reference)
    document = build(workspace, conversation_id)
    if fmt == "html":
        from services.export.html import render
    else:
        from services.export.markdown import render
    return Export(conversation_id, fmt, render(document))


def export_path(workspace: Workspace, export: Export) -> Path:
    """Where the workbench writes an export: ``<workspace>/exports/<conversation>.<md|html>``."""
    return workspace.paths.exports / f"{export.conversation_id}.{export.format}"


def write_export(export: Export, path: Path) -> Path:
    """Write ``export`` to ``path`` atomically (a reader never sees half of it); its parent is made."""
    from services.files.atomic import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, export.data)
    return path


__all__ = ["FORMATS", "Export", "export_conversation", "export_path", "write_export"]
