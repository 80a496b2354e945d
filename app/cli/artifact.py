"""``aries artifact add|list``: the workspace's artifact registry.

    aries -w NAME artifact add FILE [--description TEXT] [--policy FILE] [--mode MODE] [--approve] [--json]
    aries -w NAME artifact list [--json]

``add`` is a governed call of ``builtin:fs:add_artifact`` through the session's gateway, the same
decision as ``/artifact add`` in the TUI: the policy's path rules (a file outside the allowed roots
— by default the workspace — is refused), an audit row and a transcript entry. A relative FILE is
taken from the current folder. Exit codes: 0 added (or already there), 3 refused by the policy,
1 other failures, 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli._common import (
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    POLICY_HELP,
    fail,
    open_session,
    out,
    print_json,
    warn,
)
from services.approval_mode import MODE_NAMES

ADD_TOOL = "builtin:fs:add_artifact"
NEED_WORKSPACE = "artifacts live in a workspace: add --workspace NAME (aries -w NAME artifact ...)"


def register(sub: Any) -> None:
    art = sub.add_parser("artifact", help="add and list artifacts of a workspace")
    art_sub = art.add_subparsers(dest="artifact_command", metavar="ACTION", required=True)
    add = art_sub.add_parser(
        "add",
        help="add a file to the artifact registry (a governed call: the policy's roots decide, it is audited)",
    )
    add.add_argument("file", type=Path)
    add.add_argument("--description", "-d", help="a short description")
    add.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    add.add_argument("--mode", choices=MODE_NAMES, help="override the approval mode")
    add.add_argument("--approve", action="store_true", help="approve the call if the policy asks for approval")
    add.add_argument("--json", action="store_true", help="print the artifact as JSON")
    add.set_defaults(func=cmd_artifact_add)
    alst = art_sub.add_parser("list", help="list the artifact registry")
    alst.add_argument("--json", action="store_true", help="print the registry as JSON")
    alst.set_defaults(func=cmd_artifact_list)


def cmd_artifact_add(args: argparse.Namespace) -> int:
    from services.tools.calls import approve_all

    call: dict[str, Any] = {"path": str(args.file.absolute())}  # the operator's path, from their folder
    if args.description is not None:
        call["description"] = args.description
    approver = approve_all if args.approve else None
    with open_session(args, need=NEED_WORKSPACE, policy_file=args.policy, mode=args.mode, approver=approver) as session:
        session.policy()  # a broken policy in force is one clear line, not a refusal of the call
        result = session.call_tool_sync(ADD_TOOL, call)
    if result.error is not None or result.data is None:
        return _refused(result)
    from services.tools.outputs import FsAddArtifactOutput, parse_output

    added = parse_output(FsAddArtifactOutput, result.data)
    if added is None:
        return fail(f"{ADD_TOOL} returned an output this version does not read", EXIT_ERROR)
    artifact, created = added.artifact, added.created
    if args.json:
        print_json({**artifact, "created": created})
        return EXIT_OK
    state = "added" if created else "already in the registry (identical content)"
    line = f"{artifact['id']}  {artifact['name']}  {artifact['size_bytes']} bytes  {artifact['mime_type']}: {state}"
    out(line, single_line=True)
    return EXIT_OK


def _refused(result: Any) -> int:
    """The call's error in one line; 3 for a policy refusal, 2 for bad input, else 1."""
    from services.tools.results import ErrorType

    error = result.error
    if error is None:  # a tool that answered nothing: a bug, said as one line
        return fail(f"{ADD_TOOL} returned no result")
    fail(error.message)
    if error.details.get("rule") == "approval.no_approver":
        warn(f"{ADD_TOOL} needs approval; rerun with --approve to approve this call")
    if result.denied:
        return EXIT_DENIED
    return EXIT_USAGE if error.type is ErrorType.INVALID_INPUT else EXIT_ERROR


def cmd_artifact_list(args: argparse.Namespace) -> int:
    with open_session(args, need=NEED_WORKSPACE) as session:
        workspace = session.workspace
        artifacts = workspace.artifacts.list()
    if args.json:
        print_json([a.to_dict() for a in artifacts])
        return EXIT_OK
    if not artifacts:
        out(f"no artifacts in workspace {workspace.name}; add one with: aries -w {workspace.name} artifact add FILE")
        return EXIT_OK
    for a in artifacts:
        desc = f"  {a.description}" if a.description else ""
        line = f"{a.id}  {a.created_at[:19].replace('T', ' ')}  {a.size_bytes:>10}  {a.mime_type:<24} {a.name}{desc}"
        out(line, single_line=True)
    return EXIT_OK
