"""``aries history``: a workspace's conversations; ``aries history fork``: a copy up to an earlier turn.

    aries -w W history [--json]
    aries -w W history fork ID [--turn N] [--json]

Continue one with ``aries -w W ask --conversation ID …`` (or ``--continue`` for the last one), or
open it in the workbench with ``aries -w W --conversation ID`` (``--continue``). The work is in
``services.conversation.history``; nothing here writes except ``fork`` (a new transcript).
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli._common import out, positive_int, print_json, workspace_option


def register(subparsers: Any) -> None:
    history = subparsers.add_parser(
        "history",
        help="list the workspace's conversations (date, first prompt, turns, model); fork one",
        description="The workspace's conversations, least recently written first (the last is the one "
        "--continue reopens).",
        epilog="continue one: aries -w W ask --conversation ID QUESTION (or --continue for the last); "
        "in the workbench: aries -w W --conversation ID (or --continue).",
    )
    workspace_option(history)
    history.add_argument("--json", action="store_true", help="print JSON (one object per conversation)")
    history.set_defaults(func=handle_history)
    actions = history.add_subparsers(dest="history_action", metavar="ACTION")
    fork = actions.add_parser(
        "fork",
        help="a new conversation with the first N turns of another (the source is left as it was)",
    )
    fork.add_argument("conversation", metavar="ID", help="a conversation id, a unique start of one, or 'last'")
    fork.add_argument("--turn", type=positive_int, metavar="N", help="keep turns 1..N (default: all)")
    workspace_option(fork)
    fork.add_argument("--json", action="store_true", help="print the new conversation as JSON")
    fork.set_defaults(func=handle_fork)


def _workspace(args: argparse.Namespace) -> Any:
    """The named workspace, read as it is (no repair: a live Aries may hold it)."""
    from services.errors import InvalidInput, NotFound
    from services.workspaces import Workspace, WorkspaceManager

    name = getattr(args, "workspace", None)
    if not name:
        raise InvalidInput("history needs a workspace (-w NAME): an ephemeral one keeps no conversation")
    manager = WorkspaceManager()
    path = manager.path_for(name)
    if not path.is_dir():
        raise NotFound(f"no workspace named {name!r}; create it with: aries workspace new {name}")
    return Workspace(path, name)


def handle_history(args: argparse.Namespace) -> int:
    from services.conversation.history import list_summaries

    workspace = _workspace(args)
    summaries = list_summaries(workspace)
    if args.json:
        print_json([summary.to_dict() for summary in summaries])
        return 0
    if not summaries:
        out(f"no conversations in workspace {workspace.name} yet", single_line=True)
        return 0
    for summary in summaries:
        when = (summary.updated_at or "")[:16].replace("T", " ")
        model = summary.model or "-"
        fork = f"  (fork of {summary.forked_from['conversation_id']})" if summary.forked_from else ""
        line = f"{summary.conversation_id}  {when:16}  {summary.turns:>4} turn(s)  {model:<24}  {summary.first_prompt}"
        out(line + fork, single_line=True)
    return 0


def handle_fork(args: argparse.Namespace) -> int:
    from services.conversation.history import fork, summarize

    workspace = _workspace(args)
    target = fork(workspace, args.conversation, args.turn)
    summary = summarize(target.path)
    if args.json:
        print_json(summary.to_dict())
    else:
        out(f"{summary.conversation_id}  {summary.turns} turn(s) copied", single_line=True)
    return 0
