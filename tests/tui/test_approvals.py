"""The approval flow in the TUI: the queue, the modal, and what reaches the transcript and audit."""

from __future__ import annotations

import json

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from services.workspace.manager import Workspace, WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import Messages, settle, until
from widgets.approvals.pane import ApprovalsPane

SIZE = (160, 48)

WEB_POLICY = """\
version: 1
mode: guide
providers: {builtin: {enabled: true}}
tool_classes: {fs: enabled, shell: enabled, web: enabled}
filesystem:
  allowed_roots: ["${workspace}"]
shell:
  executables:
    - {id: inspect, names: [ls, cat, echo, sleep]}
web:
  schemes: [http, https]
  allow_private: ["127.0.0.1:9"]
"""


def make_workspace(name: str = "demo", policy: str | None = None) -> Workspace:
    workspace, _ = WorkspaceManager().create(name)
    (workspace.root / "notes.txt").write_text("first line\nold line\n")
    if policy is not None:
        (workspace.root / "policy.yaml").write_text(policy)
    return workspace


async def wait_for_pending(app: AriesApp, pilot: Pilot[int], count: int = 1) -> None:
    """``count`` calls wait, and the Approvals pane shows them."""
    pane = app.screen_stack[0].query_one(ApprovalsPane)
    await until(
        pilot,
        lambda: app.session is not None and len(app.session.approvals.pending()) >= count and pane.count >= count,
        what=f"{count} pending approval(s)",
    )


async def wait_for_tools(app: AriesApp, pilot: Pilot[int]) -> None:
    await settle(pilot)


def tool_entries(app: AriesApp) -> list[dict]:
    assert app.session is not None
    return [e for e in read_transcript(app.session.conversation.transcript.path).entries if e["role"] == "tool"]


async def test_write_approved_once_in_the_modal() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt new text", "enter")
        await wait_for_pending(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"  # nothing before approval
        assert app.focused is app.screen.query_one("#prompt")  # a queued call does not steal the prompt's focus
        await pilot.press("f4", "enter")  # F4 focuses the Approvals pane; Enter opens the modal
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen)
        await pilot.press("a")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "new text\n"
        [entry] = tool_entries(app)
        assert entry["tool_name"] == "builtin:fs:write_text" and entry["status"] == "success"
        decision = app.session.gateway().last_decision()
        assert decision is not None and decision["approved_by"] == "operator_once"
        assert app.session.approvals.pending() == []
        assert app.focused is app.screen.query_one("#prompt")


async def test_deny_with_a_reason_reaches_the_caller_as_a_structured_result() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt nope", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter", "d", *"not today", "enter")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"
        [entry] = tool_entries(app)
        assert entry["status"] == "fail"
        error = entry["output"]["error"]
        assert error["type"] == "PolicyDenied" and "not today" in error["message"]
        assert error["details"]["rule"]


async def test_escape_leaves_the_call_waiting_and_session_approval_covers_the_pattern() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt one", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ApprovalScreen) and len(app.session.approvals.pending()) == 1
        # Esc gives the prompt back (issue 24): what the operator types goes there, Enter does not reopen it.
        await until(pilot, lambda: app.focused is app.screen.query_one("#prompt"), what="the focus at the prompt")
        await pilot.press(*"still here")
        assert app.screen.query_one("#prompt").value == "still here"  # type: ignore[attr-defined]
        app.screen.query_one("#prompt").value = ""  # type: ignore[attr-defined]
        app.screen.query_one(ApprovalsPane).focus_main()
        await pilot.pause()
        await pilot.press("enter", "s")
        await wait_for_tools(app, pilot)
        assert (workspace.root / "notes.txt").read_text() == "one\n"
        # the same tool and path again: no question this time
        await pilot.press(*"/fs write notes.txt two", "enter")
        await wait_for_tools(app, pilot)
        assert app.session.approvals.pending() == []
        assert (workspace.root / "notes.txt").read_text() == "two\n"
        decision = app.session.gateway().last_decision()
        assert decision is not None and decision["approved_by"] == "operator_session"


