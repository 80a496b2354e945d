"""``aries rewind``: a conversation back to the end of a turn, and the files Aries's tools changed since.

    aries -w W rewind N|NAME [--conversation ID] [--yes] [--include-changed] [--json]

Without ``--yes`` it only shows what it would do (every file, with the diff of one changed outside
Aries, and the shell/MCP calls it cannot put back) and exits 3. ``--include-changed`` also
overwrites the files changed outside Aries since (distinct from ``--yes``). The work is in
``services.session.rewind``.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli._common import EXIT_DENIED, EXIT_OK, err, fail, open_session, out, print_json, workspace_option


def register(subparsers: Any) -> None:
    rewind = subparsers.add_parser(
        "rewind",
        help="put a conversation back to the end of turn N (or a checkpoint) and the files Aries's tools changed since",
        description="The conversation back to the end of turn N (or checkpoint NAME) and every file Aries's tools "
        "wrote or deleted after it restored from its snapshots, through the tool gateway, one audit row per file. "
        "A file changed outside Aries since is listed with its diff and left unless --include-changed. The turns "
        "put away stay readable; a rewind to one of them brings them back.",
    )
    rewind.add_argument("reference", metavar="N|NAME", help="a turn number, or a checkpoint's name")
    rewind.add_argument("--conversation", metavar="ID", default="last", help="the conversation (default: the last)")
    rewind.add_argument("--yes", action="store_true", help="agree to the rewind as shown (without: only show it)")
    rewind.add_argument(
        "--include-changed", action="store_true", help="also overwrite the files changed outside Aries since"
    )
    rewind.add_argument("--json", action="store_true", help="print the plan and the outcome as JSON")
    workspace_option(rewind)
    rewind.set_defaults(func=handle_rewind)


def handle_rewind(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.session.rewind import apply_rewind, plan_rewind

    need = "rewind needs a workspace (-w NAME): an ephemeral one keeps no conversation"
    try:
        with open_session(args, need=need, conversation=args.conversation) as session:
            plan = plan_rewind(session, args.reference)
            if not args.yes:
                _show(plan, args.json, None)
                err("aries: nothing was changed; rerun with --yes to rewind (--include-changed to overwrite too)")
                return EXIT_DENIED
            done = apply_rewind(session, plan, include_changed=args.include_changed)
    except AriesError as exc:
        return fail(exc)  # its own exit code: 5 for a conversation another Aries holds
    _show(plan, args.json, done)
    return EXIT_OK


def _show(plan: Any, as_json: bool, done: dict[str, Any] | None) -> None:
    if as_json:
        print_json({"plan": plan.to_dict(), "done": done})
        return
    for line in plan.lines():
        out(line, single_line=True)
    for change in plan.changed:
        out(f"changed outside Aries since: {change.rel}", single_line=True)
        out(change.diff, end="")
    if done is not None:
        out(f"rewound ({done['rewind_id']}): {len(done['files'])} file(s) put back", single_line=True)
