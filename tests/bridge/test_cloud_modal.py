"""The ``ask`` modal: it shows exactly the redacted text, and only Send lets it leave."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widgets import Static

from screens.cloud_send import CloudSendScreen, modal_approver
from services.bridge import maybe_ask_cloud
from tests.bridge.conftest import ENV, RecordingCloud, config_for
from tests.tui.helpers import until

QUESTION = "Why does jane.doe@acme-corp.com get a 403 from /home/jane/app/run.py under Bluebird?"
SENT = "Why does [REDACTED:email#1] get a 403 from [REDACTED:path#1] under [REDACTED:project#1]?"


class Host(App[None]):
    pass


async def _ask(cloud: RecordingCloud, key: str) -> tuple[Any, list[str]]:
    app = Host()
    config = config_for(cloud, "ask")
    shown: list[str] = []
    async with app.run_test() as pilot:
        task = app.run_worker(
            maybe_ask_cloud(QUESTION, 0.0, config, modal_approver(app.push_screen, config), environ=ENV)
        )
        await until(pilot, lambda: isinstance(app.screen, CloudSendScreen), what="the send modal")
        shown.append(str(app.screen.query_one("#cloud-send-text", Static).render()))
        assert {b.id for b in CloudSendScreen.BINDINGS if hasattr(b, "id")} >= {"cloud.send", "cloud.dont_send"}
        assert all(getattr(b, "tooltip", "") for b in CloudSendScreen.BINDINGS)
        await pilot.press(key)
        await task.wait()
        return task.result, shown


async def test_dont_send_sends_nothing(cloud: RecordingCloud) -> None:
    result, shown = await _ask(cloud, "n")
    assert result is None and shown == [SENT]
    assert cloud.requests == []


async def test_send_sends_exactly_what_was_shown(cloud: RecordingCloud) -> None:
    cloud.answer(1, "Check the file permissions.")
    result, shown = await _ask(cloud, "s")
    assert result is not None and result.text == "Check the file permissions."
    assert shown == [SENT] and cloud.user_messages() == [SENT]
