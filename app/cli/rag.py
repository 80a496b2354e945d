"""``aries rag …`` and ``aries eval rag …``: retrieval from the command line.

    aries [-w NAME] rag index add PATH [--name INDEX] [--wait SECONDS] [--json]    (exit 3: some files not indexed)
    aries [-w NAME] rag index list [--json]
    aries [-w NAME] rag index check INDEX [--json]
    aries [-w NAME] rag index use INDEX
    aries [-w NAME] rag index drop INDEX
    aries [-w NAME] rag index repair INDEX [--json]
    aries -w NAME rag index watch INDEX [--json]      (foreground; Ctrl+C stops: see rag_watch)
    aries [-w NAME] rag query TEXT [-k N] [--index INDEX] [--json]
    aries [-w NAME] rag show HANDLE [--json]
    aries [-w NAME] rag last [--json]
    aries eval rag --dataset DIR [--queries FILE] [--qrels FILE] [--limit-docs N] [--cache DIR] [--json]
                   [--gate-profile NAME] [--run-file FILE]   (exit 1: strict embedder failure or gate failed)

Without ``-w`` the commands run in an ephemeral workspace and say so: nothing persists.
Settings come from the ``AXIOMME_*`` environment (see ``services.retrieval.settings``).
Heavy libraries are imported inside the handlers only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.cli import rag_watch
from app.cli._common import EXIT_INTERRUPTED, console, err, open_session, out, print_json, progress, safe, usage, warn

if TYPE_CHECKING:
    from services.retrieval import RetrievalEngine
    from services.retrieval.models import IndexInfo, IngestReport, ProgressEvent

T = TypeVar("T")


def register(subparsers: Any) -> None:
    rag = subparsers.add_parser("rag", help="index documents and run inspectable hybrid retrieval")
    rag_sub = rag.add_subparsers(dest="rag_command", metavar="RAG_COMMAND")

    _add_index_commands(rag_sub)

    query = rag_sub.add_parser("query", help="hybrid BM25 + dense search of the active index")
    query.add_argument("text", metavar="TEXT", nargs="+")
    query.add_argument("-k", type=int, default=10, metavar="N", help="number of results (default 10)")
    query.add_argument("--index", metavar="INDEX", help="search this index instead of the active one")
    query.add_argument("--json", action="store_true")
    query.set_defaults(func=handle_query)

    show = rag_sub.add_parser("show", help="full text and metadata of a chunk by citation handle")
    show.add_argument("handle", metavar="HANDLE", help="<index>:<chunk_id>")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=handle_show)

    last = rag_sub.add_parser("last", help="the last retrieval of this workspace (from the audit log)")
    last.add_argument("--json", action="store_true")
    last.set_defaults(func=handle_last)
    rag.set_defaults(func=usage(rag))

    _add_eval_commands(subparsers)


def _add_index_commands(rag_sub: Any) -> None:
    """``rag index add|check|list|use|drop|repair|rebuild|watch``."""
    index = rag_sub.add_parser("index", help="add, list, select and drop indexes")
    index_sub = index.add_subparsers(dest="index_command", metavar="INDEX_COMMAND")
    add = index_sub.add_parser("add", help="index a file or folder (recursive, incremental)")
    add.add_argument("path", metavar="PATH")
    add.add_argument("--name", metavar="INDEX", help="index name (default: the folder or file name)")
    add.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="while another Aries writes the same index, wait this long for it (default 600), then give up; "
        "one writer per index at a time, queries are never blocked",
    )
    add.add_argument("--json", action="store_true", help="print the ingest report as JSON")
    add.set_defaults(func=handle_index_add)
    check = index_sub.add_parser(
        "check", help="compare an index's manifest, keyword (Tantivy) and vector (Chroma) stores chunk by chunk"
    )
    check.add_argument("name", metavar="INDEX")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=handle_index_check)
    listing = index_sub.add_parser("list", help="list the workspace's indexes")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=handle_index_list)
    use = index_sub.add_parser("use", help="make an index the active one")
    use.add_argument("name", metavar="INDEX")
    use.set_defaults(func=handle_index_use)
    drop = index_sub.add_parser("drop", help="delete an index")
    drop.add_argument("name", metavar="INDEX")
    drop.set_defaults(func=handle_index_drop)
    repair = index_sub.add_parser(
        "repair", help="rebuild a damaged or missing vector store from the index's stored chunks"
    )
    repair.add_argument("name", metavar="INDEX")
    repair.add_argument("--json", action="store_true")
    repair.set_defaults(func=handle_index_repair)
    rebuild = index_sub.add_parser(
        "rebuild",
        help="build an index again from its folders (or --from FOLDER): the way out when its manifest is damaged",
    )
    rebuild.add_argument("name", metavar="INDEX")
    rebuild.add_argument(
        "--from", dest="folders", action="append", metavar="FOLDER", help="read this folder (repeat for several)"
    )
    rebuild.add_argument("--json", action="store_true")
    rebuild.set_defaults(func=handle_index_rebuild)
    rag_watch.register(index_sub)
    index.set_defaults(func=usage(index))


def _add_eval_commands(subparsers: Any) -> None:
    """``eval rag``: retrieval quality on a BEIR-format collection."""
    evaluate = subparsers.add_parser("eval", help="quality harnesses")
    eval_sub = evaluate.add_subparsers(dest="eval_command", metavar="EVAL_COMMAND")
    rag_eval = eval_sub.add_parser("rag", help="retrieval quality on a BEIR-format collection")
    rag_eval.add_argument(
        "--dataset", metavar="DIR", required=True, help="folder with corpus.jsonl, queries.jsonl, qrels.tsv"
    )
    rag_eval.add_argument("--queries", metavar="FILE", help="queries JSONL (default: DIR/queries.jsonl)")
    rag_eval.add_argument("--qrels", metavar="FILE", help="judgements TSV (default: DIR/qrels.tsv)")
    rag_eval.add_argument("--limit-docs", type=int, metavar="N", help="deterministic subset of N documents")
    rag_eval.add_argument("--cache", metavar="DIR", help="index cache folder (default: $ARIES_HOME/cache/eval)")
    rag_eval.add_argument("--json", action="store_true", help="print the run (metrics and environment) as JSON")
    rag_eval.add_argument(
        "--gate-profile",
        metavar="NAME",
        help="gate the run; a profile containing 'release' requires AXIOMME_EMBEDDER=semantic-model-http "
        "and no strict embedder failure",
    )
    rag_eval.add_argument("--run-file", metavar="FILE", help="also write the run (metrics, environment, gate) as JSON")
    rag_eval.set_defaults(func=handle_eval_rag)
    evaluate.set_defaults(func=usage(evaluate))


@contextmanager
def workspace_engine(args: argparse.Namespace, *, announce: bool = True) -> Iterator[RetrievalEngine]:
    """The retrieval engine of the command's session (``-w``, else an ephemeral workspace, said on
    stderr when ``announce``); the settings are read first, so a bad ``AXIOMME_*`` fails fast."""
    from services.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings.from_env()  # ConfigError before anything is opened
    ephemeral = "no workspace given (-w NAME): using an ephemeral workspace; the index will not persist"
    with open_session(args, announce=ephemeral if announce else None) as session:
        if settings.backend == "memory" and announce:
            warn("AXIOMME_RETRIEVAL_BACKEND=memory: indexes live only as long as this command")
        yield session.engine()


def _backend_note(info: IndexInfo) -> str:
    """`` onnx-int8``, or `` onnx (built with torch)`` where the index is served by another backend
    of its vector space than the one that built it (AXIOMME_EMBEDDER_BACKEND unset)."""
    if not info.embedding_backend:
        return ""
    if info.built_backend and info.built_backend != info.embedding_backend:
        return f" {info.embedding_backend} (built with {info.built_backend})"
    return f" {info.embedding_backend}"


def _where(page: int | None, section: str | None) -> str:
    parts = []
    if page is not None:
        parts.append(f"p. {page}")
    if section:
        parts.append(f"§ {section}")
    return "  ".join(parts)


# -- index ---------------------------------------------------------------------------------


def handle_index_add(args: argparse.Namespace) -> int:
    """Index PATH with a progress bar; Ctrl-C cancels between files (written files stay).

    Prints the summary and one line per added, updated, removed, failed and skipped file with
    its reason (``--json``: the whole report).  Exit code: 0 every supported file is indexed or
    unchanged; 3 some files failed or were skipped over a limit; 130 cancelled; 1/2 as usual.
    """
    with workspace_engine(args) as engine:
        report = index_add(engine, args.path, args.name, quiet=args.json, wait_s=args.wait)
        if args.json:
            print_json(report.to_dict())
        else:
            print_report(report)
        if report.not_indexed and not args.json:
            warn(f"{len(report.not_indexed)} file(s) not indexed (exit code 3); see above")
        return report.exit_code


def index_add(
    engine: RetrievalEngine, path: str, name: str | None, *, quiet: bool = False, wait_s: float | None = None
) -> IngestReport:
    """``engine.index_add`` with a progress bar on stderr (none when ``quiet`` or not a terminal);
    Ctrl-C cancels between files (or the wait for another writer of the index: one line on
    stderr says who; ``wait_s`` None waits the engine's default). Shared by ``rag index add`` and
    ``aries ingest``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    stderr = console(stderr=True)
    cancel = threading.Event()
    from services.retrieval.store_locks import DEFAULT_WRITE_WAIT_S

    wait = DEFAULT_WRITE_WAIT_S if wait_s is None else wait_s
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}", markup=False),  # file names are never markup
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=quiet or not stderr.is_terminal,
    ) as bar:
        task = bar.add_task("scanning", total=None, detail="")

        def on_progress(event: ProgressEvent) -> None:
            if event.stage == "wait":  # another Aries writes this index
                _say_waiting(event)
                bar.update(task, description="waiting", detail="")
            elif event.stage == "file":
                bar.update(
                    task,
                    description="keywords",  # read, chunked, written to the keyword index a batch at a time
                    completed=event.done - 1,
                    total=event.total,
                    detail=safe(event.path or ""),
                )
            elif event.stage == "embed":
                bar.update(task, description="embedding", detail=f"{event.done}/{event.total} chunks")
            elif event.stage == "keywords":  # every file searchable by keyword: the vectors follow
                bar.update(task, description="keywords ✓ vectors", completed=0, total=None, detail="")
            elif event.stage == "vectors":
                bar.update(
                    task,
                    description="keywords ✓ vectors",
                    completed=event.done,
                    total=event.total,
                    detail="searchable by keyword now; dense fills in",
                )
            elif event.stage == "repair":
                bar.update(task, description="re-embedding", completed=event.done, total=event.total, detail="vectors")
            elif event.stage == "commit":
                bar.update(task, description="keywords", completed=event.done, total=event.total, detail="")
            elif event.stage == "done":
                bar.update(task, description="written", completed=event.done, total=event.total, detail="")

        report: IngestReport = run_cancellable(
            lambda: engine.index_add(path, name, progress=on_progress, cancel=cancel, wait_s=wait),
            cancel,
            "aries: cancelling after the current file…",
            stderr,
        )
    return report


