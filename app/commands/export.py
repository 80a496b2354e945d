"""``/history export [md|html]``: the open conversation as a document, written to
``<workspace>/exports/<conversation>.<md|html>`` (:mod:`services.export`).

Why a folder of its own and not the artifact registry: an export is a document the operator hands to
someone, found by the conversation's name and replaced by the next export of it (the same
conversation gives the same bytes), not a content-addressed record of what a tool stored, and writing
it is not a tool call (no policy decision, no audit row). ``exports/`` is one of the workspace's own
folders that no tool may write (``services.workspace.paths.INTERNAL``: a model cannot plant a page
there) and a workspace bundle does not carry it (exports are made again from the transcripts). The
path is said in a notification, not in a transcript notice: a notice would change the conversation it
has just exported.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.host import run_task
from services.errors import AriesError

if TYPE_CHECKING:
    from app.host import Host


class ExportController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def export(self, fmt: str) -> None:
        session = self.host.require_session()
        workspace, conversation_id = session.workspace, session.conversation.conversation_id
        if not session.conversation.transcript.path.is_file():
            self.host.notify(
                "Nothing to export yet: this conversation has no entry (type a message first).",
                title="/history export",
                severity="warning",
            )
            return

        def work() -> Path:
            from services.export import export_conversation, export_path, write_export

            export = export_conversation(workspace, conversation_id, fmt)
            path = export_path(workspace, export)
            try:
                return write_export(export, path)
            except OSError as exc:  # a full disk, a folder that cannot be written: one line
                raise AriesError(f"cannot write {path}: {exc.strerror or exc}") from None

        def done(path: Path) -> None:
            self.host.notify(f"Exported to {path}", title="/history export", timeout=10)

        run_task(self.host, "/history export", work, done, group="export")