async def test_reads_run_without_asking_and_denied_paths_are_refused_through_the_shell() -> None:
    workspace = make_workspace()
    (workspace.root / ".env").write_text("SECRET=1\n")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs ls", "enter")
        await wait_for_tools(app, pilot)
        await pilot.press(*"/shell run cat .env", "enter")
        await wait_for_tools(app, pilot)
        await pilot.press(*"/fs read .env", "enter")
        await wait_for_tools(app, pilot)
        listed, shell, read = tool_entries(app)
        assert listed["status"] == "success"
        assert shell["status"] == "fail" and shell["output"]["error"]["type"] == "PolicyDenied"
        assert read["status"] == "fail" and read["output"]["error"]["type"] == "PolicyDenied"
        assert app.session.approvals.pending() == []  # refused by policy before anyone was asked
        await pilot.press(*"/policy explain-last", "enter")
        await pilot.pause()
        assert app.session is not None
        last = read_transcript(app.session.conversation.transcript.path).entries[-1]
        assert last["role"] == "notice" and "rule" in last["content"] and "deny" in last["content"]


async def test_switching_workspace_denies_what_still_waits() -> None:
    workspace = make_workspace()
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt pending", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("escape")
        await app.open_workspace("other")
        await wait_for_tools(app, pilot)
        assert app.session.approvals.pending() == []
        assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"


# -- snapshots ----------------------------------------------------------------------------------
def queue(*commands: str, open_first: bool = False):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, AriesApp)
        await pilot.pause()  # let the main screen compose
        for number, command in enumerate(commands, start=1):
            app.screen.query_one("#prompt").focus()
            await pilot.press(*command, "enter")
            await wait_for_pending(app, pilot, number)
        if open_first:
            app.screen.query_one(ApprovalsPane).focus_main()
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
        await pilot.pause()

    return run_before


def test_modal_for_a_file_write_shows_the_diff(snap_compare) -> None:
    """You should see the approval modal for builtin:fs:write_text: risk WRITE_DESTRUCTIVE, the guide-mode
    rule, a diff of notes.txt replacing its two lines by "new line", the arguments as JSON, what approving
    for the session covers (${workspace}/notes.txt), what "always in this workspace" stores (that file), and the
    keys a, s, w, *, d, Esc."""
    make_workspace()
    command = "/fs write notes.txt new line"
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=queue(command, open_first=True))


def test_modal_for_a_shell_command(snap_compare) -> None:
    """You should see the approval modal for builtin:shell:run with risk EXEC_USERSPACE, the command line
    "echo hello aries" and its cwd ${workspace}, and the arguments."""
    make_workspace()
    assert snap_compare(
        AriesApp("demo"), terminal_size=SIZE, run_before=queue("/shell run echo hello aries", open_first=True)
    )


def test_modal_for_a_network_fetch(snap_compare) -> None:
    """You should see the approval modal for builtin:web:fetch with risk NETWORK and the URL
    http://127.0.0.1:9/report.html (nothing is fetched: the call waits for the operator)."""
    make_workspace(policy=WEB_POLICY)
    assert snap_compare(
        AriesApp("demo"),
        terminal_size=SIZE,
        run_before=queue("/web fetch http://127.0.0.1:9/report.html", open_first=True),
    )


def test_approvals_pane_with_three_pending_calls(snap_compare) -> None:
    """You should see the main screen with three calls in the Approvals pane (fs:write_text
    WRITE_DESTRUCTIVE notes.txt, shell:run EXEC_USERSPACE "echo hi", web:fetch NETWORK with its URL), each
    with the reason it waits, the first highlighted, and "3 waiting" in the pane's border."""
    make_workspace(policy=WEB_POLICY)
    run_before = queue("/fs write notes.txt hello", "/shell run echo hi", "/web fetch http://127.0.0.1:9/a")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


async def test_doctor_and_policy_mode_from_the_prompt() -> None:
    workspace = make_workspace()
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*"/doctor", "enter")
        await wait_for_tools(app, pilot)
        assert app.session is not None
        report = read_transcript(app.session.conversation.transcript.path).entries[-1]["content"]
        assert report.startswith("Doctor:") and "All checks passed." in report
        assert "ok    shell sandbox: " in report  # the sandbox in use, or the fallback that applies
        await pilot.press(*"/policy mode strict", "enter")
        await pilot.pause()
        assert workspace.meta_path.read_text().count("approval_mode: strict") == 1
        assert "approvals strict" in app.sub_title
        assert app.session.gateway().mode == "strict"
        await pilot.press(*"/policy mode reckless", "enter")
        await messages.notified(pilot, "approval mode is one of")


