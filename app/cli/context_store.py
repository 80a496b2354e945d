"""``aries context add|ls|read|export|import|reconcile|evidence|session`` (over ``services.context.service``).

Commands that write open the service and reconcile first (stale staging, pending commits, jobs left
running), then do their work and, unless ``--no-wait``, run the queue before returning — so after
``aries context add`` the tiers exist and the content is indexed, and after ``session commit`` the
memories are searchable.  Typed errors: one line on stderr, the error's exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli._common import err, open_session, out, print_json, progress, safe, workspace_option

if TYPE_CHECKING:
    from services.context.service import ContextService


@contextmanager
def _service(args: argparse.Namespace, *, write: bool = False, approver: Any = None) -> Iterator[ContextService]:
    """The context service over the command's session (its engine; URL fetches through its gateway)."""
    from services.context.service import ContextService

    ephemeral = "no workspace given (-w NAME): using an ephemeral workspace; nothing will persist"
    with open_session(args, announce=ephemeral, approver=approver) as session:
        service = ContextService(session.workspace, approver=approver, session=session)
        try:
            if write:
                service.reconcile(full=False)
            yield service
        finally:
            service.close()


def _uri(text: str) -> Any:
    from services.context.uri import parse_uri

    return parse_uri(text)


def _drain(service: ContextService, args: argparse.Namespace) -> dict[str, Any] | None:
    if getattr(args, "no_wait", False):
        return None
    quiet = getattr(args, "json", False)

    shown = not quiet and sys.stderr.isatty()

    def step(stage: str, done: int, total: int) -> None:
        if shown:
            progress(f"{stage} {done}/{total}")

    report = service.process_queue(progress=step).to_dict()
    if shown:
        err("")
    return report


# -- add, ls, read ---------------------------------------------------------------------------------
def handle_add(args: argparse.Namespace) -> int:
    approver = None
    if args.approve:
        from services.tools.calls import approve_all

        approver = approve_all
    to = _uri(args.to) if args.to else None
    with _service(args, write=True, approver=approver) as service:
        report = service.add(args.source, to, replace=args.replace)
        queue = _drain(service, args)
    data = report.to_dict()
    data["queue"] = queue
    if args.json:
        print_json(data)
    else:
        out(f"added {safe(report.uri, single_line=True)}: {len(report.files)} file(s), {report.bytes} bytes")
        for path, reason in report.skipped:
            out(f"  skipped {safe(path, single_line=True)}: {safe(reason, single_line=True)}")
        if queue is None:
            out(f"queued: {', '.join(report.jobs)} (run `aries context reconcile` or a later command to process)")
        else:
            out(f"processed {len(queue['processed'])} job(s); {queue['remaining']} left")
    return 3 if queue is not None and queue["failed"] else 0


def handle_ls(args: argparse.Namespace) -> int:
    uri = _uri(args.uri)
    with _service(args) as service:
        entries = service.ls(uri, hidden=args.all)
    if args.json:
        print_json([{"uri": str(e.uri), "name": e.name, "kind": e.kind, "size": e.size} for e in entries])
        return 0
    for entry in entries:
        suffix = "/" if entry.kind == "dir" else ""
        size = "" if entry.kind == "dir" else f"  {entry.size}"
        out(f"{safe(entry.name, single_line=True)}{suffix}{size}")
    return 0


def handle_read(args: argparse.Namespace) -> int:
    uri = _uri(args.uri)
    with _service(args) as service:
        text = service.read(uri, args.tier)
    out(text, end="" if not text or text.endswith("\n") else "\n")
    return 0


# -- packages --------------------------------------------------------------------------------------
def handle_export(args: argparse.Namespace) -> int:
    from services.context.packages import describe

    with _service(args) as service:
        report = service.export(_uri(args.uri), Path(args.path), overwrite=args.overwrite)
    data = describe(report)
    if args.json:
        print_json(data)
    else:
        out(f"exported {safe(args.uri, single_line=True)}: {report.files} file(s), {report.bytes} bytes")
    return 0


