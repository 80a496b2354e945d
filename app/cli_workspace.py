"""``aries workspace new|open|list|close|export|import`` and ``aries artifact add|list``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli import console, print_json, safe


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

    from app.cli_bundle import register_bundle_commands
    from app.cli_trust import register_trust_command

    register_bundle_commands(ws_sub)
    register_trust_command(ws_sub)

    art = sub.add_parser("artifact", help="add and list artifacts of a workspace")
    art_sub = art.add_subparsers(dest="artifact_command", metavar="ACTION", required=True)
    add = art_sub.add_parser("add", help="add a file to the artifact registry")
    add.add_argument("file", type=Path)
    add.add_argument("--description", "-d", help="a short description")
    add.add_argument("--json", action="store_true", help="print the artifact as JSON")
    add.set_defaults(func=cmd_artifact_add)
    alst = art_sub.add_parser("list", help="list the artifact registry")
    alst.add_argument("--json", action="store_true", help="print the registry as JSON")
    alst.set_defaults(func=cmd_artifact_list)


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
    from services.workspaces import WorkspaceManager

    workspace, report = WorkspaceManager().create(args.name)
    if args.json:
        print_json({**workspace.summary(), **_report_dict(report)})
        return 0
    verb = "created" if report.created else "already exists"
    print(safe(f"workspace {workspace.name}: {verb} at {workspace.root}", single_line=True))
    for line in _report_lines(report):
        print(safe(line, single_line=True))
    return 0


def _holder_text(record: dict[str, Any]) -> str:
    purpose = record.get("purpose")
    since = record.get("since") or record.get("opened_at") or "an unknown time"
    return f"pid {record.get('pid', '?')}{f', {purpose}' if purpose else ''}, since {since}"


def cmd_open(args: argparse.Namespace) -> int:
    if args.check or not sys.stdout.isatty():
        return _check(args)
    from app.cli import run_tui

    return run_tui(args.name, create=False)


def _check(args: argparse.Namespace) -> int:
    """``workspace open NAME --check``: recover what is safe to, run every check, report; 1 if one fails."""
    from services.errors import AriesError
    from services.leases import clear_stale
    from services.workspace_check import check_workspace
    from services.workspaces import WorkspaceBusy, WorkspaceManager, open_elsewhere, session_marker

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
    print(safe(f"workspace {workspace.name}: {state} at {workspace.root}", single_line=True))
    if holder is not None:
        print(f"  open in another Aries ({safe(_holder_text(holder), single_line=True)}): nothing was repaired")
    if unclean:
        print(f"  recovered after an unclean exit ({safe(_holder_text(unclean), single_line=True)})")
    for line in _report_lines(report):
        print(safe(line, single_line=True))
    width = max(len(check.name) for check in checks)
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        print(f"  {mark} {safe(check.name, single_line=True):<{width}}  {safe(check.detail, single_line=True)}")
    if not args.check:
        print("  (no terminal: not starting the TUI; use 'aries -w NAME' in a terminal)")
    return 0 if ok else 1


def cmd_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.workspaces import Workspace, WorkspaceManager, held_lease, open_elsewhere

    manager = WorkspaceManager()
    rows = []
    for name in manager.list():
        workspace = Workspace(manager.path_for(name), name)  # listing repairs nothing
        try:
            summary = workspace.summary()
        except AriesError as error:
            summary = {"name": name, "path": str(workspace.root), "error": error.message}
        summary["open"] = open_elsewhere(workspace) is not None or held_lease(workspace) is not None
        rows.append(summary)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(safe(f"no workspaces yet under {manager.root}; create one with: aries workspace new NAME"))
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(safe(f"Workspaces in {manager.root}", single_line=True)), title_justify="left")
    for column in ("name", "profile", "conversations", "artifacts", "indexes", "created", "open"):
        table.add_column(column)
    for row in rows:
        if "error" in row:
            cells = [row["name"], "", "", "", "", f"error: {row['error']}", ""]
        else:
            cells = [
                row["name"],
                row["profile"],
                str(row["conversations"]),
                str(row["artifacts"]),
                ", ".join(row["indexes"]) or "-",
                row["created_at"][:19].replace("T", " "),
                "yes" if row["open"] else "",
            ]
        table.add_row(*(Text(safe(cell, single_line=True)) for cell in cells))  # Text: never parsed as markup
    console(soft_wrap=True).print(table)
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    from services.leases import clear_stale
    from services.workspaces import WorkspaceBusy, WorkspaceManager, lease_holder, open_elsewhere

    workspace, report = WorkspaceManager().open(args.name)
    holder = open_elsewhere(workspace) or lease_holder(workspace)
    if holder is not None:
        sys.stderr.write(
            safe(f"aries: workspace {args.name} is open in another Aries ({_holder_text(holder)}); quit Aries there\n")
        )
        return 1
    try:
        stale = clear_stale(workspace)
    except WorkspaceBusy as busy:
        sys.stderr.write(safe(f"aries: {busy.message}", single_line=True) + "\n")
        return 1
    extra = f" (cleared the stale open record of pid {stale.get('pid', '?')}, which is gone)" if stale else ""
    print(safe(f"workspace {workspace.name}: closed{extra}", single_line=True))
    for line in _report_lines(report):
        print(safe(line, single_line=True))
    return 0


def _workspace_for_artifacts(args: argparse.Namespace) -> Any:
    from services.errors import InvalidInput
    from services.workspaces import WorkspaceManager

    if not args.workspace:
        raise InvalidInput("artifacts live in a workspace: add --workspace NAME (aries -w NAME artifact ...)")
    workspace, _ = WorkspaceManager().open(args.workspace)
    return workspace


def cmd_artifact_add(args: argparse.Namespace) -> int:
    workspace = _workspace_for_artifacts(args)
    artifact, created = workspace.artifacts.add_file(
        args.file,
        description=args.description,
        provenance={"kind": "cli", "command": f"aries artifact add {args.file}"},
    )
    if args.json:
        print_json({**artifact.to_dict(), "created": created})
        return 0
    state = "added" if created else "already in the registry (identical content)"
    line = f"{artifact.id}  {artifact.name}  {artifact.size_bytes} bytes  {artifact.mime_type}: {state}"
    print(safe(line, single_line=True))
    return 0


def cmd_artifact_list(args: argparse.Namespace) -> int:
    workspace = _workspace_for_artifacts(args)
    artifacts = workspace.artifacts.list()
    if args.json:
        print_json([a.to_dict() for a in artifacts])
        return 0
    if not artifacts:
        print(f"no artifacts in workspace {workspace.name}; add one with: aries -w {workspace.name} artifact add FILE")
        return 0
    for a in artifacts:
        desc = f"  {a.description}" if a.description else ""
        line = f"{a.id}  {a.created_at[:19].replace('T', ' ')}  {a.size_bytes:>10}  {a.mime_type:<24} {a.name}{desc}"
        print(safe(line, single_line=True))
    return 0
