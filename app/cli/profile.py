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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from app.cli._common import EXIT_USAGE, fail, open_session, out, print_json, usage

if TYPE_CHECKING:
    from services.session.session import Session


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
    profile.set_defaults(func=usage(profile))


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[Session | None]:
    """The ``-w`` workspace's session; None without ``-w`` (then only the shipped profiles are known)."""
    if not args.workspace:
        yield None
        return
    with open_session(args) as session:
        yield session


def handle_list(args: argparse.Namespace) -> int:
    from services.profiles import list_profiles

    with _session(args) as session:
        active = session.workspace.profile if session is not None else None
        entries = list_profiles(session.workspace.root if session is not None else None)
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
        print_json({"active": active, "profiles": rows})
        return 0
    width = max((len(e.name) for e in entries), default=4)
    for entry in entries:
        mark = "*" if entry.name == active else " "
        text = f"BROKEN: {entry.error}" if entry.error else entry.description
        line = f"{mark} {entry.name.ljust(width)}  {entry.origin:<9}  {text}"
        out(line, single_line=True)
    return 0


def handle_show(args: argparse.Namespace) -> int:
    from services.profiles import profile_path

    try:
        with _session(args) as session:
            path, origin = profile_path(args.name, session.workspace.root if session is not None else None)
            text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return fail(f"{args.name}: cannot be read ({exc.strerror})")
    out(f"# {path} ({origin})", single_line=True)
    out(text, end="" if text.endswith("\n") else "\n")
    return 0


def handle_use(args: argparse.Namespace) -> int:
    if not args.workspace:
        return fail("profile use needs a workspace: aries -w NAME profile use PROFILE", EXIT_USAGE)
    with open_session(args) as session:
        profile = session.use_profile(args.name)
        mode = session.mode
        name = session.workspace.name
    tools = "every tool the policy enables" if profile.tools is None else ", ".join(sorted(profile.tools))
    out(f"workspace {name}: profile {profile.name} (tools: {tools}; approval mode {mode})", single_line=True)
    return 0
