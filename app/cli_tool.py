"""``aries tool ...``: governed tool calls from the command line.

    aries [-w NAME] tool list [--policy FILE]
    aries [-w NAME] tool call TOOL_ID --args JSON [--policy FILE] [--mode MODE] [--approve]
    aries [-w NAME] tool undo [CALL_ID] [--policy FILE] [--mode MODE] [--approve]
    aries [-w NAME] tool doctor

Calls go through the same policy gateway as the TUI and are recorded in the workspace's
audit store (an ephemeral workspace without ``-w``).  A call the policy wants approved is
denied unless ``--approve`` is given.  Exit codes: 0 ok, 3 policy denial, 1 other errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_DENIED = 3
POLICY_HELP = "policy YAML (default: the workspace's policy.yaml, else the shipped safe policy)"


def register(subparsers: Any) -> None:
    tool = subparsers.add_parser("tool", help="run and list governed tools (fs, shell, web)")
    tool_sub = tool.add_subparsers(dest="tool_command", metavar="TOOL_COMMAND")

    listing = tool_sub.add_parser("list", help="list the registered tools and whether the policy enables them")
    listing.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    listing.set_defaults(func=handle_list)

    call = tool_sub.add_parser("call", help="run one tool call through the policy gateway; prints the JSON result")
    call.add_argument("tool_id", metavar="TOOL_ID", help="e.g. builtin:fs:list_dir")
    call.add_argument("--args", dest="tool_args", metavar="JSON", default="{}", help="arguments as a JSON object")
    call.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    call.add_argument("--mode", choices=("guide", "commander", "strict"), help="override the approval mode")
    call.add_argument("--approve", action="store_true", help="approve this call if the policy asks for approval")
    call.set_defaults(func=handle_call)

    undo = tool_sub.add_parser(
        "undo",
        help="undo a write or patch call (default: the last one not yet undone) through builtin:fs:restore; "
        "refused, with the diff, if a file changed since",
    )
    undo.add_argument("call_id", metavar="CALL_ID", nargs="?", help="the call to undo (its audit id)")
    undo.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    undo.add_argument("--mode", choices=("guide", "commander", "strict"), help="override the approval mode")
    undo.add_argument("--approve", action="store_true", help="approve the restore if the policy asks for approval")
    undo.set_defaults(func=handle_undo)

    doctor = tool_sub.add_parser("doctor", help="self-check: tools registered, policy loads, gateway works")
    doctor.add_argument("--policy", metavar="FILE")
    doctor.set_defaults(func=handle_doctor)

    tool.set_defaults(func=lambda args: (tool.print_help(sys.stderr), 2)[1])


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _error(message: str) -> int:
    sys.stderr.write(f"aries: {message}\n")
    return EXIT_ERROR


def _session(args: argparse.Namespace, **kwargs: Any) -> Any:
    """The same session core the TUI uses: the workspace's policy.yaml, approval mode and stores."""
    from services.session import Session
    from services.workspaces import WorkspaceManager, ephemeral_workspace

    name = getattr(args, "workspace", None)
    workspace = WorkspaceManager().open(name)[0] if name else ephemeral_workspace()
    try:
        return Session(workspace, source="cli", policy_file=getattr(args, "policy", None), interactive=False, **kwargs)
    except BaseException:
        workspace.close()
        raise


def _close(session: Any) -> None:
    try:
        session.close()
    finally:
        session.workspace.close()


def handle_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.tools.gateway import describe_tools

    try:
        session = _session(args)
    except AriesError as exc:
        return _error(exc.message)
    try:
        policy = session.policy()
        gateway = session.gateway()
        failed = gateway.registry.load_all()  # starts the enabled MCP servers to list their tools
        out = describe_tools(gateway.registry, policy)
        servers = [{**s, "error": failed.get(f"mcp:{s['name']}", s["error"])} for s in gateway.mcp_status()]
        _emit({"policy": session.policy_source, "mode": session.mode, "tools": out, "mcp_servers": servers})
    except AriesError as exc:
        return _error(exc.message)
    finally:
        _close(session)
    return EXIT_OK


def handle_call(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.tools.gateway import approve_all

    try:
        tool_args = json.loads(args.tool_args)
    except ValueError as exc:
        return _error(f"--args is not valid JSON: {exc}")
    if not isinstance(tool_args, dict):
        return _error("--args must be a JSON object")
    try:
        session = _session(args, mode=args.mode, approver=approve_all if args.approve else None)
    except AriesError as exc:
        return _error(exc.message)
    try:
        session.policy()  # a broken policy in force is one clear line, not a denial of every call
        result = session.call_tool_sync(args.tool_id, tool_args)
    except AriesError as exc:
        return _error(exc.message)
    finally:
        _close(session)
    _emit(result.to_dict())
    if result.error is not None and result.error.details.get("rule") == "approval.no_approver":
        sys.stderr.write(f"aries: {args.tool_id} needs approval; rerun with --approve to approve this call\n")
    if result.ok:
        return EXIT_OK
    return EXIT_DENIED if result.denied else EXIT_ERROR


def handle_undo(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.textsafe import neutralize
    from services.tools.gateway import approve_all
    from services.tools.undo import RESTORE_ID, undo_arguments

    try:
        session = _session(args, mode=args.mode, approver=approve_all if args.approve else None)
    except AriesError as exc:
        return _error(exc.message)
    try:
        session.policy()
        restore_args = undo_arguments(session.gateway().audit, args.call_id)
        result = session.call_tool_sync(RESTORE_ID, restore_args)
    except AriesError as exc:
        return _error(exc.message)
    finally:
        _close(session)
    _emit(result.to_dict())
    if result.error is not None:
        sys.stderr.write(f"aries: {neutralize(result.error.message)}\n")
        diff = result.error.details.get("diff")
        if isinstance(diff, str) and diff:
            sys.stderr.write(neutralize(diff))
        if result.error.details.get("rule") == "approval.no_approver":
            sys.stderr.write("aries: the restore needs approval; rerun with --approve to approve it\n")
    if result.ok:
        return EXIT_OK
    return EXIT_DENIED if result.denied else EXIT_ERROR


def handle_doctor(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    try:
        session = _session(args)
    except AriesError as exc:
        return _error(exc.message)
    try:
        report = session.doctor()
    finally:
        _close(session)
    _emit(report.to_dict())
    return EXIT_OK if report.ok else EXIT_ERROR
