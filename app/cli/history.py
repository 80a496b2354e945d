"""``aries history``: a workspace's conversations; ``aries history fork``: a copy up to an earlier turn.

    aries -w W history [--json]
    aries -w W history fork ID [--turn N] [--json]
    aries -w W history search QUERY [--json] [--limit N] [--role R] [--tool T] [--since DATE]
    aries -w W history export ID [--format md|html] [-o FILE]

Continue one with ``aries -w W ask --conversation ID …`` (or ``--continue`` for the last one), or
open it in the workbench with ``aries -w W --conversation ID`` (``--continue``). The work is in
``services.conversation.history``; nothing here writes except ``fork`` (a new transcript) and ``search``
(the derived search index, ``services.history_search``, caught up before it answers) and ``export -o``
(the file named, ``services.export``).
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli._common import out, positive_int, print_json, warn, workspace_option


def register(subparsers: Any) -> None:
    history = subparsers.add_parser(
        "history",
        help="list the workspace's conversations (date, first prompt, turns, model); fork one",
        description="The workspace's conversations, least recently written first (the last is the one "
        "--continue reopens).",
        epilog="continue one: aries -w W ask --conversation ID QUESTION (or --continue for the last); "
        "in the workbench: aries -w W --conversation ID (or --continue).",
    )
    workspace_option(history)
    history.add_argument("--json", action="store_true", help="print JSON (one object per conversation)")
    history.set_defaults(func=handle_history)
    actions = history.add_subparsers(dest="history_action", metavar="ACTION")
    fork = actions.add_parser(
        "fork",
        help="a new conversation with the first N turns of another (the source is left as it was)",
    )
    fork.add_argument("conversation", metavar="ID", help="a conversation id, a unique start of one, or 'last'")
    fork.add_argument("--turn", type=positive_int, metavar="N", help="keep turns 1..N (default: all)")
    workspace_option(fork)
    fork.add_argument("--json", action="store_true", help="print the new conversation as JSON")
    fork.set_defaults(func=handle_fork)
    _register_search(actions)
    _register_export(actions)


def _register_export(actions: Any) -> None:
    export = actions.add_parser(
        "export",
        help="a conversation as a document: Markdown, or one self-contained HTML file",
        description="Every turn, every tool call with its arguments, result, decision, rule and who approved it, "
        "and the passages the answers cited. Secrets are redacted; the same conversation gives the same bytes.",
    )
    export.add_argument("conversation", metavar="ID", help="a conversation id, a unique start of one, or 'last'")
    export.add_argument("--format", choices=("md", "html"), default="md", help="md (default) or html")
    export.add_argument("-o", "--output", metavar="FILE", help="write FILE (replaced atomically) instead of stdout")
    workspace_option(export)
    export.set_defaults(func=handle_export)


def _register_search(actions: Any) -> None:
    search = actions.add_parser(
        "search",
        help="search every conversation: messages, tool calls and results, attached files",
        description='Words, "a phrase", +must -not, word* (Tantivy\'s query language), best first; filters in '
        "the query as in the TUI (role:R tool:T since:DATE) or as options. Secrets were redacted before "
        "indexing: they are neither found nor shown.",
    )
    search.add_argument("query", metavar="QUERY", help="what to look for")
    search.add_argument("--limit", type=positive_int, default=20, metavar="N", help="at most N hits (default 20)")
    search.add_argument("--role", choices=("user", "assistant", "tool"), help="only this role's entries")
    search.add_argument("--tool", metavar="T", help="only this tool's calls and results (its id)")
    search.add_argument("--since", metavar="DATE", help="only entries from DATE on (YYYY-MM-DD[THH:MM], UTC)")
    workspace_option(search)
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.set_defaults(func=handle_search)


def _workspace(args: argparse.Namespace) -> Any:
    """The named workspace, read as it is (no repair: a live Aries may hold it)."""
    from services.errors import InvalidInput, NotFound
    from services.workspace.manager import Workspace, WorkspaceManager

    name = getattr(args, "workspace", None)
    if not name:
        raise InvalidInput("history needs a workspace (-w NAME): an ephemeral one keeps no conversation")
    manager = WorkspaceManager()
    path = manager.path_for(name)
    if not path.is_dir():
        raise NotFound(f"no workspace named {name!r}; create it with: aries workspace new {name}")
    return Workspace(path, name)


def handle_history(args: argparse.Namespace) -> int:
    from services.conversation.history import list_summaries
    from services.workspace.transcripts import iter_problems, newer_notices

    workspace = _workspace(args)
    summaries = list_summaries(workspace)
    for problem in iter_problems(workspace.transcripts_dir):  # never skipped without a word
        warn(f"{problem} (skipped; the other lines are read)")
    for notice in newer_notices(workspace.transcripts_dir):  # a newer Aries's entries: said, not read
        warn(notice)
    if args.json:
        print_json([summary.to_dict() for summary in summaries])
        return 0
    if not summaries:
        out(f"no conversations in workspace {workspace.name} yet", single_line=True)
        return 0
    out(f"{'CONVERSATION':<26}  {'UPDATED':16}  {'TURNS':>10}  {'MODEL':<24}  FIRST PROMPT", single_line=True)
    for summary in summaries:
        when = (summary.updated_at or "")[:16].replace("T", " ")
        model = summary.model or "-"
        fork = f"  (fork of {summary.forked_from['conversation_id']})" if summary.forked_from else ""
        line = f"{summary.conversation_id}  {when:16}  {summary.turns:>4} turn(s)  {model:<24}  {summary.first_prompt}"
        out(line + fork, single_line=True)
        if summary.marks():
            out(f"{'':26}  {summary.marks()}", single_line=True)
    return 0


def handle_fork(args: argparse.Namespace) -> int:
    from services.conversation.history import fork, summarize

    workspace = _workspace(args)
    target = fork(workspace, args.conversation, args.turn)
    summary = summarize(target.path)
    if args.json:
        print_json(summary.to_dict())
    else:
        out(f"{summary.conversation_id}  {summary.turns} turn(s) copied", single_line=True)
    return 0


def handle_search(args: argparse.Namespace) -> int:
    import sys

    from app.cli._common import progress, warn
    from services.history_search.query import Filters, search, split_filters
    from services.history_search.store import HistoryIndex

    workspace = _workspace(args)
    index = HistoryIndex.for_workspace(workspace)
    rebuilt = ""
    if sys.stderr.isatty():  # a first search of a workspace indexes its conversations: say how far

        def step(done: int, todo: int) -> None:
            progress(f"indexing conversations: {done}/{todo}", done=done == todo)

        rebuilt = index.catch_up(wait_s=2.0, progress=step).rebuilt
    text, typed = split_filters(args.query)  # role:R tool:T since:DATE in the query, as in the TUI
    filters = Filters(role=args.role or typed.role, tool=args.tool or typed.tool, since=args.since or typed.since)
    result = search(index, text, filters, limit=args.limit, budget_s=None, wait_s=2.0)
    if rebuilt or result.rebuilt:  # a damaged index, found and rebuilt from the transcripts: one line
        warn(f"the conversation search index was rebuilt from the transcripts: {rebuilt or result.rebuilt}")
    if result.partial:
        warn(
            f"partial: {result.coverage.indexed} of {result.coverage.total} conversations indexed "
            "(another Aries is indexing them); search again for the rest"
        )
    if args.json:
        print_json(result.to_dict())
        return 0
    if not result.hits:
        out(f"nothing found for {args.query!r} in workspace {workspace.name}", single_line=True)
        return 0
    for hit in result.hits:
        when = hit.timestamp[:16].replace("T", " ")
        what = hit.role if hit.kind == "message" else f"{hit.role} {hit.kind} {hit.tool}".rstrip()
        away = " (rewound away)" if hit.rewound else ""
        out(f"{hit.conversation_id}  {when:16}  turn {hit.turn:<4} {what}{away}: {_marked(hit)}", single_line=True)
    return 0


def handle_export(args: argparse.Namespace) -> int:
    """The document on stdout (its text is already inert: no control or bidi character is left in it),
    or in ``-o FILE``, said on stderr."""
    from pathlib import Path

    from app.cli._common import err, fail
    from services.export import export_conversation, write_export

    workspace = _workspace(args)
    export = export_conversation(workspace, args.conversation, args.format)
    if args.output:
        try:
            path = write_export(export, Path(args.output))
        except OSError as exc:  # a folder that cannot be written, a full disk: one line
            return fail(f"cannot write {args.output}: {exc.strerror or exc}")
        err(f"wrote {path} ({len(export.data)} bytes, conversation {export.conversation_id})")
        return 0
    out(export.data.decode("utf-8"), end="")  # already inert: the writer leaves it byte for byte
    return 0


def _marked(hit: Any) -> str:
    """The snippet with each hit between « and » (the text around is neutralised by ``out``)."""
    pieces, cursor = [], 0
    for start, end in hit.highlights:
        pieces += [hit.snippet[cursor:start], "«", hit.snippet[start:end], "»"]
        cursor = end
    pieces.append(hit.snippet[cursor:])
    return "".join(pieces)
