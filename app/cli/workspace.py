"""``aries workspace new|open|list|close`` (export and import: :mod:`app.cli.bundle`).

These commands manage workspaces themselves (create, check, list, clear a stale open record), so
they use ``services.workspace.manager`` directly; every command that works *in* a workspace goes through
``open_session``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli._common import out, print_json, print_table, safe, warn


def register(sub: Any) -> None:
    ws = sub.add_parser("workspace", help="create, open, list and close workspaces")
    ws_sub = ws.add_subparsers(dest="workspace_command", metavar="ACTION", required=True)

    new = ws_sub.add_parser("new", help="create a workspace (repairs it if it exists)")
    new.add_argument("name")
    new.add_argument("--json", action="store_true", help="print the result as JSON")
    new.set_defaults(func=cmd_new)

    opn = ws_sub.add_parser("open", help="open a workspace in the TUI (or check it, without a terminal)")
    opn.add_argument("name")
    opn.add_argument(
        "--check",
        action="store_true",
        help="check workspace.yaml, policy.yaml, audit.db, transcripts, artifacts and indexes; exit 1 on a problem",
    )
    opn.add_argument("--json", action="store_true", help="with --check: print the checks as JSON")
    opn.set_defaults(func=cmd_open)

    lst = ws_sub.add_parser("list", help="list workspaces")
    lst.add_argument("--json", action="store_true", help="print the list as JSON")
    lst.set_defaults(func=cmd_list)

    close = ws_sub.add_parser("close", help="clear the open record of an Aries that is gone (never a live one's)")
    close.add_argument("name")
    close.set_defaults(func=cmd_close)

    from app.cli.bundle import register_bundle_commands
    from app.cli.trust import register_trust_command

    register_bundle_commands(ws_sub)
    register_trust_command(ws_sub)


def _report_lines(report: Any) -> list[str]:
    lines = [f"  repaired: {item}" for item in report.repaired]
    if report.removed_temp_files:
        lines.append(f"  removed {report.removed_temp_files} leftover temp file(s) of interrupted writes")
    lines += [f"  warning: {problem}" for problem in report.transcript_problems]
    lines += [f"  warning: artifact {problem}" for problem in report.artifact_problems]
    return lines


def _report_dict(report: Any) -> dict[str, Any]:
    return {
        "created": report.created,
        "repaired": report.repaired,
        "removed_temp_files": report.removed_temp_files,
        "transcript_problems": [str(p) for p in report.transcript_problems],
        "artifact_problems": report.artifact_problems,
    }


def cmd_new(args: argparse.Namespace) -> int:
    from services.workspace.manager import WorkspaceManager

    workspace, report = WorkspaceManager().create(args.name)
    if args.json:
        print_json({**workspace.summary(), **_report_dict(report)})
        return 0
    verb = "created" if report.created else "already exists"
    out(f"workspace {workspace.name}: {verb} at {workspace.root}", single_line=True)
    for line in _report_lines(report):
        out(line, single_line=True)
    return 0


def _holder_text(record: dict[str, Any]) -> str:
    purpose = record.get("purpose")
    since = record.get("since") or record.get("opened_at") or "an unknown time"
    return f"pid {record.get('pid', '?')}{f', {purpose}' if purpose else ''}, since {since}"


def cmd_open(args: argparse.Namespace) -> int:
    if args.check or not sys.stdout.isatty():
        return _check(args)
    from app.main import run

    return run(args.name, create=False)


def _check(args: argparse.Namespace) -> int:
    """``workspace open NAME --check``: recover what is safe to, run every check, report; 1 if one fails."""
    from services.errors import AriesError
    from services.session.workspace_check import check_workspace
    from services.workspace.leases import WorkspaceBusy, clear_stale, open_elsewhere
    from services.workspace.manager import WorkspaceManager, session_marker

    workspace, report = WorkspaceManager().open(args.name)
    holder = open_elsewhere(workspace)
    unclean = None
    if holder is None and session_marker(workspace) is not None:
        try:
            unclean = clear_stale(workspace)  # the recorded holder is gone: take and give back the lease
        except WorkspaceBusy:
            holder = session_marker(workspace)
    checks = check_workspace(workspace)
    ok = all(check.ok for check in checks)
    summary: dict[str, Any] = {"name": workspace.name, "path": str(workspace.root)}
    try:
        summary = workspace.summary()
    except AriesError:
        pass  # the workspace.yaml check says what is wrong
    if args.json:
        print_json(
            {
                **summary,
                **_report_dict(report),
                "ok": ok,
                "checks": [check.to_dict() for check in checks],
                "unclean_exit": unclean,
                "open_in": holder,
            }
        )
        return 0 if ok else 1
    state = "ok" if ok else "PROBLEMS"
    out(f"workspace {workspace.name}: {state} at {workspace.root}", single_line=True)
    if holder is not None:
        out(f"  open in another Aries ({safe(_holder_text(holder), single_line=True)}): nothing was repaired")
    if unclean:
        out(f"  recovered after an unclean exit ({safe(_holder_text(unclean), single_line=True)})")
    for line in _report_lines(report):
        out(line, single_line=True)
    width = max(len(check.name) for check in checks)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        out(f"  {mark} {safe(check.name, single_line=True):<{width}}  {safe(check.detail, single_line=True)}")
    if not args.check:
        out("  (no terminal: not starting the TUI; use 'aries -w NAME' in a terminal)")
    return 0 if ok else 1


def cmd_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.trust.records import workspace_trust
    from services.workspace.leases import open_elsewhere
    from services.workspace.manager import Workspace, WorkspaceManager, held_lease

    manager = WorkspaceManager()
    rows = []
    for name in manager.list():
        workspace = Workspace(manager.path_for(name), name)  # listing repairs nothing
        try:
            summary = workspace.summary()
        except AriesError as error:
            summary = {"name": name, "path": str(workspace.root), "error": error.message}
        summary["open"] = open_elsewhere(workspace) is not None or held_lease(workspace) is not None
        summary["trust"] = workspace_trust(workspace.root).status
        rows.append(summary)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        out(f"no workspaces yet under {manager.root}; create one with: aries workspace new NAME")
        return 0
    cells = []
    for row in rows:
        if "error" in row:
            cells.append([row["name"], "", "", "", "", f"error: {row['error']}", "", row["trust"]])
        else:
            cells.append(
                [
                    row["name"],
                    row["profile"],
                    str(row["conversations"]),
                    str(row["artifacts"]),
                    ", ".join(row["indexes"]) or "-",
                    row["created_at"][:19].replace("T", " "),
                    "yes" if row["open"] else "",
                    row["trust"],
                ]
            )
    columns = ("name", "profile", "conversations", "artifacts", "indexes", "created", "open", "trust")
    print_table(f"Workspaces in {manager.root}", columns, cells)
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    from services.workspace.leases import WorkspaceBusy, clear_stale, lease_holder, open_elsewhere
    from services.workspace.manager import WorkspaceManager

    workspace, report = WorkspaceManager().open(args.name)
    holder = open_elsewhere(workspace) or lease_holder(workspace)
    if holder is not None:
        warn(f"workspace {args.name} is open in another Aries ({_holder_text(holder)}); quit Aries there")
        return 1
    try:
        stale = clear_stale(workspace)
    except WorkspaceBusy as busy:
        warn(busy.message)
        return 1
    extra = f" (cleared the stale open record of pid {stale.get('pid', '?')}, which is gone)" if stale else ""
    out(f"workspace {workspace.name}: closed{extra}", single_line=True)
    for line in _report_lines(report):
        out(line, single_line=True)
    return 0
