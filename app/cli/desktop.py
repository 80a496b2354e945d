"""``aries desktop REQUEST``: Desktop Ops from the command line.

    aries [-w NAME] desktop REQUEST… [--yes] [--approve] [--policy FILE] [--mode MODE] [--json]

Without a model (the ``offline`` provider) the request goes through the deterministic parser of
``services.desktop``: the plan of tool steps is printed, and ``--yes`` runs it, each step through the
same gateway as the TUI (a step the policy wants approved is denied unless ``--approve`` is given).
With a model configured the request is one turn of the assistant's loop with the tools the policy
allows (``--approve`` approves its calls the policy asks about).

Exit codes: 0 ok (or the plan shown), 2 a request that cannot be planned, 3 a policy denial, 1 other
errors.
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

from app.cli._common import EXIT_DENIED, EXIT_ERROR, EXIT_OK, POLICY_HELP, fail, open_session, out, print_json, warn
from services.approval_mode import MODE_NAMES

EXIT_REQUEST = 2


def register(subparsers: Any) -> None:
    desktop = subparsers.add_parser(
        "desktop", help="do a common task from a plain request (create/read/list/search files, run, web)"
    )
    desktop.add_argument(
        "request",
        nargs=argparse.REMAINDER,
        metavar="REQUEST",
        help='e.g. create notes/todo.md with "buy milk"; everything after the options (put them first, or last; '
        "after -- nothing is taken as an option: -- run pytest --json)",
    )
    desktop.add_argument("--yes", action="store_true", help="run the plan (without it, the plan is only shown)")
    desktop.add_argument("--approve", action="store_true", help="approve the steps the policy asks approval for")
    desktop.add_argument("--policy", metavar="FILE", help=POLICY_HELP)
    desktop.add_argument("--mode", choices=MODE_NAMES, help="override the approval mode")
    desktop.add_argument("--json", action="store_true", help="print the plan and the results as JSON")
    desktop.set_defaults(func=handle_desktop)


def _say(text: str) -> None:
    out(text.rstrip("\n"))


FLAGS = {"--yes": "yes", "--approve": "approve", "--json": "json"}
VALUED = {"--policy": "policy", "--mode": "mode"}


def _take_trailing_options(args: argparse.Namespace) -> list[str]:
    """The request's words, with this command's options written after it moved onto ``args``
    (``aries desktop list --yes``); after a leading ``--`` every word is the request's."""
    words = list(args.request)
    if words[:1] == ["--"]:
        return words[1:]
    while words:
        if words[-1] in FLAGS:
            setattr(args, FLAGS[words.pop()], True)
        elif len(words) >= 2 and words[-2] in VALUED:
            value, name = words.pop(), words.pop()
            if name == "--mode" and value not in MODE_NAMES:
                raise ValueError(f"--mode is one of {', '.join(MODE_NAMES)}, not {value!r}")
            setattr(args, VALUED[name], value)
        else:
            break
    return words


def handle_desktop(args: argparse.Namespace) -> int:
    import asyncio

    from services.desktop import DesktopError, check_plan, desktop_route, parse_request, run_desktop_plan
    from services.errors import AriesError
    from services.tools.calls import approve_all

    try:
        words = _take_trailing_options(args)
    except ValueError as exc:
        return fail(str(exc), EXIT_REQUEST)
    # One word: the request was quoted whole (its own quotes kept); several: quoted again for the parser.
    request = words[0] if len(words) == 1 else shlex.join(words)
    approver = approve_all if args.approve else None
    try:
        with open_session(args, policy_file=args.policy, mode=args.mode, approver=approver) as session:
            session.policy()  # a broken policy in force is one clear line
            if desktop_route(session, os.environ) == "model":
                return _model_turn(session, request)
            plan = parse_request(request)
            check_plan(session, plan)
            if not args.yes:
                if args.json:
                    print_json({"plan": plan.to_dict(), "ran": False})
                else:
                    _say(plan.render())
                warn(f"rerun with --yes to run these {len(plan.steps)} step(s)")
                return EXIT_OK
            if not args.json:
                _say(plan.render())
            run = asyncio.run(run_desktop_plan(session, plan))
    except DesktopError as exc:
        return fail(exc.message, EXIT_REQUEST)
    except AriesError as exc:
        return fail(exc, EXIT_ERROR)
    if args.json:
        print_json(run.to_dict())
    else:
        for outcome in run.outcomes:
            _say(f"── {outcome.number}. {outcome.step.tool_id}")
            _say(outcome.result.display_text())
        _say(run.summary())
    for outcome in run.outcomes:
        error = outcome.result.error
        if error is not None and error.details.get("rule") == "approval.no_approver":
            warn(f"{outcome.step.tool_id} needs approval; rerun with --yes --approve")
    if run.ok:
        return EXIT_OK
    return EXIT_DENIED if run.denied else EXIT_ERROR


def _model_turn(session: Any, request: str) -> int:
    """One turn of the assistant's loop with the tools the policy allows; prints its answer."""
    import asyncio

    from services.assistant import TurnLoop
    from services.models.config import make_provider, resolve_model

    config = resolve_model(session.model_setting(), os.environ)
    provider = make_provider(config)

    async def turn() -> Any:
        try:
            return await TurnLoop(session, provider, model_label=config.label).run(request)
        finally:
            await provider.aclose()

    outcome = asyncio.run(turn())
    _say(f"Desktop Ops with {config.label}: {len(outcome.tool_calls)} tool call(s)")
    if outcome.text:
        _say(outcome.text)
    if outcome.error:
        return fail(outcome.error)
    return EXIT_OK
