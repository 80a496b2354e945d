"""``aries ask``, ``aries ingest``, ``aries status``: the headless pipe (researcher-rag-bridge spec).

    aries ask [QUESTION…] [--stdin] [-k N] [--profile P] [-w W] [--json] [--approve TOOL]… [--cloud]
              [-c | --continue | --conversation ID]
    aries ingest PATH [-w W] [--index NAME] [--json]
    aries status [-w W] [--json] [--calls N]

The work is in ``services.pipe`` (the turn itself is the one ``TurnLoop``); this module reads the
arguments and stdin and prints. See :data:`EXIT_CODES` and :data:`ASK_EPILOG`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli._common import (
    conversation_options,
    fail,
    open_session,
    out,
    positive_int,
    print_json,
    safe,
    warn,
    workspace_option,
)

EXIT_CODES = """\
exit codes:
  0    ok
  1    another failure (a missing workspace, a broken store, ...)
  2    usage or bad input: bad flags, no question, bad request JSON or a field the schema refuses,
       an unknown --approve tool, an invalid model setting (ARIES_MODEL)
  3    policy: the model asked for a tool call that the policy refused or that needed an approval
       not given with --approve; the answer (made without that call) is still printed
  4    the model provider gave no answer: unreachable, timed out, an error status, a broken stream
  after a good local answer (printed in every case), the cloud bridge's problem: 3 the question was
       refused by its allowlist (nothing sent), 2 the bridge is on but not configured (endpoint,
       model, API key variable), 4 the cloud did not answer
  130  interrupted (Ctrl-C);  141  the reader of stdout went away

errors: one line on stderr, 'aries: <what is wrong>'; with --json also one JSON object on stdout,
  {"id", "error": {"type", "code", "message"}, "exit_code"} (usage errors of the flags themselves
  are on stderr only)."""

ASK_EPILOG = f"""\
input: the QUESTION argument, or stdin (--stdin, or whenever stdin is not a terminal and no QUESTION
  is given): plain text, or the request JSON {{"id", "query", "mode": "ask", "context": {{"tags",
  "files"}}, "settings": {{"k", "cloud_allowed"}}}} when it starts with '{{' (validated against
  services/pipe/schemas/ask-request.schema.json; context is accepted and not used yet).
output: the answer and a compact provenance table; with --json the response JSON {{"id", "answer",
  "provenance": {{"local": [...], "cloud": []}}, "confidence": {{"local", "cloud"}}, "logs_ref",
  "tool_calls", ...}} (services/pipe/schemas/ask-response.schema.json). logs_ref is
  TRANSCRIPT#TURN_ID (an ephemeral workspace's transcript is gone after the command; use -w).

confidence.local (0..1), from the passages injected (those over the relevance threshold):
  strength = max(dense cosine if >= min_score, 0.7 * keyword share if >= min_keyword)
  confidence.local = max strength * (0.5 + 0.5 * share of those passages the answer cites)
  0 when no passage passed the threshold. confidence.cloud is 0.5 when the cloud answered (it is
  not grounded in your documents), else 0.

