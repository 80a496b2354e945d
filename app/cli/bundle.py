"""``aries workspace export NAME PATH`` and ``aries workspace import BUNDLE`` (see services.bundles)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli._common import open_session, out, print_json, progress

BUNDLE_HELP = """\
A bundle is one .tar.zst file: the workspace's transcripts, artifacts, indexes, settings and
policy, and a manifest with every file's size and SHA-256. The same workspace always exports to
the same bytes. Import checks every member against the manifest while it streams into a staging
folder and makes the workspace appear only when all of it checks out; a refusal leaves nothing.

Caps on import (a bundle over them is refused before its bytes are written): 200,000 files,
8 GiB per file, 64 GiB in all, the free disk space, a 5000:1 expansion ratio past 256 MiB, and a
128 MiB zstd window.
"""


def register_bundle_commands(ws_sub: Any) -> None:
    exp = ws_sub.add_parser(
        "export",
        help="write a workspace to one .tar.zst bundle",
        description=BUNDLE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    exp.add_argument("name")
    exp.add_argument("path", type=Path, help="the bundle file, or a folder (gets NAME.aries.tar.zst)")
    exp.add_argument("--sign", type=Path, metavar="KEY", help="sign the manifest with this ed25519 private key (PEM)")
    exp.add_argument("--force", action="store_true", help="replace the bundle file if it exists")
    exp.add_argument("--json", action="store_true", help="print the result as JSON")
    exp.set_defaults(func=cmd_export)

    imp = ws_sub.add_parser(
        "import",
        help="create a workspace from a bundle (checked as it streams; nothing is left on refusal)",
        description=BUNDLE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("bundle", type=Path)
    imp.add_argument("--name", help="import under this name (default: the name it was exported under)")
    imp.add_argument("--force", action="store_true", help="replace a workspace of that name (never one that is open)")
    imp.add_argument("--verify", type=Path, metavar="KEY", help="check the signature with this ed25519 public key")
    imp.add_argument("--require-signature", action="store_true", help="refuse a bundle that is not signed")
    imp.add_argument("--json", action="store_true", help="print the result as JSON")
    imp.set_defaults(func=cmd_import)


class _Progress:
    """A one-line progress report on stderr for bundles over 64 MiB (nothing for small ones)."""

    def __init__(self, verb: str, quiet: bool) -> None:
        self.verb = verb
        self.quiet = quiet or not sys.stderr.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int, path: str) -> None:
        if self.quiet or total < (64 << 20):
            return
        percent = int(100 * done / total) if total else 100
        if percent != self.shown:
            self.shown = percent
            progress(f"{self.verb}: {percent:3d}%  ({done >> 20} of {total >> 20} MiB)", done=done >= total)


def _key(given: Path | None, variable: str) -> Path | None:
    """A key path from the flag, else from the environment (the configured key)."""
    import os

    if given is not None:
        return given
    value = os.environ.get(variable, "").strip()
    return Path(value) if value else None


def cmd_export(args: argparse.Namespace) -> int:
    from app import __version__
    from services.bundles.export import export_workspace
    from services.workspace.leases import acquire_lease

    with open_session(args, name=args.name) as session:
        lease = acquire_lease(session.workspace, purpose="export")  # nothing writes the workspace meanwhile
        try:
            report = export_workspace(
                session.workspace,
                args.path,
                aries_version=__version__,
                signing_key=_key(args.sign, "ARIES_BUNDLE_SIGNING_KEY"),
                overwrite=args.force,
                progress=_Progress("exporting", args.json),
            )
        finally:
            lease.release()
    if args.json:
        print_json(vars(report))
        return 0
    signed = ", signed" if report.signed else ""
    out(f"exported workspace {args.name}: {report.files} files to {report.path} ({report.bytes} bytes{signed})")
    out(f"sha256 {report.sha256}")
    for item in report.skipped:
        out(f"  left out: {item}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import os

    from services.bundles.importer import import_bundle, rebuild_indexes
    from services.workspace.manager import WorkspaceManager

    report = import_bundle(
        args.bundle,
        WorkspaceManager(),
        name=args.name,
        force=args.force,
        verify_key=_key(args.verify, "ARIES_BUNDLE_VERIFY_KEY"),
        require_signature=args.require_signature or os.environ.get("ARIES_BUNDLE_REQUIRE_SIGNATURE", "") == "1",
        progress=_Progress("importing", args.json),
    )
    failed = rebuild_indexes(WorkspaceManager(), report, None if args.json else _say_rebuild)
    if args.json:
        print_json({**vars(report), "rebuild_failed": failed})
        return 0
    how = "replaced" if report.replaced else "created"
    source = report.source.get("name", "?")
    signed = "; signature checked" if report.signed else ""
    out(f"workspace {report.name} {how} from {args.bundle} (exported from {source}): {report.files} files{signed}")
    if report.quarantined:
        out(
            f"quarantined until you trust it (aries workspace trust {report.name}): " + "; ".join(report.quarantined),
            single_line=True,
        )
    for index, reason in sorted(failed.items()):
        out(f"index {index}: vectors not rebuilt ({reason}); run: aries -w {report.name} rag index repair {index}")
    for line in report.unreadable:
        out(line, single_line=True)
    out(f"open it with: aries -w {report.name}")
    return 0


def _say_rebuild(index: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        progress(f"rebuilding index {index}: {done}/{total} chunks", done=done >= total)