def handle_import(args: argparse.Namespace) -> int:
    from services.context.packages import describe

    with _service(args, write=True) as service:
        report, jobs = service.import_package(
            Path(args.path), _uri(args.to), force=args.force, vectorize=args.vectorize
        )
        queue = _drain(service, args)
    # A context package holds files of the axiom:// tree only (documents, memories): data. Nothing in it
    # can start a process, open a connection or widen access, so nothing is quarantined (services.trust).
    data = {**describe(report), "jobs": jobs, "queue": queue, "quarantined": []}
    if args.json:
        print_json(data)
    else:
        out(f"imported into {safe(args.to, single_line=True)}: {report.files} file(s), {report.bytes} bytes")
        out("nothing quarantined: a context package carries documents and memories only (data, no settings)")
    return 0


# -- reconcile, evidence ---------------------------------------------------------------------------
def handle_reconcile(args: argparse.Namespace) -> int:
    with _service(args) as service:
        report = service.reconcile()
    data = report.to_dict()
    if args.json:
        print_json(data)
    else:
        for key in ("staging_removed", "package_staging_removed", "commits_recovered", "jobs_rerun", "tiers_changed"):
            out(f"{key.replace('_', ' ')}: {len(data[key])}")
        out(f"jobs processed: {data['jobs_processed']}; queue remaining: {data['queue_remaining']}")
        out("consistent" if report.consistent else "NOT consistent: see the failed jobs with --json")
    return 0 if report.consistent else 3


def handle_evidence(args: argparse.Namespace) -> int:
    from services.context.evidence import write_evidence

    with _service(args) as service:
        paths = write_evidence(service, Path(args.out))
    for path in paths:
        out(path, single_line=True)
    return 0


# -- sessions --------------------------------------------------------------------------------------
def handle_session_new(args: argparse.Namespace) -> int:
    with _service(args, write=True) as service:
        session = service.session_new(args.id)
    out(session.session_id)
    return 0


def handle_session_append(args: argparse.Namespace) -> int:
    with _service(args, write=True) as service:
        count = service.session_append(args.session, Path(args.file))
    out(f"appended {count} message(s) to {safe(args.session, single_line=True)}")
    return 0


def _extractor(args: argparse.Namespace) -> Any:
    if args.model is None:
        return None
    from services.context.memory import model_extractor
    from services.errors import ConfigError
    from services.models.config import make_provider, resolve_model

    env = dict(os.environ)
    if args.model:
        env["ARIES_MODEL"] = args.model
    config = resolve_model(None, env)
    if config.provider == "offline":
        raise ConfigError("--model: no model is configured (set ARIES_MODEL or give --model provider:model)")
    return model_extractor(make_provider(config), token_budget=args.token_budget)


def handle_session_commit(args: argparse.Namespace) -> int:
    extractor = _extractor(args)
    with _service(args, write=True) as service:
        report = service.session_commit(args.session, extractor)
        queue = _drain(service, args)
    root = service.tree.root
    written = sorted("axiom://" + Path(p).relative_to(root).as_posix() for p in report.written)
    data = {
        "session_id": report.session_id,
        "archived": report.archived,
        "history": report.history.relative_to(root).as_posix() if report.history else None,
        "memories": [{"category": m.category, "scope": m.scope, "text": m.text} for m in report.memories],
        "written": written,
        "queue": queue,
    }
    if args.json:
        print_json(data)
    else:
        out(f"committed {report.archived} message(s); {len(report.memories)} memory(ies)")
        for uri in written:
            out(f"  {uri}", single_line=True)
    return 0


