"""The TUI tells the operator when the ONNX encoder is being prepared (its first export, once per
machine), and an export that fails is one error naming the way around it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.aries_app import AriesApp
from services.retrieval.embedders_onnx import FIX, PREPARING, cache_key
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, settle

pytestmark = pytest.mark.slow  # the real embedding model

SIZE = (160, 48)


async def test_tui_says_the_encoder_is_being_prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nHerons wade in shallow water.\n", encoding="utf-8")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / cache_key()).write_text("not a folder", encoding="utf-8")  # the export cannot write there
    monkeypatch.setenv("AXIOMME_EMBEDDER", "sentence-transformers")
    monkeypatch.delenv("AXIOMME_EMBEDDER_BACKEND", raising=False)  # auto: new indexes are fp32 onnx
    monkeypatch.setenv("AXIOMME_EMBEDDER_CACHE", str(cache))
    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    recorder = Messages()
    async with app.run_test(size=SIZE, message_hook=recorder) as pilot:
        await pilot.press(*f"/rag index add {folder} --name docs", "enter")
        await recorder.notified(pilot, FIX, timeout=20)
        await settle(pilot)
        messages = [n.message for n in recorder.notifications()]
        assert any(PREPARING in m for m in messages), messages
        failures = [m for m in messages if FIX in m]
        assert len(failures) == 1 and "ONNX model cache" in failures[0], messages
        screen = app.screen_stack[0]
        assert screen is not None and "onnx-export" not in screen.run_status.running  # the status line is gone
