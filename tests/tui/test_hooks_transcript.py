"""A tool call's hooks in the transcript (issue 31 item 5): the header names the before hook that
denied a call, and one line says what the after hooks did (what reached the model, what failed)."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widgets import Static

from widgets.transcript.tool_call import ToolCallBlock


class Harness(App[None]):
    def __init__(self, *widgets: Any) -> None:
        super().__init__()
        self._widgets = widgets

    def compose(self) -> Any:
        yield from self._widgets


def block_text(block: ToolCallBlock) -> str:
    return "\n".join(str(static.render()) for static in block.query(Static))


def _entry(error: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    data = None if error else {"exit_code": 0, "stdout": "hi\n", "stderr": ""}
    return {
        "role": "tool",
        "tool_name": "builtin:shell:run",
        "input": {"argv": ["rm", "x"] if error else ["echo", "hi"]},
        "status": "fail" if error else "success",
        "duration_ms": 12,
        "timestamp": "2026-01-01T09:00:03.000Z",
        "output": {"status": "error" if error else "ok", "data": data, "error": error, "meta": meta},
    }


async def test_the_hooks_of_a_call_are_shown_on_its_block() -> None:
    denied = _entry(
        {
            "type": "PolicyDenied",
            "message": "denied by hook no-rm: use the trash",
            "retryable": False,
            "details": {"rule": "hooks.before.no-rm", "hook": "no-rm"},
        }
    )
    after = [
        {"hook": "status", "when": "after", "outcome": "ran", "message": "hook status exited 0"},
        {"hook": "lint", "when": "after", "outcome": "failed", "message": "hook lint failed: it exited 3"},
        {"hook": "log", "when": "after", "outcome": "ran", "message": "hook log exited 0"},
    ]
    ran = _entry(hooks=after, hook_context=[{"hook": "status", "text": "M a.txt\n?? b.txt\n"}])
    plain = _entry()
    blocks = [ToolCallBlock(denied), ToolCallBlock(ran), ToolCallBlock(plain)]
    async with Harness(*blocks).run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "✗ denied by hook no-rm" in block_text(blocks[0])
        assert "hooks: status gave the model 2 lines · lint failed · log ran" in block_text(blocks[1])
        assert not blocks[0].query(".tool-hooks") and not blocks[2].query(".tool-hooks")
        assert [s for s in blocks[1].query(Static) if s.has_class("tool-hooks")]
