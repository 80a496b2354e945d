"""``aries cloud status|forget``: the redacting cloud bridge's state and its kept replies.

    aries -w W cloud status [--json] [--calls N]   the bridge in force and its last calls
    aries -w W cloud forget [REQUEST_ID] [--json]  drop every kept cloud reply (the 'cloud'
                                                   index and its folder), or one of them

The bridge itself (sanitizer, allowlist, the call) is ``services.bridge``; the turn's cloud step is
``services.assistant.cloud``.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli._common import open_session, out, print_json, workspace_option

CLOUD_HELP = """\
The cloud bridge is off unless the active profile's 'cloud:' block or the workspace setting 'cloud'
turns it on (mode ask or auto, an OpenAI-compatible base_url, a model, api_key_env naming the
variable that holds the key). Every call is in the audit store's cloud_calls table: the request id,
time, mode, model, the SHA-256 of the redacted prompt and of the reply, the redaction counts —
never the text. Replies are kept in the transcript (tagged cloud) and in the 'cloud' index.
"""


def register(subparsers: Any) -> None:
    cloud = subparsers.add_parser(
        "cloud",
        help="the cloud bridge: its mode and last calls, and forgetting kept replies",
        description=CLOUD_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = cloud.add_subparsers(dest="cloud_command", metavar="COMMAND", required=True)
    status = sub.add_parser("status", help="the bridge in force and its last calls (hashes and counts only)")
    workspace_option(status)
    status.add_argument("--calls", type=int, default=10, metavar="N", help="last N cloud calls (default 10)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=handle_status)
    forget = sub.add_parser("forget", help="remove every kept cloud reply (or one) from the workspace and its index")
    workspace_option(forget)
    forget.add_argument("request_id", nargs="?", metavar="REQUEST_ID", help="only this reply (cloud-…)")
    forget.add_argument("--json", action="store_true", help="print JSON")
    forget.set_defaults(func=handle_forget)


def handle_status(args: argparse.Namespace) -> int:
    from services.pipe.headless import HeadlessApprover
    from services.pipe.status import cloud_status

    with open_session(args, approver=HeadlessApprover()) as session:
        report = cloud_status(session, max(1, args.calls))
    if args.json:
        print_json(report)
        return 0
    out(f"{report['describe']}  (from {report['source']})", single_line=True)
    if not report["recent"]:
        out("no cloud calls yet")
    for row in report["recent"]:
        counts = ", ".join(f"{k} {n}" for k, n in sorted((row.get("redactions") or {}).items())) or "none"
        line = f"  {row['ts']}  {row['request_id']}  {row['status']:<8} {row.get('model') or ''}  redacted: {counts}"
        if row.get("error"):
            line += f"  ({row['error']})"
        out(line, single_line=True)
    return 0


def handle_forget(args: argparse.Namespace) -> int:
    from services.bridge.merge import cloud_replies, forget_cloud, forget_reply
    from services.errors import NotFound
    from services.pipe.headless import HeadlessApprover

    with open_session(args, approver=HeadlessApprover()) as session:
        root = session.workspace.root
        engine = session.engine()
        if args.request_id:
            if args.request_id not in cloud_replies(root):
                raise NotFound(f"no kept cloud reply {args.request_id}; see: aries cloud status")
            forget_reply(engine, root, args.request_id)
            removed = 1
        else:
            removed = forget_cloud(engine, root)
    if args.json:
        print_json({"removed": removed, "request_id": args.request_id})
    else:
        noun = "reply" if removed == 1 else "replies"
        out(f"removed {removed} cloud {noun} and their index entries", single_line=True)
    return 0
