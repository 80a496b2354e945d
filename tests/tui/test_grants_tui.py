"""Lasting grants in the TUI: the approval modal's "always in this workspace" (w) with the rule shown
before the key is pressed and ``*`` to widen; after a restart the same call runs without a question;
``/grants`` lists it with its use count, ``/policy explain-last`` names it, ``/grants revoke ID`` ends it."""

from __future__ import annotations

from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from services.grants.proposal import from_words
from services.grants.store import GrantStore, identity
from services.settings.operator import GrantOrigin
from services.workspace.manager import Workspace
from services.workspace.transcripts import read_transcript
from tests.tui.helpers import settle, until
from tests.tui.test_approvals import SIZE, make_workspace, queue, wait_for_pending
from widgets.approvals.pane import ApprovalsPane


def notices(app: AriesApp) -> list[str]:
    assert app.session is not None
    entries = read_transcript(app.session.conversation.transcript.path).entries
    return [str(e["content"]) for e in entries if e["role"] == "notice"]


def tool_statuses(app: AriesApp) -> list[str]:
    assert app.session is not None
    entries = read_transcript(app.session.conversation.transcript.path).entries
    return [str(e["status"]) for e in entries if e["role"] == "tool"]


async def open_modal(app: AriesApp, pilot: Pilot[int]) -> ApprovalScreen:
    await wait_for_pending(app, pilot)
    app.screen.query_one(ApprovalsPane).focus_main()
    await pilot.pause()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ApprovalScreen), what="the approval modal")
    assert isinstance(app.screen, ApprovalScreen)
    return app.screen


async def test_always_then_restart_then_grants_explain_and_revoke() -> None:
    workspace = make_workspace()
    (workspace.root / "docs").mkdir()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/shell run ls docs", "enter")
        modal = await open_modal(app, pilot)
        shown = str(modal.query_one("#approval-always").render())
        assert "always in this workspace stores: builtin:shell:run  ls docs" in shown
        await pilot.press("asterisk")  # widen: ls *
        assert "builtin:shell:run  ls *" in str(modal.query_one("#approval-always").render())
        await pilot.press("asterisk")  # and back to the narrowest
        await pilot.press("w")
        await settle(pilot)
        assert tool_statuses(app) == ["success"]
    restarted = AriesApp("demo")
    async with restarted.run_test(size=SIZE) as pilot:
        await restarted.ready()
        await pilot.press(*"/shell run ls docs", "enter")
        await settle(pilot)
        assert restarted.session is not None and restarted.session.approvals.pending() == []
        assert tool_statuses(restarted) == ["success", "success"]  # the conversation goes on after a restart
        decision = restarted.session.gateway().last_decision()
        assert decision is not None and decision["approved_by"] == "operator_grant"
        await pilot.press(*"/grants", "enter")
        await pilot.pause()
        [listing] = [n for n in notices(restarted) if n.startswith("Grants")]
        grant_id = listing.split("\n")[1].split()[1]
        assert "workspace  builtin:shell:run  ls docs  · used 1x · by approval" in listing
        await pilot.press(*"/policy explain-last", "enter")
        await pilot.pause()
        assert f"decided by: grant {grant_id} (workspace): ls docs" in notices(restarted)[-1]
        await pilot.press(*f"/grants revoke {grant_id}", "enter")
        await pilot.pause()
        assert notices(restarted)[-1].startswith(f"Grant {grant_id} (workspace) revoked")
        await pilot.press(*"/shell run ls docs", "enter")
        await wait_for_pending(restarted, pilot)  # asked again


def grant_write_on_the_root(workspace: Workspace) -> None:
    store = GrantStore(identity(workspace))
    pattern = from_words(
        "builtin:fs:write_text", ("paths",), ".", roots=[workspace.root.resolve()], resolve=lambda name: None
    )
    store.add("builtin:fs:write_text", pattern, GrantOrigin(by="cli", at="2026-01-01T09:00:00.000Z"))


def test_modal_offers_always_and_names_grants_that_run_code_unasked(snap_compare) -> None:
    """You should see the approval modal for builtin:shell:run "make test" (exec-capable: it runs build
    recipes), and in its footer: what approving for the session covers; "always in this workspace
    stores: builtin:shell:run  make test" with the sentence saying exactly that command, as /usr/bin/make,
    in ${workspace}; a red "runs code unasked" line (make runs the Makefile in ${workspace}, which a
    lasting write grant lets tools write unasked); and the keys a, s, w, *, d, Esc."""
    workspace = make_workspace()
    grant_write_on_the_root(workspace)
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=queue("/shell run make test", open_first=True))
