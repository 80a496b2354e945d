"""``aries -w W grants ...``: the workspace's lasting grants (``services.grants``).

    aries -w W grants [--json]
    aries -w W grants add TOOL PATTERN [--expires 7d] [--cwd DIR]
    aries -w W grants revoke ID

A pattern is the words the approval modal shows: argv tokens for a shell tool (``'ls *'``, ``'pytest
-q tests/a.py'``; a trailing ``*`` is one or more plain arguments), a path for a file tool (``docs/``
for a folder). Grants are the operator's: ``add`` refuses to run inside an Aries tool call.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from app.cli._common import EXIT_ERROR, EXIT_OK, fail, open_session, out, print_json, print_table

NEED = "grants belong to a named workspace: aries -w NAME grants ..."


def register(subparsers: Any) -> None:
    grants = subparsers.add_parser(
        "grants", help="list, add and revoke the workspace's lasting grants ('always in this workspace')"
    )
    grants.add_argument("--json", action="store_true", help="print the grants as JSON")
    sub = grants.add_subparsers(dest="grants_command", metavar="GRANTS_COMMAND")

    add = sub.add_parser("add", help="grant TOOL the argument PATTERN in this workspace, without asking")
    add.add_argument("tool_id", metavar="TOOL", help="e.g. builtin:shell:run or builtin:fs:write_text")
    add.add_argument("pattern", metavar="PATTERN", help="e.g. 'ls *', 'pytest -q tests/a.py' or 'docs/'")
    add.add_argument("--expires", metavar="DURATION", help="stop applying after 30m, 12h, 7d, 2w ...")
    add.add_argument("--cwd", metavar="DIR", help="the command's working directory (default: the first root)")
    add.set_defaults(func=handle_add)

    revoke = sub.add_parser("revoke", help="revoke grant ID (as `grants` lists it)")
    revoke.add_argument("grant_id", metavar="ID")
    revoke.set_defaults(func=handle_revoke)

    grants.set_defaults(func=handle_list)


def handle_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    try:
        with open_session(args, need=NEED) as session:
            grants = [g for g in session.gateway().grants() if g.get("scope") == "workspace"]
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    if args.json:
        print_json({"grants": grants})
        return EXIT_OK
    if not grants:
        out("No lasting grants in this workspace. Approve a call with 'w' (always), or: aries -w W grants add ...")
        return EXIT_OK
    rows = [
        (
            g["id"],
            g["tool_id"],
            g["pattern"],
            str(g["uses"]),
            _origin(g["origin"]),
            ("expired " if g["expired"] else "") + (g["expires_at"] or "never"),
        )
        for g in grants
    ]
    print_table(
        "lasting grants (revoke: aries -w W grants revoke ID)",
        ["ID", "TOOL", "PATTERN", "USES", "ORIGIN", "EXPIRES"],
        rows,
    )
    for grant in grants:
        if grant.get("runs_code_unasked"):
            out(f"{grant['id']}: runs code unasked: {grant['runs_code_unasked']}", single_line=True)
    return EXIT_OK


def _origin(origin: dict[str, Any]) -> str:
    text = f"{origin.get('by')} {origin.get('at')}"
    if origin.get("call_id"):
        text += f" call {origin['call_id']}"
    if origin.get("asked_by"):
        text += f" asked by {origin['asked_by']}"
    return text


def handle_add(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.grants.proposal import from_words
    from services.grants.store import TOOL_CALL_MARKER, describe, parse_expiry
    from services.settings.operator import GrantOrigin

    if os.environ.get(TOOL_CALL_MARKER):
        return fail("grants add refuses to run inside an Aries tool call: a model cannot grant itself anything")
    try:
        expires = parse_expiry(args.expires) if args.expires else None
        with open_session(args, need=NEED) as session:
            gateway = session.gateway()
            if gateway.lasting is None:
                return fail(NEED)
            spec = gateway.registry.get(args.tool_id)
            bound = gateway.bound
            pattern = from_words(
                args.tool_id,
                spec.session_keys,
                args.pattern,
                roots=bound.roots,
                resolve=bound.resolve_executable,
                cwd=args.cwd,
            )
            from services.clock import utc_now

            origin = GrantOrigin(by="cli", at=utc_now(), asked_by=os.environ.get("USER") or "operator")
            grant = gateway.lasting.add(args.tool_id, pattern, origin, expires=expires)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    shown = describe(grant)
    if args.json:
        print_json(shown)
    else:
        out(f"granted {shown['id']}: {shown['tool_id']} {shown['pattern']}", single_line=True)
    return EXIT_OK


def handle_revoke(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    try:
        with open_session(args, need=NEED) as session:
            revoked = session.gateway().revoke_grant(args.grant_id)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    if revoked is None:
        return fail(f"no grant {args.grant_id} in this workspace; `aries -w W grants` lists them")
    if args.json:
        print_json(revoked)
    else:
        out(f"revoked {args.grant_id}: {revoked['tool_id']} {revoked['pattern']}", single_line=True)
    return EXIT_OK
