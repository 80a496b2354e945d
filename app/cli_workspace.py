"""``aries workspace new|open|list|close`` and ``aries artifact add|list``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli import print_json


def register(sub: Any) -> None:
    ws = sub.add_parser("workspace", help="create, open, list and close workspaces")
    ws_sub = ws.add_subparsers(dest="workspace_command", metavar="ACTION", required=True)

    new = ws_sub.add_parser("new", help="create a workspace (repairs it if it exists)")
    new.add_argument("name")
    new.add_argument("--json", action="store_true", help="print the result as JSON")
    new.set_defaults(func=cmd_new)

    opn = ws_sub.add_parser("open", help="open a workspace in the TUI (or check it, without a terminal)")
    opn.add_argument("name")
    opn.add_argument("--check", action="store_true", help="recover and report, do not start the TUI")
    opn.add_argument("--json", action="store_true", help="with --check: print the report as JSON")
    opn.set_defaults(func=cmd_open)

    lst = ws_sub.add_parser("list", help="list workspaces")
    lst.add_argument("--json", action="store_true", help="print the list as JSON")
    lst.set_defaults(func=cmd_list)

    close = ws_sub.add_parser("close", help="mark a workspace closed (clears a stale open marker)")
    close.add_argument("name")
    close.set_defaults(func=cmd_close)

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
    print(f"workspace {workspace.name}: {verb} at {workspace.root}")
    for line in _report_lines(report):
        print(line)
    return 0


def cmd_open(args: argparse.Namespace) -> int:
    from services.workspaces import WorkspaceManager, mark_closed, mark_open

    workspace, report = WorkspaceManager().open(args.name)
    if args.check or not sys.stdout.isatty():
        stale = mark_open(workspace)
        mark_closed(workspace)
        if args.json:
            print_json({**workspace.summary(), **_report_dict(report), "unclean_exit": stale})
            return 0
        print(f"workspace {workspace.name}: ok at {workspace.root}")
        if stale:
            print(f"  recovered after an unclean exit (pid {stale.get('pid')}, opened {stale.get('opened_at')})")
        for line in _report_lines(report):
            print(line)
        if not args.check:
            print("  (no terminal: not starting the TUI; use 'aries -w NAME' in a terminal)")
        return 0
    from app.cli import run_tui

    return run_tui(args.name, create=False)


def cmd_list(args: argparse.Namespace) -> int:
    from services.workspaces import WorkspaceManager, marker_is_live, session_marker

    manager = WorkspaceManager()
    rows = []
    for name in manager.list():
        workspace, _ = manager.open(name)
        summary = workspace.summary()
        marker = session_marker(workspace)
        summary["open"] = bool(marker and marker_is_live(marker))
        rows.append(summary)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print(f"no workspaces yet under {manager.root}; create one with: aries workspace new NAME")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Workspaces in {manager.root}", title_justify="left")
    for column in ("name", "profile", "conversations", "artifacts", "indexes", "created", "open"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            row["profile"],
            str(row["conversations"]),
            str(row["artifacts"]),
            ", ".join(row["indexes"]) or "-",
            row["created_at"][:19].replace("T", " "),
            "yes" if row["open"] else "",
        )
    Console(soft_wrap=True).print(table)
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    from services.workspaces import WorkspaceManager, mark_closed, marker_is_live, session_marker

    workspace, report = WorkspaceManager().open(args.name)
    marker = session_marker(workspace)
    if marker and marker_is_live(marker):
        sys.stderr.write(f"aries: workspace {args.name} is open in process {marker.get('pid')}; quit Aries there\n")
        return 1
    removed = mark_closed(workspace)
    print(f"workspace {workspace.name}: closed" + (" (cleared a stale open marker)" if removed else ""))
    for line in _report_lines(report):
        print(line)
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
    print(f"{artifact.id}  {artifact.name}  {artifact.size_bytes} bytes  {artifact.mime_type}: {state}")
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
        print(f"{a.id}  {a.created_at[:19].replace('T', ' ')}  {a.size_bytes:>10}  {a.mime_type:<24} {a.name}{desc}")
    return 0
