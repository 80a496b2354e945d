"""``aries profile …``: prompt profiles from the command line.

    aries [-w NAME] profile list [--json]     names, descriptions, where each comes from; broken ones
                                             marked with their error ("*" marks the workspace's)
    aries [-w NAME] profile show PROFILE      the profile's YAML as written
    aries -w NAME profile use PROFILE         make it the workspace's profile (audited, persisted)

Without ``-w`` only the shipped profiles are known. Exit 0 on success, 2 for a profile that does
not exist or cannot be loaded (one line on stderr), 1 for other failures.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(subparsers: Any) -> None:
    profile = subparsers.add_parser("profile", help="list, show and choose prompt profiles")
    sub = profile.add_subparsers(dest="profile_command", metavar="PROFILE_COMMAND")
    listing = sub.add_parser("list", help="every profile, broken ones marked with their error")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=handle_list)
    show = sub.add_parser("show", help="print a profile's YAML")
    show.add_argument("name", metavar="PROFILE")
    show.set_defaults(func=handle_show)
    use = sub.add_parser("use", help="make PROFILE the workspace's profile (needs -w)")
    use.add_argument("name", metavar="PROFILE")
    use.set_defaults(func=handle_use)
    profile.set_defaults(func=lambda args: (profile.print_help(sys.stderr), 2)[1])


def _error(exc: Any) -> int:
    sys.stderr.write(f"aries: {exc.message}\n")
    return int(exc.exit_code)


def _workspace(args: argparse.Namespace) -> Any:
    if not args.workspace:
        return None
    from services.workspaces import WorkspaceManager

    return WorkspaceManager().open(args.workspace)[0]


def handle_list(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.profiles import list_profiles
    from services.textsafe import neutralize

    try:
        workspace = _workspace(args)
    except AriesError as exc:
        return _error(exc)
    active = workspace.profile if workspace is not None else None
    entries = list_profiles(workspace.root if workspace is not None else None)
    if args.json:
        rows = [
            {
                "name": e.name,
                "description": e.description,
                "origin": e.origin,
                "path": str(e.path),
                "active": e.name == active,
                "error": e.error,
            }
            for e in entries
        ]
        sys.stdout.write(json.dumps({"active": active, "profiles": rows}, indent=2, ensure_ascii=False) + "\n")
        return 0
    width = max((len(e.name) for e in entries), default=4)
    for entry in entries:
        mark = "*" if entry.name == active else " "
        text = f"BROKEN: {entry.error}" if entry.error else entry.description
        line = f"{mark} {entry.name.ljust(width)}  {entry.origin:<9}  {text}"
        sys.stdout.write(neutralize(line, single_line=True) + "\n")
    return 0


def handle_show(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.profiles import profile_path
    from services.textsafe import neutralize

    try:
        workspace = _workspace(args)
        path, origin = profile_path(args.name, workspace.root if workspace is not None else None)
        text = path.read_text(encoding="utf-8", errors="replace")
    except AriesError as exc:
        return _error(exc)
    except OSError as exc:
        sys.stderr.write(f"aries: {args.name}: cannot be read ({exc.strerror})\n")
        return 1
    sys.stdout.write(f"# {path} ({origin})\n{neutralize(text)}")
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    return 0


def handle_use(args: argparse.Namespace) -> int:
    from services.errors import AriesError
    from services.session import Session

    if not args.workspace:
        sys.stderr.write("aries: profile use needs a workspace: aries -w NAME profile use PROFILE\n")
        return 2
    try:
        workspace = _workspace(args)
    except AriesError as exc:
        return _error(exc)
    try:
        with Session(workspace, source="cli", interactive=False) as session:
            profile = session.use_profile(args.name)
            mode = session.mode
    except AriesError as exc:
        return _error(exc)
    finally:
        workspace.close()
    tools = "every tool the policy enables" if profile.tools is None else ", ".join(sorted(profile.tools))
    sys.stdout.write(f"workspace {workspace.name}: profile {profile.name} (tools: {tools}; approval mode {mode})\n")
    return 0
