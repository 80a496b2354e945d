"""The operator's terminal settings (issue 34, items 3 and 4): the bell when a call starts waiting for
approval or a long turn ends, an opt-in desktop notification with fixed text, and ``/theme`` (Textual's
themes and Aries's high-contrast one) — both kept in the operator's settings store and applied at start.

The bell is counted by a test App whose ``bell`` records each ring (Textual's headless driver writes
nothing); everything that decides to ring is the product's own path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import aries_app
from app.aries_app import AriesApp
from services.settings.operator import SETTINGS_FILE, Notifications, load_settings, settings_path, update_settings
from services.workspace.manager import Workspace
from tests.models.servers import Reply, ScriptedServer
from tests.tui.helpers import Messages, command, settle, until
from tests.tui.test_approvals import make_workspace, wait_for_pending
from tests.tui.test_assistant_tui import server, workspace  # noqa: F401 - fixtures
from widgets.attention import DESKTOP_TEXT, desktop_sequence
from widgets.themes import HIGH_CONTRAST, saved_theme, theme_names
from widgets.themes import SETTINGS_FILE as THEMES_SETTINGS_FILE

SIZE = (120, 36)


class Ringing(AriesApp):
    """Counts the bell (the headless driver has no terminal to write it to)."""

    CSS_PATH = [str(Path(aries_app.__file__).parent / path) for path in AriesApp.CSS_PATH]  # as AriesApp's
    rings = 0

    def bell(self) -> None:
        self.rings += 1
        super().bell()


@pytest.fixture
def notifying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARIES_NOTIFY")  # the suite sets it off


async def test_a_call_waiting_for_approval_rings_the_bell(notifying: None) -> None:
    make_workspace()
    app = Ringing("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/fs write notes.txt new text")
        await wait_for_pending(app, pilot)
        await pilot.pause()
        assert app.rings == 1
        await command(pilot, "/fs write notes.txt other text")
        await wait_for_pending(app, pilot, 2)
        await pilot.pause()
        assert app.rings == 2  # one per call that starts waiting, not per change of the queue


async def test_no_bell_when_the_operator_turned_it_off_or_in_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    make_workspace()
    app = Ringing("demo")
    async with app.run_test(size=SIZE) as pilot:  # ARIES_NOTIFY=off, as the suite sets it
        await app.ready()
        await command(pilot, "/fs write notes.txt new text")
        await wait_for_pending(app, pilot)
        await pilot.pause()
        assert app.rings == 0
    monkeypatch.delenv("ARIES_NOTIFY")
    update_settings(
        lambda s: s.model_copy(update={"notifications": s.notifications.model_copy(update={"bell": False})})
    )
    app = Ringing("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/fs write notes.txt other text")
        await wait_for_pending(app, pilot)  # the first App's call was denied when it closed
        await pilot.pause()
        assert app.rings == 0


async def rings_after_one_turn() -> int:
    app, messages = Ringing("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await command(pilot, "how are tool calls approved?")
        await until(pilot, lambda: bool(app.screen.query("StreamingAnswer")), messages=messages)
        await until(pilot, lambda: not app.commands.assistant.running, what="the turn to end", messages=messages)
        await settle(pilot)
        return app.rings


async def test_a_long_turn_rings_when_it_ends_a_short_one_does_not(
    notifying: None,
    server: ScriptedServer,  # noqa: F811 - the fixture of test_assistant_tui
    workspace: Workspace,  # noqa: F811
) -> None:
    server.add(Reply(text="Quick."), Reply(text="Long enough."))
    assert await rings_after_one_turn() == 0  # under the default 5 s
    update_settings(lambda s: s.model_copy(update={"notifications": Notifications(long_turn_seconds=0.0)}))
    assert await rings_after_one_turn() == 1  # every turn is long now


async def test_notify_shows_and_keeps_the_settings() -> None:
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await command(pilot, "/notify desktop on")
        await messages.notified(pilot, "Desktop notification on")
        assert load_settings().notifications.desktop and app.attention.current().desktop
        await command(pilot, "/notify bell off")
        await messages.notified(pilot, "Bell off")
        assert not load_settings().notifications.bell
        mark = messages.mark()
        await command(pilot, "/notify bell loud")
        assert "on|off" in await messages.notified(pilot, "/notify", since=mark)


def test_the_desktop_notification_is_fixed_text_in_the_terminals_sequence() -> None:
    assert desktop_sequence("approval", {}) == f"\x1b]9;Aries: {DESKTOP_TEXT['approval']}\x1b\\"
    assert desktop_sequence("turn", {"TERM": "foot"}) == f"\x1b]777;notify;Aries;{DESKTOP_TEXT['turn']}\x1b\\"
    wrapped = desktop_sequence("turn", {"TMUX": "/tmp/tmux-0/default,1,0"})
    assert wrapped.startswith("\x1bPtmux;\x1b\x1b]9;") and wrapped.endswith("\x1b\x1b\\\x1b\\")
    for text in DESKTOP_TEXT.values():
        assert text.isprintable() and ";" not in text


async def test_theme_lists_uses_keeps_and_is_applied_at_start() -> None:
    assert THEMES_SETTINGS_FILE == SETTINGS_FILE and "textual-light" in theme_names()
    assert HIGH_CONTRAST.name in theme_names()
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        assert app.theme == "textual-dark"
        await command(pilot, "/theme")
        await until(pilot, lambda: "aries-high-contrast  (high contrast)" in _notices(app), messages=messages)
        assert "● textual-dark  (dark)" in _notices(app) and "  textual-light  (light)" in _notices(app)
        await command(pilot, "/theme textual-light")
        await messages.notified(pilot, "kept for every workspace")
        assert app.theme == "textual-light" and load_settings().theme == "textual-light"
        mark = messages.mark()
        await command(pilot, "/theme plaid")
        await messages.notified(pilot, "no theme 'plaid'", since=mark)
        assert app.theme == "textual-light"
    assert saved_theme() == "textual-light"
    again = AriesApp("demo")
    async with again.run_test(size=SIZE) as pilot:
        assert again.theme == "textual-light"  # before the workspace opens: the first frame is light
        await again.ready()


async def test_a_damaged_settings_file_starts_in_the_default_theme_and_is_left_alone() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"theme": "textual-light", ', encoding="utf-8")
    app, messages = AriesApp("demo"), Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        assert app.theme == "textual-dark"
        await command(pilot, "/theme nord")
        await messages.notified(pilot, "fix or remove the file")
    assert path.read_text(encoding="utf-8") == '{"theme": "textual-light", '


def _notices(app: AriesApp) -> str:
    assert app.session is not None
    entries = app.session.conversation.read().entries
    return "\n".join(str(e.get("content", "")) for e in entries if e.get("role") == "notice")


def test_settings_file_json_is_what_start_up_reads(tmp_path: Path) -> None:
    path = tmp_path / SETTINGS_FILE
    path.write_text(json.dumps({"format": 1, "theme": HIGH_CONTRAST.name}), encoding="utf-8")
    assert saved_theme(path) == HIGH_CONTRAST.name
    path.write_text(json.dumps({"format": 1, "theme": "no-such-theme"}), encoding="utf-8")
    assert saved_theme(path) is None


async def test_risk_colours_follow_the_theme() -> None:
    """A tier's colour is the theme's (dark and light differ), with the fixed style only without a theme."""
    from widgets.toolinfo import TIER_STYLES, tier_style

    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        dark = tier_style("WRITE_DESTRUCTIVE", app.theme_variables)
        app.theme = "textual-light"
        await pilot.pause()
        light = tier_style("WRITE_DESTRUCTIVE", app.theme_variables)
    assert dark.startswith("bold #") and light.startswith("bold #") and dark != light
    assert tier_style("WRITE_DESTRUCTIVE") == TIER_STYLES["WRITE_DESTRUCTIVE"] and tier_style("UNKNOWN", {}) == ""
