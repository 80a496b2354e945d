"""The panes subscribe (issue 29, item 2): the App forwards no pane message, a pane of a closed
session hears nothing, news posted from a thread reaches the panes on the UI thread, and an exception
in a pane's callback fails the test instead of being logged."""

from __future__ import annotations

import ast
import inspect
import subprocess
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Label, Static

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import panes_show, until
from widgets.artifacts.pane import ArtifactsPane
from widgets.context.pane import ContextPane
from widgets.messages import ArtifactsChanged, HitsFound
from widgets.signals import ROUTES, SessionSignals, follow_sessions

SIZE = (160, 48)
REPO = Path(__file__).resolve().parents[2]
HITS = [{"rank": 1, "handle": "docs:abc", "source_path": "a.md", "score": 0.5}]
HANDING_ON = {"publish", "post", "post_message", "relay", "_to_panes", "call_next", "call_later"}
"""Calls through which a handler would hand the message it handles on to a pane."""


def forwarding_handlers(cls: type) -> list[str]:
    """The message handlers of ``cls`` (``@on`` methods, ``on_*`` methods) that handle a pane message
    (one of the session signals' ``ROUTES``) or hand what they handle on to a pane."""
    pane_handler_names = {kind.handler_name for kind in ROUTES}
    found = []
    for name, member in vars(cls).items():
        if not callable(member):
            continue
        handled = [kind for kind, _ in getattr(member, "_textual_on", [])]
        if not handled and not name.startswith(("on_", "_on_")):
            continue
        if name in pane_handler_names or set(handled) & set(ROUTES):
            found.append(f"{name}: handles a pane message")
            continue
        parameters = list(inspect.signature(member).parameters)[1:2]  # the message (or event) handled
        tree = ast.parse(textwrap.dedent(inspect.getsource(member)))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not parameters:
                continue
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            passed = {
                n.id
                for arg in [*node.args, *(k.value for k in node.keywords)]
                for n in ast.walk(arg)
                if isinstance(n, ast.Name)
            }
            if called in HANDING_ON and parameters[0] in passed:
                found.append(f"{name}: hands {parameters[0]} to {called}")
    return found


def test_the_app_forwards_no_pane_message() -> None:
    assert forwarding_handlers(AriesApp) == []


def test_the_check_finds_a_forwarding_handler() -> None:
    """The check above can fail: a relay in the old shape is found, by decorator and by name."""
    from dataclasses import replace

    from textual import on
    from textual.app import App

    class Switchboard(App[None]):
        @on(HitsFound)
        def _hits(self, message: HitsFound) -> None:
            pass

        def on_artifacts_changed(self, message: ArtifactsChanged) -> None:
            pass

        def on_key(self, event: Any) -> None:
            self.screen.query_one("#context").post_message(replace(event))

    assert [line.split(":")[0] for line in forwarding_handlers(Switchboard)] == [
        "_hits",
        "on_artifacts_changed",
        "on_key",
    ]


def test_no_relay_is_left() -> None:
    """``grep -rn "_to_panes\\|def relay" app screens widgets`` finds nothing."""
    found = subprocess.run(
        ["grep", "-rn", r"_to_panes\|def relay", "app", "screens", "widgets"], cwd=REPO, capture_output=True, text=True
    )
    assert found.stdout == ""


def caption(app: AriesApp) -> str:
    labels = list(app.screen.query_one(ContextPane).query("#context-caption"))
    return str(labels[0].render()) if labels and isinstance(labels[0], Label) and labels[0].display else ""


async def test_a_closed_session_is_heard_by_nobody() -> None:
    """After a switch, what is posted to the old session's signals (or names the old session) reaches
    no pane; the new session's news does, from the UI thread or from a worker thread."""
    WorkspaceManager().create("alpha")
    WorkspaceManager().create("beta")
    app = AriesApp("alpha")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await panes_show(pilot, "alpha")
        old = app.signals.current
        assert old is not None and old.retrieval.subscribers
        assert await app.open_workspace("beta")
        await panes_show(pilot, "beta")
        assert old.closed and old.retrieval.subscribers == [] and old.turn.subscribers == []
        old.post(HitsFound("from alpha", HITS))
        app.publish(ArtifactsChanged(old.session, select="nothing"))  # names the closed session
        await pilot.pause()
        assert "from alpha" not in caption(app)
        thread = threading.Thread(target=app.publish, args=(HitsFound("from a thread", HITS),))
        thread.start()
        thread.join()
        await until(pilot, lambda: "from a thread" in caption(app))
        assert app.screen.query_one(ArtifactsPane).border_subtitle == ""


class BrokenPane(Static):
    """A pane with a bug in what it does with the news it follows."""

    def __init__(self, *, fail_showing: str = "") -> None:
        super().__init__("")
        self.fail_showing = fail_showing  # the workspace it fails to show

    def on_mount(self) -> None:
        follow_sessions(self, self._shown)

    def _shown(self, signals: SessionSignals) -> None:
        if signals.name == self.fail_showing:
            raise RuntimeError("a pane's bug when shown")
        signals.retrieval.subscribe(self, self._retrieval)

    def _retrieval(self, message: Any) -> None:
        raise RuntimeError("a pane's bug in its callback")


async def test_an_exception_in_a_pane_callback_fails_the_test() -> None:
    app = AriesApp()
    with pytest.raises(RuntimeError, match="a pane's bug in its callback"):
        async with app.run_test(size=SIZE) as pilot:
            await app.ready()
            await app.screen.mount(BrokenPane())
            await pilot.pause()
            app.publish(HitsFound("anything", HITS))
            await pilot.pause()


async def test_an_exception_when_a_pane_shows_a_session_fails_the_test() -> None:
    """The one immediate subscription (``SessionHub.opened``) hands its exception to the App too."""
    WorkspaceManager().create("alpha")
    app = AriesApp()
    with pytest.raises(RuntimeError, match="a pane's bug when shown"):
        async with app.run_test(size=SIZE) as pilot:
            await app.ready()
            await app.screen.mount(BrokenPane(fail_showing="alpha"))
            await pilot.pause()
            await app.open_workspace("alpha")
            await pilot.pause()
