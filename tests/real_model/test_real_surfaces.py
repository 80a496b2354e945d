"""What an operator sees with the real engine: the answer streamed into the TUI (template tokens the
model writes shown as text), Ctrl+X in the middle of it, and ``aries ask`` (``--continue``) headless."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from app.aries_app import AriesApp
from tests.real_model.helpers import TEMPLATE_TOKEN, aries, real_workspace, screen_text
from tests.real_model.llama_server import LlamaServer
from tests.tui.helpers import settle, until

pytestmark = pytest.mark.timeout(600)
SIZE = (160, 48)


async def wait_until(pilot: Pilot[Any], check: Any, seconds: float = 240.0) -> None:
    """``check`` re-checked after each barrier (every queued message handled), never after a fixed
    pause; the real model is slow on a loaded machine, hence the long timeout."""
    await until(pilot, check, timeout=seconds)


def entries(app: AriesApp) -> list[dict[str, Any]]:
    assert app.session is not None
    return app.session.conversation.read().entries


async def test_a_streamed_answer_in_the_tui_shows_template_tokens_as_text(
    llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in llama_server.env("gemma").items():
        monkeypatch.setenv(key, value)
    real_workspace("tui", models={"openai:gemma": {"max_tokens": 40}}).close()
    app = AriesApp("tui")
    deltas: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        from services.assistant.events import TextDelta
        from widgets.messages import TurnEvent

        def heard(message: TurnEvent) -> None:  # what the panes hear, piece by piece, on the UI thread
            if isinstance(message.event, TextDelta):
                deltas.append(message.event.text)

        assert app.signals.current is not None
        app.signals.current.turn.subscribe(app.screen, heard)
        await pilot.press(*"Summarise the passages.", "enter")
        from widgets.transcript.streaming import StreamingAnswer

        await wait_until(pilot, lambda: bool(app.screen.query(StreamingAnswer)))
        widget = app.screen.query_one(StreamingAnswer)
        await wait_until(pilot, lambda: not app.commands.assistant.running)
        await settle(pilot)
        answer = [e for e in entries(app) if e["role"] == "assistant"][-1]["content"]
        shown = screen_text(app)
    assert answer and widget.text == answer
    # It reached the screen piece by piece (streamed, not shown at the end): counted from the deltas the
    # panes were told, not by polling the widget (a loaded machine polls too rarely to see it grow).
    assert len([d for d in deltas if d]) > 2 and "".join(deltas).strip() == answer.strip()
    tokens = TEMPLATE_TOKEN.findall(answer)
    assert tokens, f"the model wrote no template token this time: {answer!r}"
    for token in tokens:
        assert token in shown, (token, shown)


async def test_ctrl_x_cancels_mid_stream_and_the_next_turn_works(
    llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in llama_server.env("gemma").items():
        monkeypatch.setenv(key, value)
    real_workspace("cancel", models={"openai:gemma": {"max_tokens": 400}}).close()
    app = AriesApp("cancel")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press(*"Tell me a very long story.", "enter")
        from widgets.transcript.streaming import StreamingAnswer

        await wait_until(pilot, lambda: any(w.text for w in app.screen.query(StreamingAnswer)))
        await pilot.press("ctrl+x")
        await wait_until(pilot, lambda: not app.commands.assistant.running, 60)
        cancelled = [e for e in entries(app) if e.get("title") == "cancelled"]
        assert len(cancelled) == 1 and "while the model was answering" in cancelled[0]["content"]
        assert not [e for e in entries(app) if e["role"] == "assistant"]
        # The server noticed the client went away and answers the next turn.
        app.session.workspace.update(models={"openai:gemma": {"max_tokens": 8}})  # type: ignore[union-attr]
        await pilot.press(*"Hello again.", "enter")
        await wait_until(pilot, lambda: any(e["role"] == "assistant" for e in entries(app)))
        assert not [e for e in entries(app) if e.get("level") == "error"]


def test_aries_ask_and_continue_headless(llama_server: LlamaServer, aries_home: Path, tmp_path: Path) -> None:
    real_workspace("cli", models={"openai:gemma": {"max_tokens": 16}}, index=True, docs_dir=tmp_path / "docs").close()
    env = llama_server.env("gemma")
    first = aries("-w", "cli", "ask", "--json", "What is Tantivy?", home=aries_home, env=env)
    assert first.returncode == 0, first.stderr
    response = json.loads(first.stdout)
    assert response["answer"].strip() and response["model"] == "openai:gemma"
    assert response["provenance"]["local"] and response["index"] == "docs"
    if response["finish_reason"] == "length":
        assert "length limit" in first.stderr
    second = aries("-w", "cli", "ask", "--continue", "--json", "And what is it written in?", home=aries_home, env=env)
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert again["conversation_id"] == response["conversation_id"] and again["turn_id"].endswith("-t0002")
    plain = aries("-w", "cli", "ask", "-c", "Thanks.", home=aries_home, env=env)
    assert plain.returncode == 0 and "provenance:" in plain.stdout
    listed = json.loads(aries("-w", "cli", "history", "--json", home=aries_home, env=env).stdout)
    assert [(row["turns"], row["model"]) for row in listed] == [(3, "openai:gemma")]