cloud bridge (off unless the profile's 'cloud:' block or the workspace setting 'cloud' turns it on):
  mode ask sends the redacted question only with --cloud (or "cloud_allowed": true in the request);
  mode auto sends it when confidence.local is below the threshold; off never sends anything. The
  reply is printed after the local answer, tagged cloud, and kept in the 'cloud' index
  ('aries cloud forget' removes every reply).

tool calls the policy wants approved are denied (the model is told, as in the TUI) unless
  --approve names the tool id (e.g. --approve builtin:fs:write_text); repeat it or separate ids
  with commas.

{EXIT_CODES}"""


def register(subparsers: Any) -> None:
    ask = subparsers.add_parser(
        "ask",
        help="ask one question headless (stdin/JSON friendly); prints the answer with its provenance",
        description="One assistant turn without a screen: retrieval, the model, governed tool calls.",
        epilog=ASK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("question", nargs="*", metavar="QUESTION", help="the question (or give it on stdin)")
    ask.add_argument("--stdin", action="store_true", help="read the question or the request JSON from stdin")
    ask.add_argument("-k", type=positive_int, metavar="N", help="passages to retrieve (default: the request's, else 5)")
    ask.add_argument("--profile", metavar="P", help="answer under this prompt profile")
    ask.add_argument(
        "--command",
        dest="workspace_command",  # not ``command``: the subcommand's own name is kept there
        metavar="NAME",
        help="run the workspace command commands/NAME.md; the QUESTION words are its arguments ($1…, $ARGUMENTS)",
    )
    workspace_option(ask)
    ask.add_argument("--json", action="store_true", help="print the response JSON")
    ask.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TOOL",
        help="approve calls of this tool id when the policy asks (repeatable, or comma-separated)",
    )
    ask.add_argument(
        "--cloud",
        action="store_true",
        help="approve sending the redacted question to the cloud bridge when its mode is 'ask'",
    )
    conversation_options(
        ask,
        last="add the turn to the workspace's last conversation: the model sees its earlier turns",
        by_id="add the turn to this conversation (see: aries history)",
    )
    ask.set_defaults(func=handle_ask)

    ingest = subparsers.add_parser(
        "ingest",
        help="index a file or folder (the same as 'rag index add'); --json prints the spec's ingest result",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ingest.add_argument("path", metavar="PATH")
    workspace_option(ingest)
    ingest.add_argument("--index", metavar="NAME", help="index name (default: the folder or file name)")
    ingest.add_argument("--json", action="store_true", help="print the ingest result JSON")
    ingest.set_defaults(func=handle_ingest)

    status = subparsers.add_parser(
        "status",
        help="indexes, model reachability, cloud mode and the last tool calls",
        epilog="exit codes: 0 ok, 2 the configured model is invalid, 4 its provider does not answer "
        "(the report is printed in every case).",
    )
    workspace_option(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--calls", type=positive_int, default=10, metavar="N", help="last N tool calls (default 10)")
    status.set_defaults(func=handle_status)


# -- output ----------------------------------------------------------------------------------


def _fail(error: Exception, as_json: bool, request_id: str | None = None, exit_code: int | None = None) -> int:
    """One line on stderr; with --json also the error object on stdout."""
    from services.errors import AriesError

    code = fail(error, exit_code)  # a bug (not an AriesError) is raised again
    if as_json and isinstance(error, AriesError):
        data = {
            "id": request_id,
            "error": {"type": type(error).__name__, "code": error.code, "message": error.message},
            "exit_code": code,
        }
        print_json(data, indent=None)
    return code


def _read_stdin() -> str:
    from services.errors import InvalidInput

    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"stdin is not UTF-8 text (byte {exc.start})") from None


def _approved(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def handle_ask(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    request_id: str | None = None
    try:
        from services.pipe.headless import run_ask
        from services.pipe.request import parse_input

        conversation = getattr(args, "conversation", None)
        if conversation is not None and not getattr(args, "workspace", None):
            from services.errors import InvalidInput

            raise InvalidInput(
                "--continue and --conversation need a workspace (-w NAME): an ephemeral one keeps nothing"
            )
        question = " ".join(args.question) if args.question else None
        name = args.workspace_command
        command = (name, list(args.question)) if name else None
        if command is not None:  # the words are the command's arguments; its template is the question
            question, use_stdin = name, False
        else:
            use_stdin = args.stdin or (question is None and not sys.stdin.isatty())
        request = parse_input(question, _read_stdin() if use_stdin else None)
        request_id = request.id
        result = run_ask(
            request,
            workspace=getattr(args, "workspace", None),
            k=args.k,
            approve=_approved(args.approve),
            profile=args.profile,
            cloud=args.cloud,
            conversation=conversation,
            on_warning=warn,
            command=command,
        )
    except AriesError as error:
        return _fail(error, args.json, request_id)
    if result.error is not None:
        return _fail(result.error, args.json, str(result.response["id"]), result.exit_code)
    if args.json:
        _print_response(result.response)
    else:
        _print_answer(result.response)
    for call in result.tool_calls:
        if call["status"] == "denied":
            asked = str(call["rule"] or "").startswith("approval.")  # it waited for an approval: --approve helps
            hint = (
                f"rerun with --approve {call['tool_id']} if it should run"
                if asked
                else "a policy rule refuses it, which --approve cannot change"
            )
            warn(f"{call['tool_id']} was refused ({call['rule'] or 'policy'}); the answer was made without it; {hint}")
    if result.response.get("finish_reason") == "length":
        warn("the model stopped at its length limit: the answer may be cut short")
    if result.cloud_problem:
        warn(result.cloud_problem)
    return result.exit_code


def _print_response(response: dict[str, Any]) -> None:
    from services.pipe.request import RESPONSE_SCHEMA, validate

    validate(response, RESPONSE_SCHEMA, "response (a bug: please report it)")
    print_json(response)


def _print_answer(response: dict[str, Any]) -> None:
    out(safe(response["answer"]).rstrip())
    local = response["provenance"]["local"]
    confidence = response["confidence"]["local"]
    out()
    where = f"index {response['index']}" if response.get("index") else "no index in use"
    summary = f"provenance: {len(local)} local passage(s), {where}; confidence.local {confidence:.2f}"
    out(summary, single_line=True)
    for hit in local:
        place = hit["source"] + (f" p.{hit['page']}" if hit.get("page") is not None else "")
        place += f" § {hit['section']}" if hit.get("section") else ""
        mark = "cited" if hit["cited"] else "-"
        line = f"  {hit['rank']:>2}  {hit['handle']:<28} {hit['strength']:.2f}  {mark:<5}  {place}"
        out(line, single_line=True)
    for call in response.get("tool_calls", []):
        out(f"  tool {call['tool_id']}: {call['status']}  {call['summary']}", single_line=True)
    cloud = response.get("cloud") or {}
    for entry in response["provenance"]["cloud"]:
        out()
        redactions = ", ".join(f"{kind} {n}" for kind, n in sorted(entry["redactions"].items())) or "none"
        head = f"cloud answer ({entry['model']}, {entry['request_id']}; redacted: {redactions}):"
        out(head, single_line=True)
        out(safe(entry["answer"]).rstrip())
    if cloud.get("status") == "declined" and cloud.get("mode") == "ask":
        out("cloud: not asked (mode ask; rerun with --cloud to send the redacted question)", single_line=True)


# -- ingest, status ----------------------------------------------------------------------------


def handle_ingest(args: argparse.Namespace) -> int:
    from services.errors import AriesError

    try:
        from app.cli.rag import index_add, print_report, workspace_engine

        with workspace_engine(args, announce=not args.json) as engine:
            report = index_add(engine, args.path, args.index, quiet=args.json)
            if args.json:
                from services.pipe.ingest import ingest_result

                print_json(ingest_result(report, engine))
            else:
                print_report(report)
        return 130 if report.cancelled else 0
    except AriesError as error:
        return _fail(error, args.json)


def handle_status(args: argparse.Namespace) -> int:
    import os

    from services.errors import AriesError

    try:
        from services.pipe.headless import HeadlessApprover
        from services.pipe.status import status

        with open_session(args, approver=HeadlessApprover()) as session:
            report, code = status(session, dict(os.environ), calls=args.calls)
    except AriesError as error:
        return _fail(error, args.json)
    if args.json:
        print_json(report)
    else:
        _print_status(report)
    if report["model"].get("error") and code:
        warn(report["model"]["error"])
    return code


def _print_status(report: dict[str, Any]) -> None:
    def line(text: str) -> None:
        out(text, single_line=True)

    workspace = report["workspace"]
    line(f"workspace  {workspace['name']}{' (ephemeral)' if workspace['ephemeral'] else ''}  {workspace['path']}")
    line(f"profile    {report.get('profile') or 'default'}")
    model = report["model"]
    if model.get("label") is None:
        line(f"model      not usable: {model['error']}")
    else:
        state = "answers" if model["reachable"] else "does not answer"
        detail = f" ({model['error']})" if model.get("error") else ""
        line(f"model      {model['label']} (from {model['source']}): {state}{detail}")
    cloud = report["cloud"]
    line(f"cloud      {cloud.get('describe') or cloud['mode']}")
    for row in cloud.get("recent", []):
        line(f"  {row['ts']}  {row['request_id']}  {row['status']}  {row.get('model') or ''}  {row.get('error') or ''}")
    if not report["indexes"]:
        line("indexes    none; add one with: aries -w NAME ingest PATH")
    for info in report["indexes"]:
        mark = "*" if info.get("active") else " "
        counts = f"{info['files']} files  {info['chunks']} chunks"
        line(f"index    {mark} {info['name']}  {counts}  {info['embedding_model']}")
    calls = report["last_calls"]
    line(f"last calls {len(calls)}")
    for row in calls:
        line(
            f"  {row['created_at']}  {row['tool_name']}  {row['source']}  {row['status']}  "
            f"{row['decision'] or ''} {row['rule_id'] or ''}"
        )
