"""Start the TUI."""

from __future__ import annotations


def run(workspace: str | None, *, create: bool = True, conversation: str = "new") -> int:
    """Open the workbench on ``workspace`` (ephemeral without one); a bad name, or a workspace that a
    live Aries holds, is refused here, before the screen is taken over.  ``conversation``: ``new`` (the
    default from the command line), ``last`` (``--continue``) or an id (``--conversation ID``)."""
    if conversation != "new" and workspace is None:
        from services.errors import InvalidInput

        raise InvalidInput("--continue and --conversation need a workspace (-w NAME): an ephemeral one keeps nothing")
    if workspace is not None:
        from services.text.names import validate_name

        validate_name(workspace)
        from services.workspace.leases import WorkspaceBusy, open_elsewhere
        from services.workspace.manager import Workspace, WorkspaceManager

        manager = WorkspaceManager()
        if manager.path_for(workspace).is_dir():
            holder = open_elsewhere(Workspace(manager.path_for(workspace), workspace))
            if holder:  # a live Aries holds it: say so here, before the screen is taken over
                raise WorkspaceBusy(
                    f"workspace {workspace} is open in another Aries (pid {holder.get('pid', '?')}, "
                    f"{holder.get('purpose', '?')}); close it there, or use `aries workspace close {workspace}` "
                    "if that process is gone"
                )
    import gc

    from app.aries_app import AriesApp

    # What the imports made (classes, functions, Textual's and ours) lives as long as the process: out of
    # the collector's sight, the first full collection (due while the first frame is drawn) skips it.
    gc.freeze()
    app = AriesApp(workspace, create=create, conversation=conversation)
    result = app.run()
    return int(result or 0)