def run_cancellable(work: Callable[[], T], cancel: threading.Event, cancelling: str, stderr: Any) -> T:
    """``work()`` in a worker thread while the main thread waits for it; Ctrl-C sets ``cancel`` (the
    engine stops at its next safe point), prints ``cancelling`` and waits for the worker to finish.
    The worker's result is returned and its exception re-raised here."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="aries-cancellable")
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        cancel.set()
        stderr.print(cancelling)
        worker.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


def _say_waiting(event: ProgressEvent) -> None:
    warn(event.path or "waiting for another writer")  # one line, never wrapped


def print_report(report: IngestReport) -> None:
    """The ingest report for a person: the summary, then one line per added, updated, removed,
    failed and skipped file with its reason."""
    if report.vectors_rebuilt:
        rebuilt = f"vector store rebuilt ({report.vectors_rebuilt} chunks re-embedded)"
        out(f"index {report.index!r}: {rebuilt}", single_line=True)
    out(report.summary(), single_line=True)
    for line in report.file_lines():
        out("  " + line.strip(), single_line=True)
    if report.activated:
        out(f"index {report.index!r} is now the active index", single_line=True)


def handle_index_list(args: argparse.Namespace) -> int:
    with workspace_engine(args, announce=False) as engine:
        infos = engine.index_list()
        if args.json:
            print_json([info.to_dict() for info in infos])
            return 0
        if not infos:
            out("no indexes; add one with: aries -w NAME rag index add PATH")
            return 0
        out(f"  {'INDEX (* in use)':<24} {'FILES':>12} {'CHUNKS':>15}  {'STATUS':<16} EMBEDDER", single_line=True)
        for info in infos:
            mark = "*" if info.active else " "
            out(
                f"{mark} {info.name:<24} {info.files:>6} files {info.chunks:>8} chunks  "
                f"{info.status:<16} {info.embedding_model or '-'}{_backend_note(info)}",
                single_line=True,
            )
            if info.status_detail:
                out(f"    {info.status}: {info.status_detail}", single_line=True)
            if info.vectors_note:  # keywords first: a state, not damage
                out(f"    {info.vectors_note} (dense search covers that part; the next rag index add continues)")
            advice = info.status.advice(info.name)
            if advice:
                out(f"    {advice}", single_line=True)
            for root in info.roots:
                out(f"    {root}", single_line=True)
            for failure in info.failed:
                out(
                    f"    failed   {failure['path']}: [{failure['code']}] {failure['message']} "
                    f"(since {failure['failed_at'][:19]}; its previous chunks are kept)",
                    single_line=True,
                )
        return 0


def handle_index_check(args: argparse.Namespace) -> int:
    """Exit 0 when every manifest chunk is in Tantivy and Chroma and neither holds more; else 1."""
    with workspace_engine(args, announce=False) as engine:
        result = engine.index_check(args.name)
        if args.json:
            print_json(result.to_dict())
        else:
            out(result.summary(), single_line=True)
            for kind in ("missing_tantivy", "missing_chroma", "extra_tantivy", "extra_chroma", "duplicates_tantivy"):
                ids = getattr(result, kind)
                if ids:
                    more = " …" if result.counts[kind] > len(ids) else ""
                    out(f"  {kind.replace('_', ' ')}: {', '.join(ids)}{more}", single_line=True)
        return 0 if result.ok else 1


def handle_index_use(args: argparse.Namespace) -> int:
    with workspace_engine(args) as engine:
        info = engine.index_use(args.name)
        out(f"active index: {info.name} ({info.files} files, {info.chunks} chunks)", single_line=True)
        return 0


def handle_index_rebuild(args: argparse.Namespace) -> int:
    """Drop INDEX and index its folders again (those it recorded, or ``--from``); it stays active if it was.

    The way out of a damaged manifest (whose folders are then unknown: ``--from`` names them). Without
    ``--from``, the folders come from the manifest; an imported index whose folders are quarantined
    has none until the workspace is trusted.
    """
    from services.errors import InvalidInput
    from services.retrieval.errors import IndexCorrupt, IndexNotFound
    from services.retrieval.models import IndexStatus

    with workspace_engine(args) as engine:
        folders = list(args.folders or [])
        was_active = engine.active_index == args.name
        if not folders:
            try:
                info = engine.index_info(args.name)
            except IndexCorrupt as exc:
                raise InvalidInput(f"{exc.message.split(';')[0]}; name its folder: --from FOLDER") from None
            if info.status is IndexStatus.UNREADABLE:
                raise InvalidInput(f"index {args.name!r} cannot be read, so its folders are unknown: --from FOLDER")
            folders = list(info.roots)
            if not folders:
                raise InvalidInput(f"index {args.name!r} records no folder to read: --from FOLDER")
        with contextlib.suppress(IndexNotFound):  # rebuilding one that is gone is adding it
            engine.index_drop(args.name)
        reports = [index_add(engine, folder, args.name, quiet=args.json) for folder in folders]
        if was_active:
            engine.index_use(args.name)
        if args.json:
            print_json({"index": args.name, "folders": folders, "reports": [r.to_dict() for r in reports]})
        else:
            for report in reports:
                print_report(report)
        return max((report.exit_code for report in reports), default=0)


def handle_index_repair(args: argparse.Namespace) -> int:
    """Rebuild the vectors of INDEX from its manifest, with a progress bar; Ctrl-C cancels (nothing changes)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from services.retrieval.ingest import Cancelled
    from services.retrieval.models import IndexStatus

    stderr = console(stderr=True)
    with workspace_engine(args) as engine:
        before = engine.index_info(args.name)
        cancel = threading.Event()
        vectors: int | None = None
        with Progress(
            TextColumn("[bold]re-embedding"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr,
            transient=True,
            disable=args.json or not stderr.is_terminal,
        ) as bar:
            task = bar.add_task("repair", total=None)

            def on_progress(event: ProgressEvent) -> None:
                if event.stage == "wait":  # another Aries writes this index
                    _say_waiting(event)
                else:
                    bar.update(task, completed=event.done, total=event.total)

            try:
                vectors = run_cancellable(
                    lambda: engine.index_repair(args.name, progress=on_progress, cancel=cancel),
                    cancel,
                    "aries: cancelling the repair…",
                    stderr,
                )
            except Cancelled:
                vectors = None
        if vectors is None:
            warn(f"repair of {args.name!r} cancelled; the index is unchanged")
            return EXIT_INTERRUPTED
        after = engine.index_info(args.name)
        if args.json:
            print_json({"index": args.name, "before": before.status, "status": after.status, "vectors": vectors})
        else:
            out(
                f"index {args.name!r}: {vectors} vectors rebuilt from the manifest "
                f"(was: {before.status}; now: {after.status})",
                single_line=True,
            )
        return 0 if after.status is IndexStatus.OK else 1


def handle_index_drop(args: argparse.Namespace) -> int:
    with workspace_engine(args) as engine:
        engine.index_drop(args.name)
        out(f"dropped index {args.name!r}", single_line=True)
        return 0


# -- query, show, last ---------------------------------------------------------------------


def handle_query(args: argparse.Namespace) -> int:
    with workspace_engine(args) as engine:
        result = engine.query(" ".join(args.text), k=args.k, index=args.index)
        for warning in result.warnings:  # keyword-only results: said on stderr whatever the format
            warn(f"warning: {warning}")
        if args.json:
            print_json(result.to_dict())
            return 0
        out(
            f"{len(result.hits)} result(s) from {result.index!r} in {result.elapsed_ms:.0f} ms "
            f"({result.embedding_model} {result.embedding_backend}"
            f"{', KEYWORD ONLY' if result.mode == 'keyword' else ''}"
            f"{f', {result.dense_note}' if result.dense_note else ''})",
            single_line=True,
        )
        for hit in result.hits:
            bm25 = f"bm25 #{hit.bm25_rank} ({hit.bm25_score:.3f})" if hit.bm25_rank else "bm25 -"
            dense = f"dense #{hit.dense_rank} ({hit.dense_score:.3f})" if hit.dense_rank else "dense -"
            out(f"{hit.rank:>3}. {hit.handle}  {hit.source_path}  {_where(hit.page, hit.section)}", single_line=True)
            out(f"     score {hit.score:.4f}  {bm25}  {dense}")
            preview = " ".join(hit.text.split())
            out(f"     {preview[:200]}{'…' if len(preview) > 200 else ''}", single_line=True)
        return 0


def handle_show(args: argparse.Namespace) -> int:
    with workspace_engine(args, announce=False) as engine:
        view = engine.show(args.handle)
        if args.json:
            print_json(view.to_dict())
            return 0
        out(view.handle, single_line=True)
        out(f"  source   {view.root}/{view.source_path} ({view.content_type})", single_line=True)
        where = _where(view.page, view.section)
        if where:
            out(f"  where    {where}", single_line=True)
        out(f"  offsets  {view.start_offset}-{view.end_offset} (chunk {view.ordinal})")
        out(f"  hash     {view.hash}")
        out(f"  model    {view.embedding_model}", single_line=True)
        out(f"  modified {view.last_modified}", single_line=True)
        out()
        out(view.text)
        return 0


def handle_last(args: argparse.Namespace) -> int:
    with workspace_engine(args, announce=False) as engine:
        record = engine.last()
        if args.json:
            print_json(record.to_dict() if record else None)
            return 0
        if record is None:
            out("no retrievals recorded in this workspace yet")
            return 0
        out(f"#{record.id} {record.ts}  index {record.index!r}  model {record.embedding_model}", single_line=True)
        out(f"  query   {record.query}", single_line=True)
        out(f"  params  {json.dumps(record.params, sort_keys=True)}", single_line=True)
        for hit in record.hits:
            out(
                f"  {hit['rank']:>3}. {hit['handle']}  {hit['source_path']}  score {hit['score']:.4f}", single_line=True
            )
        return 0


# -- eval ----------------------------------------------------------------------------------


def handle_eval_rag(args: argparse.Namespace) -> int:
    """Metrics of bm25, dense and hybrid, with the run environment; exit 1 when the run is not ok
    (a strict-mode embedder failure, recorded as ``embedding_strict_error``, or a failed gate)."""
    from services.files.atomic import atomic_write_text
    from services.retrieval.eval_run import evaluate_run
    from services.retrieval.evaluation import METHODS, METRICS
    from services.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings.from_env()
    tty = sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if tty and not args.json:
            progress(f"indexing {done}/{total} documents")

    result = evaluate_run(
        Path(args.dataset),
        queries_file=Path(args.queries) if args.queries else None,
        qrels_file=Path(args.qrels) if args.qrels else None,
        limit_docs=args.limit_docs,
        cache_dir=Path(args.cache) if args.cache else None,
        settings=settings,
        gate_profile=args.gate_profile,
        progress=on_progress,
    )
    if tty and not args.json:
        err("", end="\n")
    if args.run_file:
        atomic_write_text(Path(args.run_file), json.dumps(result, indent=2) + "\n")
    for problem in result.get("problems", []):  # the embedder's strict failure among them
        warn(problem)
    gate = result.get("gate")
    if gate is not None and not gate["passed"]:
        for reason in gate["reasons"]:
            warn(f"gate {gate['gate_profile']} failed: {reason}")
    if args.json:
        print_json(result, indent=None)
        return 0 if result["ok"] else 1
    if result["methods"]:
        out(f"{result['queries']} queries, {settings.embedder} embedder, document level")
        out(f"{'method':<8}" + "".join(f"{metric:>12}" for metric in METRICS))
        for method in METHODS:
            values = result["methods"][method]
            out(f"{method:<8}" + "".join(f"{values[metric]:>12.4f}" for metric in METRICS))
    return 0 if result["ok"] else 1
