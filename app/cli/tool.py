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
from typing import Any

from app.cli._common import (
    EXIT_DENIED,
    EXIT_ERROR,
    EXIT_OK,
    POLICY_HELP,
    err,
    fail,
    open_session,
    out,
    print_json,
    print_table,
    usage,
    warn,
)
from services.approval_mode import MODE_NAMES


def register(subparsers: Any) -> None:
    tool = subparsers.add_parser("tool", help="run and list governed tools (fs, shell, web)")
    tool_sub = tool.add_subparsers(dest="tool_command", metavar="TOOL_COMMAND")

    listing = tool_sub.add_parser("list", help="list the registered tools and whether the policy enables them")
    listing.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    listing.add_argument("--json", action="store_true", help="print the list as JSON (with the MCP servers' status)")
    listing.set_defaults(func=handle_list)

    call = tool_sub.add_parser("call", help="run one tool call through the policy gateway; prints the JSON result")
    call.add_argument("tool_id", metavar="TOOL_ID", help="e.g. builtin:fs:list_dir")
    call.add_argument("--args", dest="tool_args", metavar="JSON", default="{}", help="arguments as a JSON object")
    call.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    call.add_argument("--mode", choices=MODE_NAMES, help="override the approval mode")
    call.add_argument("--approve", action="store_true", help="approve this call if the policy asks for approval")
    call.set_defaults(func=handle_call)

    undo = tool_sub.add_parser(
        "undo",
        help="undo a write or patch call (default: the last one not yet undone) through builtin:fs:restore; "
        "refused, with the diff, if a file changed since",
    )
    undo.add_argument("call_id", metavar="CALL_ID", nargs="?", help="the call to undo (its audit id)")
    undo.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    undo.add_argument("--mode", choices=MODE_NAMES, help="override the approval mode")
    undo.add_argument("--approve", action="store_true", help="approve the restore if the policy asks for approval")
    undo.set_defaults(func=handle_undo)

    doctor = tool_sub.add_parser("doctor", help="self-check: tools registered, policy loads, gateway works")
    doctor.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    doctor.set_defaults(func=handle_doctor)

    tool.set_defaults(func=usage(tool))


def handle_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.tools.records import describe_tools

    try:
        with open_session(args, policy_file=args.policy) as session:
            policy = session.policy()
            gateway = session.gateway()
            failed = gateway.registry.load_all()  # starts the enabled MCP servers to list their tools
            tools = describe_tools(gateway.registry, policy)
            servers = [{**s, "error": failed.get(f"mcp:{s['name']}", s["error"])} for s in gateway.mcp_status()]
            if args.json:
                print_json(
                    {"policy": session.policy_source, "mode": session.mode, "tools": tools, "mcp_servers": servers}
                )
                return EXIT_OK
            _print_tools(session.policy_source, session.mode, tools, servers)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    return EXIT_OK


def _print_tools(policy: str, mode: str, tools: list[dict[str, Any]], servers: list[dict[str, Any]]) -> None:
    """The human form of ``tool list``: a table of the tools, then each MCP server's state."""
    rows = [
        (tool["id"], "yes" if tool["enabled"] else "no", str(tool.get("tier") or "-"), _first_sentence(tool))
        for tool in tools
    ]
    print_table(f"tools (policy: {policy}; mode: {mode})", ["TOOL", "ENABLED", "TIER", "WHAT IT DOES"], rows)
    for server in servers:
        error = f" ({server['error']})" if server.get("error") else ""
        out(f"mcp server {server['name']}: {server.get('state', '?')}{error}", single_line=True)


def _first_sentence(tool: dict[str, Any]) -> str:
    description = str(tool.get("description") or "")
    head, dot, _ = description.partition(". ")
    return head + dot.strip() if len(head) < 100 else head[:99] + "…"


def handle_call(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.tools.calls import approve_all

    try:
        tool_args = json.loads(args.tool_args)
    except ValueError as exc:
        return fail(f"--args is not valid JSON: {exc}")
    if not isinstance(tool_args, dict):
        return fail("--args must be a JSON object")
    approver = approve_all if args.approve else None
    try:
        with open_session(args, policy_file=args.policy, mode=args.mode, approver=approver) as session:
            session.policy()  # a broken policy in force is one clear line, not a denial of every call
            result = session.call_tool_sync(args.tool_id, tool_args)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    print_json(result.to_dict())
    if result.error is not None and result.error.details.get("rule") == "approval.no_approver":
        warn(f"{args.tool_id} needs approval; rerun with --approve to approve this call")
    if result.ok:
        return EXIT_OK
    return EXIT_DENIED if result.denied else EXIT_ERROR


def handle_undo(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.tools.calls import approve_all
    from services.tools.undo import RESTORE_ID, undo_arguments

    approver = approve_all if args.approve else None
    try:
        with open_session(args, policy_file=args.policy, mode=args.mode, approver=approver) as session:
            session.policy()
            restore_args = undo_arguments(session.gateway().audit, args.call_id)
            result = session.call_tool_sync(RESTORE_ID, restore_args)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    print_json(result.to_dict())
    if result.error is not None:
        err(f"aries: {result.error.message}")
        diff = result.error.details.get("diff")
        if isinstance(diff, str) and diff:
            err(diff, end="")
        if result.error.details.get("rule") == "approval.no_approver":
            warn("the restore needs approval; rerun with --approve to approve it")
    if result.ok:
        return EXIT_OK
    return EXIT_DENIED if result.denied else EXIT_ERROR


def handle_doctor(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    try:
        with open_session(args, policy_file=args.policy) as session:
            from services.tools.session_doctor import session_doctor

            report = session_doctor(session)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    print_json(report.to_dict())
    return EXIT_OK if report.ok else EXIT_ERROR
