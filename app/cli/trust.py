"""``aries workspace trust NAME``: review what an imported workspace's settings would put in force, and
trust them (see :mod:`services.trust`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli._common import out, print_json

TRUST_HELP = """\
A workspace imported from a bundle arrives untrusted: its policy, profiles and the settings that
start processes, open connections, widen access or change the approval mode are set aside, and the
workspace runs with Aries's defaults. This command shows what they would change and asks before
putting them in force. Trust is recorded (who, when, a fingerprint of what was trusted); a later
change made outside Aries (an editor, a sync tool) takes the settings out of force again until it is
reviewed here.
"""

GROUPS = (
    (0, "starts programs or opens connections"),
    (1, "widens what tools may touch, how calls are approved, or what the model is told"),
    (2, "other"),
)


def register_trust_command(ws_sub: Any) -> None:
    trust = ws_sub.add_parser(
        "trust",
        help="review an imported workspace's settings and put them in force",
        description=TRUST_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trust.add_argument("name")
    trust.add_argument("--yes", action="store_true", help="trust without asking (scripts)")
    trust.add_argument("--json", action="store_true", help="print the review as JSON (trusts only with --yes)")
    trust.set_defaults(func=cmd_trust)


def _lines(review: Any) -> list[str]:
    lines: list[str] = []
    for risk, title in GROUPS:
        group = [line.text for line in review.lines if line.risk == risk]
        if group:
            lines.append(f"  {title}:")
            lines += [f"    {text}" for text in group]
    return lines


def cmd_trust(args: argparse.Namespace) -> int:
    from services.errors import InvalidInput
    from services.trust.records import review_authority, trust, workspace_trust
    from services.trust.review import review
    from services.workspace.leases import acquire_lease
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager().open(args.name)
    state = workspace_trust(workspace.root)
    after, before = review_authority(workspace.root)
    result = review(after, before)
    if args.json and not args.yes:
        print_json(
            {
                "name": workspace.name,
                "status": state.status,
                "reason": state.reason,
                "lines": [{"risk": line.risk, "text": line.text} for line in result.lines],
                "added": result.added,
                "removed": result.removed,
                "trusted": False,
            }
        )
        return 0
    if not state.needs_review:
        out(f"workspace {workspace.name}: {state.reason}; nothing to review", single_line=True)
        return 0
    if not args.json:
        out(f"Workspace {workspace.name}: {state.reason}.", single_line=True)
        if result.first and result.lines:
            out("Trusting it puts these settings in force (now: Aries's defaults):")
            for line in _lines(result):
                out(line, single_line=True)
        elif result.first:
            out("Its settings change nothing beyond Aries's defaults.")
        else:
            out("Since it was last trusted:")
            for text in result.added:
                out(f"  + {text}", single_line=True)
            for text in result.removed:
                out(f"  - {text}", single_line=True)
            if not result.added and not result.removed:
                out("  (nothing that changes what runs or what tools may touch)")
    if not args.yes:
        if not sys.stdin.isatty():
            raise InvalidInput(
                f"not trusted: answer at a terminal, or run with --yes (aries workspace trust {args.name} --yes)"
            )
        out(f"Trust workspace {workspace.name}? [y/N] ", end="")
        sys.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            out(f"workspace {workspace.name} stays untrusted; nothing changed")
            return 1
    lease = acquire_lease(workspace, purpose="trust")  # never under a live Aries (use /trust there)
    try:
        report = trust(workspace.root)
    finally:
        lease.release()
    if args.json:
        print_json(
            {
                "name": workspace.name,
                "status": "trusted",
                "lines": [{"risk": line.risk, "text": line.text} for line in result.lines],
                "trusted": True,
                "trusted_by": report.trusted_by,
                "trusted_at": report.trusted_at,
                "fingerprint": report.fingerprint,
            }
        )
        return 0
    restored = f": {'; '.join(report.restored)} now in force" if report.restored else ""
    out(f"workspace {workspace.name} trusted by {report.trusted_by}{restored}", single_line=True)
    out(f"fingerprint sha256:{report.fingerprint[:16]}… (a change made outside Aries is caught)")
    return 0
