"""``aries -w W --plain``: the workbench without the screen, for a screen reader or a pipe.

No full screen, no animation, no ticking timer: every entry the conversation records (the operator's
message, what was retrieved, each tool call, the answer, notices) is printed once, as plain lines on
standard output through the neutraliser (``services.text.textsafe``, as the CLI's ``out``), when it
is recorded.
Prompts are read line by line from standard input; a line that starts with ``/`` is a slash command,
parsed by the one grammar (``widgets.commands``). The commands a line-by-line session can carry out are
:data:`SUPPORTED`; any other is refused in one line. End of input or ``/quit`` leaves.

The session is the TUI's (``Session.open(…, surface=Surface.PLAIN)``: the workspace's lease, the
conversation's hold, audit source ``operator``, the same transcript), except for approvals: a call
the policy wants approved is asked as a numbered question on ``/dev/tty``
(``services.pipe.tty_approval``); with no terminal it is refused, and the session ends with the
CLI's exit code for a refused call (3).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

from services.errors import AriesError
from services.pipe.headless import EXIT_OK, EXIT_POLICY
from services.text.textsafe import neutralize

if TYPE_CHECKING:
    from services.conversation.events import ConversationEvent
    from services.pipe.tty_approval import TtyApprover
    from services.session.session import Session

SUPPORTED = ("help", "new", "history", "policy", "rag", "quit")
"""The slash commands plain mode carries out (the others need the workbench's screens)."""
HIT_PREVIEW = 200


def run_plain(workspace: str | None, *, conversation: str = "new", stdin: IO[str] | None = None) -> int:
    """Open the session, read prompts until end of input or ``/quit``, close it; the exit code is 3
    when a call was refused for want of a terminal to ask, else 0."""
    from services.pipe.tty_approval import TtyApprover
    from services.session.opening import Surface, close_session
    from services.session.session import Session

    if conversation != "new" and workspace is None:
        from services.errors import InvalidInput

        raise InvalidInput("--continue and --conversation need a workspace (-w NAME): an ephemeral one keeps nothing")
    approver = TtyApprover()
    session = Session.open(
        workspace, surface=Surface.PLAIN, create=True, approver=approver, conversation=conversation, on_warning=_warn
    )
    try:
        plain = PlainSession(session, approver)
        return asyncio.run(plain.run(stdin if stdin is not None else sys.stdin))
    finally:
        close_session(session, "Aries quit")


def _warn(message: str) -> None:
    """One line on stderr, as the CLI's ``warn``."""
    sys.stderr.write(f"aries: {neutralize(message, single_line=True)}\n")
    sys.stderr.flush()


def out(text: str) -> None:
    """``text`` on stdout, neutralised (newlines kept), as the CLI's ``out``."""
    sys.stdout.write(neutralize(text) + "\n")


def say(text: str) -> None:
    """Lines of the session's own (not recorded): neutralised, flushed at once for a reader."""
    out(text)
    sys.stdout.flush()


def entry_lines(event: ConversationEvent, entry: dict[str, Any]) -> list[str]:
    """A recorded entry as plain lines: a label, then its text (further lines indented by two)."""
    from services.conversation.events import AssistantAnswer, Notice, RetrievalSet, ToolCallRecord, UserMessage

    if isinstance(event, UserMessage):
        return _labelled("you", event.text)
    if isinstance(event, AssistantAnswer):
        who = event.model or event.provider
        lines = _labelled(f"assistant ({who}{', cloud' if event.provenance == 'cloud' else ''})", event.text)
        if event.citations:
            lines.append("  sources: " + ", ".join(event.citations))
        return lines
    if isinstance(event, RetrievalSet):
        where = f" from index {event.index}" if event.index else ""
        return [f"retrieved: {len(event.handles)} passage(s){where}"]
    if isinstance(event, ToolCallRecord):
        state = "ok" if event.ok else "failed"
        return _labelled(f"tool {event.tool_id} ({event.source or 'operator'}): {state}", event.summary)
    if isinstance(event, Notice):
        label = event.title or "notice"
        return _labelled(label if event.level == "info" else f"{label} ({event.level})", event.text)
    return _labelled(str(entry.get("role", "entry")), str(entry.get("content", "")))


def _labelled(label: str, text: str) -> list[str]:
    first, *rest = text.splitlines() or [""]
    return [f"{label}: {first}", *("  " + line for line in rest)]


class PlainSession:
    """One plain-mode session: the conversation printed as it is recorded, prompts read from a stream."""

    def __init__(self, session: Session, approver: TtyApprover) -> None:
        self.session = session
        self.approver = approver
        self.quitting = False
        self._unsubscribe = session.conversation.subscribe(self._recorded)

    def _recorded(self, entry: dict[str, Any], event: ConversationEvent) -> None:
        for line in entry_lines(event, entry):
            out(line)
        sys.stdout.flush()

    def _follow(self) -> None:
        """The session changed its conversation (``/new``): print the new one's entries instead."""
        self._unsubscribe()
        self._unsubscribe = self.session.conversation.subscribe(self._recorded)

    async def run(self, stdin: IO[str]) -> int:
        session = self.session
        say(
            f"Aries plain mode: workspace {session.workspace.name}, model {self._model_label()}. "
            "Type a message, or /help; /quit or the end of input leaves."
        )
        lines = read_lines(stdin)
        try:
            while not self.quitting:
                line = await lines.get()
                if line is None:
                    break
                text = line.strip()
                if not text:
                    continue
                try:
                    if text.startswith("/"):
                        await self.command(text)
                    else:
                        await self.turn(text)
                except AriesError as exc:
                    say(f"error: {exc.message}")
        finally:
            self._unsubscribe()
            await session.aclose("Aries quit")
        return EXIT_POLICY if self.approver.refused else EXIT_OK

    def _model_label(self) -> str:
        from services.models.config import resolve_model

        try:
            return str(resolve_model(self.session.model_setting(), self.session.in_force.model_env()).label)
        except AriesError as exc:
            return f"not usable ({exc.message})"

    # -- a message: one turn -------------------------------------------------------------------------
    async def turn(self, text: str) -> None:
        """One turn of the TUI's loop; its entries are printed as they are recorded."""
        from services.assistant import TurnLoop
        from services.bridge import headless_approver
        from services.models.config import make_provider, resolve_model

        session = self.session
        config = resolve_model(session.model_setting(), session.in_force.model_env())
        provider = make_provider(config)
        loop = TurnLoop(session, provider, model_label=config.label, cloud_approve=headless_approver(False))
        try:
            sent = await self._attach(text)
            await loop.run(sent, query=text)
        finally:
            await provider.aclose()

    async def _attach(self, text: str) -> str:
        from services.assistant.attachments import attach, describe, mentions

        if not mentions(text):
            return text
        sent, attached = await attach(self.session, text)
        say(describe(attached)[0])
        return sent

    # -- slash commands ------------------------------------------------------------------------------
    async def command(self, line: str) -> None:
        """A slash command: parsed by the one grammar; one of :data:`SUPPORTED`, else refused."""
        from widgets.command_spec import split_name
        from widgets.commands import CommandError, parse

        name, _ = split_name(line)
        try:
            spec, parsed = parse(line)
        except CommandError as exc:
            say(f"error: {exc}")
            return
        if spec.name not in SUPPORTED:
            say(f"error: /{spec.name} needs the workbench's screen; plain mode has {_listed()}")
            return
        if name == "quit":
            self.quitting = True
        elif name == "help":
            self.help()
        elif name == "new":
            self.session.new_conversation()
            self._follow()
            say("new conversation started")
        elif name == "history":
            self.history(parsed)
        elif name == "policy":
            self.policy(parsed)
        else:
            await self.rag(parsed)

    def help(self) -> None:
        from widgets.commands import COMMANDS

        lines = ["Commands in plain mode (the others need the workbench):"]
        for spec in COMMANDS:
            if spec.name in SUPPORTED:
                lines.append(f"  {spec.usage}  — {spec.summary}")
        lines.append("Anything else is a message to the assistant; approvals are asked on the terminal (/dev/tty).")
        say("\n".join(lines))

    def history(self, parsed: Any) -> None:
        from services.conversation.history import list_summaries
        from widgets.commands import HistorySearch

        if isinstance(parsed, HistorySearch):
            name = self.session.workspace.name
            say(f"error: /history search needs the workbench; use: aries -w {name} history search QUERY")
            return
        summaries = list_summaries(self.session.workspace)
        if not summaries:
            say("no conversations in this workspace yet")
        for summary in summaries:
            current = "  (this one)" if summary.conversation_id == self.session.conversation.conversation_id else ""
            say(f"{summary.conversation_id}  {summary.turns} turn(s)  {summary.first_prompt}{current}")

    def policy(self, parsed: Any) -> None:
        """``/policy``: recorded as notices, as the workbench records them."""
        from widgets.commands import PolicyMode

        session = self.session
        notice = session.conversation.notice
        if isinstance(parsed, PolicyMode):
            if parsed.mode is not None:
                session.set_mode(parsed.mode)
            notice(f"Approval mode: {session.mode}", title="policy")
        elif parsed.action == "explain-last":
            decision = session.gateway().last_decision()
            if decision is None:
                notice("No tool call has been decided in this workspace yet.", title="policy")
            else:
                from app.commands.tools import explain_decision

                notice(explain_decision(decision), title="policy")
        elif parsed.action == "show":
            policy = session.policy()
            notice(
                f"Policy in force: {session.policy_source}\nhash {policy.hash}\napproval mode {session.mode}\n"
                f"profile {session.profile_name}",
                title="policy",
            )
        else:  # reload
            session.reload_policy()
            notice(f"Policy reloaded: {session.policy_source}", title="policy")

    async def rag(self, parsed: Any) -> None:
        """``/rag``: index list, use, query, show and last (building an index needs the workbench or
        ``aries rag index add``)."""
        from widgets.commands import Action, Named, Query

        engine = self.session.engine()
        if isinstance(parsed, Query):
            result = await asyncio.to_thread(engine.query, parsed.text, k=parsed.k or 5)
            say(f"{len(result.hits)} result(s) from index {result.index}")
            for hit in result.hits:
                preview = " ".join(hit.text.split())[:HIT_PREVIEW]
                say(f"{hit.rank:>3}. {hit.handle}  {hit.source_path}\n     {preview}")
        elif isinstance(parsed, Named) and parsed.action == "use":
            info = await asyncio.to_thread(engine.index_use, parsed.name)
            say(f"index {info.name} is now in use ({info.chunks} chunks)")
        elif isinstance(parsed, Named) and parsed.action == "show":
            chunk = await asyncio.to_thread(engine.show, parsed.name)
            say(f"{chunk.handle}  {chunk.source_path}\n{chunk.text}")
        elif isinstance(parsed, Action) and parsed.action == "list":
            infos = await asyncio.to_thread(engine.index_list)
            if not infos:
                say("no indexes yet: aries rag index add PATH")
            for info in infos:
                say(f"{'*' if info.active else ' '} {info.name}  {info.files} file(s)  {info.chunks} chunk(s)")
        elif isinstance(parsed, Action) and parsed.action == "last":
            record = await asyncio.to_thread(engine.last)
            if record is None:
                say("nothing has been retrieved in this workspace yet")
            else:
                say(f"last retrieval: {record.query!r} from {record.index}: {len(record.hits)} passage(s)")
        else:
            say(
                "error: plain mode's /rag has index list, use, query, show and last; "
                f"build indexes with: aries -w {self.session.workspace.name} rag index add PATH"
            )


def read_lines(stdin: IO[str]) -> asyncio.Queue[str | None]:
    """The lines of ``stdin`` as they come (``None`` at its end), read by a daemon thread: a thread of
    the loop's executor blocked in ``readline`` would keep Ctrl+C from ending the process."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def hand(line: str | None) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        except RuntimeError:  # the loop is closed: nobody reads any more
            pass

    def read() -> None:
        for line in iter(stdin.readline, ""):
            hand(line)
        hand(None)

    threading.Thread(target=read, name="plain-stdin", daemon=True).start()
    return queue


def _listed() -> str:
    return ", ".join(f"/{name}" for name in SUPPORTED)


__all__ = ["SUPPORTED", "PlainSession", "entry_lines", "run_plain"]
