"""Start the TUI."""

from __future__ import annotations


def refuse_without_terminal(workspace: str | None) -> None:
    """The full-screen workbench needs a terminal on both stdin and stdout: without one it would write
    escape sequences into a pipe and wait for keys that never come. One line instead, naming what
    works there (``--plain``, ``aries ask``), exit code 2."""
    import sys

    if sys.stdin.isatty() and sys.stdout.isatty():
        return
    from services.errors import InvalidInput

    which = "stdin" if not sys.stdin.isatty() else "stdout"
    name = workspace or "W"
    raise InvalidInput(
        f"no terminal ({which} is not one): the workbench needs one; for a line-by-line session use "
        f"`aries -w {name} --plain`, for one answer `aries -w {name} ask QUESTION`"
    )


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
    if workspace is not None:
        from services.workspace.leases import WorkspaceBusy, open_elsewhere
        from services.workspace.manager import Workspace, WorkspaceManager

        manager = WorkspaceManager()
        if manager.path_for(workspace).is_dir():
            found = Workspace(manager.path_for(workspace), workspace)
            holder = open_elsewhere(found)
            if holder:  # a live Aries holds it: say so here, before the screen is taken over
                raise WorkspaceBusy(
                    f"workspace {workspace} is open in another Aries (pid {holder.get('pid', '?')}, "
                    f"{holder.get('purpose', '?')}); close it there, or use `aries workspace close {workspace}` "
                    "if that process is gone"
                )
            if conversation not in ("new", "last"):  # an unknown id: one line here, not a toast over another
                from services.conversation.history import resolve

                resolve(found, conversation)
        elif conversation not in ("new", "last"):
            from services.errors import NotFound

            raise NotFound(f"no workspace named {workspace!r}, so no conversation {conversation!r} in it")
    refuse_without_terminal(workspace)  # after the arguments' own errors, before the screen is taken
    import gc

    from app.aries_app import AriesApp

    # What the imports made (classes, functions, Textual's and ours) lives as long as the process: out of
    # the collector's sight, the first full collection (due while the first frame is drawn) skips it.
    gc.freeze()
    app = AriesApp(workspace, create=create, conversation=conversation)
    result = app.run()
    return int(result or 0)