def register_store_commands(sub: Any) -> None:
    """Add the store-side sub-commands to the ``context`` parser's sub-parsers."""
    add = sub.add_parser("add", help="add a file, folder or http(s) URL (staged in axiom://temp, then moved)")
    add.add_argument("source", metavar="PATH|URL")
    add.add_argument("--to", metavar="URI", help="destination (default: axiom://resources/<name>)")
    add.add_argument("--replace", action="store_true", help="replace an existing destination")
    add.add_argument("--no-wait", action="store_true", help="queue the tiers/index jobs and return")
    add.add_argument("--approve", action="store_true", help="approve the URL fetch if the policy asks for approval")
    add.add_argument("--json", action="store_true")
    add.set_defaults(func=handle_add)

    log = sub.add_parser("log", help="the request log: one row per context operation and find/search")
    log.add_argument("-n", type=int, default=20, metavar="N", help="how many rows, newest first (default 20)")
    log.add_argument("--json", action="store_true")
    log.set_defaults(func=handle_log)

    ls = sub.add_parser("ls", help="list a folder of the context tree")
    ls.add_argument("uri", nargs="?", default="axiom://resources", metavar="URI")
    ls.add_argument("--all", action="store_true", help="also the names beginning with '.' (tier files)")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=handle_ls)

    read = sub.add_parser("read", help="print a file (L2), or a folder's L0/L1 tier")
    read.add_argument("uri", metavar="URI")
    read.add_argument("--tier", choices=("L0", "L1", "L2"))
    read.set_defaults(func=handle_read)

    export = sub.add_parser("export", help="write a folder of the tree to a package file")
    export.add_argument("uri", metavar="URI")
    export.add_argument("path", metavar="PATH")
    export.add_argument("--overwrite", action="store_true")
    export.add_argument("--json", action="store_true")
    export.set_defaults(func=handle_export)

    imp = sub.add_parser("import", help="unpack a package into the tree (checked whole first)")
    imp.add_argument("path", metavar="PATH")
    imp.add_argument("--to", required=True, metavar="URI")
    imp.add_argument("--force", action="store_true", help="replace a destination that holds something")
    imp.add_argument("--vectorize", action="store_true", help="also index the imported files")
    imp.add_argument("--no-wait", action="store_true")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(func=handle_import)

    rec = sub.add_parser("reconcile", help="bring staging, queue, tiers and index back to a consistent state")
    rec.add_argument("--json", action="store_true")
    rec.set_defaults(func=handle_reconcile)

    evidence = sub.add_parser("evidence", help="write operability, reliability and security reports (Markdown)")
    evidence.add_argument("--out", default="evidence", metavar="DIR")
    evidence.set_defaults(func=handle_evidence)

    session = sub.add_parser("session", help="context sessions: new, append, commit")
    ssub = session.add_subparsers(dest="session_command", metavar="COMMAND", required=True)
    new = ssub.add_parser("new", help="create a session (prints its id)")
    new.add_argument("id", nargs="?", metavar="ID")
    new.set_defaults(func=handle_session_new)
    append = ssub.add_parser("append", help="append the messages of a JSONL file")
    append.add_argument("session", metavar="SESSION")
    append.add_argument("file", metavar="FILE.jsonl")
    append.set_defaults(func=handle_session_append)
    commit = ssub.add_parser("commit", help="archive the messages and extract memories")
    commit.add_argument("session", metavar="SESSION")
    commit.add_argument("--model", nargs="?", const="", default=None, metavar="PROVIDER:MODEL")
    commit.add_argument("--token-budget", type=int, default=4000)
    commit.add_argument("--no-wait", action="store_true")
    commit.add_argument("--json", action="store_true")
    commit.set_defaults(func=handle_session_commit)

    for parser in (add, ls, read, export, imp, rec, evidence, session, new, append, commit, log):
        workspace_option(parser)


def handle_log(args: argparse.Namespace) -> int:
    """The newest request-log rows: operation, target, duration, outcome, counts, trace id."""
    with _service(args) as service:
        rows = service.requests.recent(max(0, args.n))
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        out("no requests logged yet")
        return 0
    out(f"{'when':<27}  {'operation':<15}  {'ms':>8}  {'outcome':<18}  target")
    for row in rows:
        counts = " ".join(f"{k}={v}" for k, v in sorted(row["counts"].items()))
        trace = f" trace={row['trace_id']}" if row["trace_id"] else ""
        out(
            f"{row['ts']:<27}  {row['operation']:<15}  {row['duration_ms']:>8.1f}  {row['outcome']:<18}  "
            f"{safe(row['target'] or '-', single_line=True)}  {counts}{trace}"
        )
    return 0
