"""Ctrl+Q from every modal screen: it asks (a call waits for approval) as it does from the main screen.

A modal screen hides the App's own keys (Textual cuts the key chain at the modal); Ctrl+Q is a
priority binding of the App, so it reaches the App from any of them. The test opens each modal
screen of ``screens/`` in turn over a session with a call waiting, presses Ctrl+Q and expects the quit
question; a modal added later without a factory here fails the test.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from textual.screen import ModalScreen, Screen

import screens
from app.aries_app import AriesApp
from screens.approval import ApprovalScreen
from screens.audit_row import AuditRowScreen
from screens.chunk_viewer import ChunkViewer
from screens.cloud_send import CloudSendScreen
from screens.confirm import ConfirmScreen
from screens.context_file_viewer import ContextFileViewer
from screens.context_trace import ContextTraceScreen
from screens.conversations import ConversationsScreen
from screens.help import HelpScreen
from screens.history_search import HistorySearchScreen
from screens.profile_viewer import ProfileViewer
from screens.rewind import RewindScreen
from screens.trust import TrustScreen
from screens.workspace_switcher import WorkspaceSwitcher
from services.context.uri import parse_uri
from services.history_search.query import SearchResult
from services.history_search.store import Coverage
from services.retrieval.models import ChunkView
from services.session.rewind import RewindPlan
from services.trust.records import review_authority, workspace_trust
from services.trust.review import review
from services.workspace.bridge_config import BridgeConfig
from tests.tui.helpers import until
from tests.tui.test_approvals import SIZE, make_workspace, wait_for_pending
from widgets.context_tree.preview import FileText
from widgets.context_tree.tree import NodeInfo


def modal_classes() -> set[type[ModalScreen[object]]]:
    """Every modal screen class defined in the ``screens`` package."""
    for module in pkgutil.iter_modules(screens.__path__):
        importlib.import_module(f"screens.{module.name}")
    found: set[type[ModalScreen[object]]] = set()
    pending: list[type] = [ModalScreen]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("screens."):
                found.add(sub)
    return found


def factories(app: AriesApp, root: Path) -> dict[type, Callable[[], Screen[object]]]:
    assert app.session is not None
    [request] = app.session.approvals.pending()
    chunk = ChunkView(
        "h1", "docs", "c1", "text", "", "a.md", str(root), "text/markdown", None, None, None, 0, 4, "ab12", "none", 0
    )  # fmt: skip
    after, before = review_authority(root)
    return {
        ApprovalScreen: lambda: ApprovalScreen(request, root=root),
        AuditRowScreen: lambda: AuditRowScreen({"tool": "builtin:fs:read_text", "status": "ok"}),
        ChunkViewer: lambda: ChunkViewer(chunk),
        CloudSendScreen: lambda: CloudSendScreen("a question", BridgeConfig()),
        ConfirmScreen: lambda: ConfirmScreen("Drop the index?", "It is rebuilt on the next search."),
        ContextFileViewer: lambda: ContextFileViewer(
            NodeInfo(parse_uri("axiom://resources/notes.txt"), "file", 20, True), FileText("first line\n")
        ),
        ContextTraceScreen: lambda: ContextTraceScreen({"question": "q", "passages": []}),
        ConversationsScreen: lambda: ConversationsScreen([], "demo", ""),
        HelpScreen: lambda: HelpScreen([("ctrl+q", "Quit", "Leave Aries")]),
        HistorySearchScreen: lambda: HistorySearchScreen(SearchResult("q", [], Coverage(0, 0)), "demo"),
        ProfileViewer: lambda: ProfileViewer("guide", "profiles/guide.yaml", "built in", "mode: guide\n"),
        RewindScreen: lambda: RewindScreen(RewindPlan("c-1", "c-1-t0001", "c-1-t0003", [2, 3], [])),
        TrustScreen: lambda: TrustScreen("demo", workspace_trust(root), review(after, before)),
        WorkspaceSwitcher: lambda: WorkspaceSwitcher(["demo"], "demo"),
    }


async def test_ctrl_q_asks_to_quit_from_every_modal_screen() -> None:
    """Each modal open over a waiting call: Ctrl+Q shows the quit question; Ctrl+Q on the question asks
    nothing more; "n" keeps Aries running. Then, from a modal, Ctrl+Q and "y" quit."""
    workspace = make_workspace()
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"/fs write notes.txt pending", "enter")
        await wait_for_pending(app, pilot)
        made = factories(app, workspace.root)
        assert set(made) == modal_classes(), "a modal screen without a factory in this test"
        for cls, make in sorted(made.items(), key=lambda item: item[0].__name__):
            base = len(app.screen_stack)
            await app.push_screen(make())
            await pilot.pause()
            assert isinstance(app.screen, cls)
            await pilot.press("ctrl+q")
            await until(pilot, lambda: getattr(app.screen, "asks_to_quit", False), what=f"the question over {cls}")
            await pilot.press("ctrl+q")
            await pilot.pause()
            assert len(app.screen_stack) == base + 2, cls  # one question, not two
            await pilot.press("n")
            await until(pilot, lambda cls=cls: isinstance(app.screen, cls), what=f"{cls} back")
            app.pop_screen()
            await until(pilot, lambda base=base: len(app.screen_stack) == base, what=f"{cls} closed")
        await app.push_screen(HelpScreen([]))
        await pilot.press("ctrl+q")
        await until(pilot, lambda: getattr(app.screen, "asks_to_quit", False), what="the question")
        await pilot.press("y")
        await until(pilot, lambda: app.session is None, what="the session to close")
    assert app.return_code == 0