def audit_rows(workspace: Workspace, tool: str) -> list[dict]:
    from services.audit.log import AuditStore

    with AuditStore.for_workspace(workspace.root) as audit:
        return [c for c in audit.calls(limit=50) if c["tool_name"] == tool]


async def test_switching_workspace_records_the_denial_of_a_waiting_call() -> None:
    workspace = make_workspace()
    WorkspaceManager().create("other")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt pending", "enter")
        await wait_for_pending(app, pilot)
        await app.open_workspace("other")
        await pilot.pause()
        assert app.workspace_name == "other"
    [row] = audit_rows(workspace, "builtin:fs:write_text")
    assert row["status"] == "denied" and row["rule_id"] == "approval.operator_denied"
    assert "workspace was switched" in (row.get("reason") or json.dumps(row, default=str))
    entries = [e for e in read_transcript(workspace.latest_transcript().path).entries if e["role"] == "tool"]
    assert [e["status"] for e in entries] == ["fail"]


async def test_quitting_with_a_waiting_call_asks_first_and_records_the_denial() -> None:
    from screens.confirm import ConfirmScreen

    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt pending", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)  # asked first
        await pilot.press("n")
        await pilot.pause()
        assert len(app.session.approvals.pending()) == 1  # still waiting
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: app.session is None, what="the session to close")
    [row] = audit_rows(workspace, "builtin:fs:write_text")
    assert row["status"] == "denied" and row["rule_id"] == "approval.operator_denied"
    entries = [e for e in read_transcript(workspace.latest_transcript().path).entries if e["role"] == "tool"]
    assert [e["status"] for e in entries] == ["fail"]
    assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"


async def test_explain_last_says_what_the_decision_meant() -> None:
    """``/policy explain-last`` says what ``confirm`` meant and what the operator did (issue 24)."""
    make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        said: list[str] = []
        for decide in (["a"], ["d", "enter"]):
            await pilot.press(*"/fs write notes.txt one", "enter")
            await wait_for_pending(app, pilot)
            await pilot.press("f4", "enter", *decide)
            await wait_for_tools(app, pilot)
            await until(pilot, lambda: app.session.approvals.pending() == [], what="the call decided")
            await pilot.press(*"/policy explain-last", "enter")
            await until(pilot, lambda: tool_entries(app) and "Last policy decision" in notice(app))
            said.append(notice(app).splitlines()[0])
            app.session.conversation.notice("-")  # the next explanation is a new notice
        assert said == [
            "Last policy decision: needed your approval (confirm): rule mode.guide.requires_approval"
            " — you allowed it once (mode guide)",
            "Last policy decision: needed your approval (confirm): rule mode.guide.requires_approval"
            " — you denied it (mode guide)",
        ]


def notice(app: AriesApp) -> str:
    assert app.session is not None
    last = read_transcript(app.session.conversation.transcript.path).entries[-1]
    return str(last["content"]) if last["role"] == "notice" else ""


async def test_the_operators_own_waiting_call_says_so_and_ctrl_x_cancels_it() -> None:
    """Issue 31 item 7: `/fs write` waiting for approval said nothing but a counting timer, and Ctrl+X did
    not cancel it. Now its row says "waiting for your approval — F4" and Ctrl+X cancels it (recorded)."""
    from widgets.status import WAITING_NOTE, RunStatus

    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt later", "enter")
        await wait_for_pending(app, pilot)
        status = app.screen.query_one(RunStatus)
        await until(pilot, lambda: WAITING_NOTE in status.render_items().plain, what="the waiting note")
        assert "builtin:fs:write_text" in status.render_items().plain
        await pilot.press("ctrl+x")
        await until(pilot, lambda: app.session is not None and app.session.approvals.pending() == [], what="no wait")
        await until(pilot, lambda: not status.running, what="the row gone")
        await settle(pilot)
        assert (workspace.root / "notes.txt").read_text() == "first line\nold line\n"
        [entry] = tool_entries(app)
        assert entry["output"]["error"]["type"] == "Cancelled"
