"""Widgets on their own: tool result blocks, the run status line, the Context pane API, header, palette."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console
from textual.app import App
from textual.widgets import Static

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.helpers import Messages, palette_offers, until
from widgets.context.pane import ContextPane
from widgets.header import WorkbenchHeader, subtitle
from widgets.status import RunStatus
from widgets.transcript.tool_call import ToolCallBlock, render_body


def text_of(renderable: Any, width: int = 100) -> str:
    console = Console(width=width, record=True, file=StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def block_text(block: ToolCallBlock) -> str:
    return "\n".join(text_of(static.content) for static in block.query(Static))


class Harness(App[None]):
    def __init__(self, *widgets: Any) -> None:
        super().__init__()
        self._widgets = widgets

    def compose(self) -> Any:
        yield from self._widgets


def tool_entry(tool: str, args: dict[str, Any], data: Any = None, error: Any = None, **meta: Any) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_name": tool,
        "input": args,
        "status": "fail" if error else "success",
        "duration_ms": 1234,
        "timestamp": "2026-01-01T09:00:03.000Z",
        "call_id": "call-1",
        "output": {"status": "error" if error else "ok", "data": data, "error": error, "meta": meta},
    }


LISTING = tool_entry(
    "builtin:fs:list_dir",
    {"path": "docs"},
    {
        "path": "/w/docs",
        "root": "/w",
        "entries": [
            {"path": f"f{n:02d}.md", "name": f"f{n:02d}.md", "type": "file", "size": 10 * n} for n in range(60)
        ],
        "count": 60,
        "hidden_by_policy": 0,
    },
)
WROTE = {
    "path": "a.txt",
    "bytes_written": 3,
    "created": True,
    "sha256": "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4",
}


# -- ToolCallBlock ---------------------------------------------------------------------------------
async def test_a_long_listing_is_collapsed_and_expands_in_place_with_enter_and_click() -> None:
    block = ToolCallBlock(LISTING)
    app = Harness(block)
    async with app.run_test(size=(100, 40)) as pilot:
        block.focus()
        await pilot.pause()
        shown = block_text(block)
        assert "f07.md" in shown and "f08.md" not in shown
        assert "52 more entries: Enter expands" in shown
        assert "fs:list_dir" in shown and "docs" in shown and "1.2 s" in shown
        await pilot.press("enter")
        await pilot.pause()
        assert block.expanded and "f59.md" in block_text(block) and "more entries" not in block_text(block)
        await pilot.press("space")
        await pilot.pause()
        assert not block.expanded
        await pilot.click(ToolCallBlock)
        await pilot.pause()
        assert block.expanded


async def test_short_results_are_not_collapsible() -> None:
    entry = tool_entry("builtin:fs:write_text", {"path": "a.txt", "text": "hi\n"}, WROTE)
    block = ToolCallBlock(entry)
    async with Harness(block).run_test() as pilot:
        block.focus()
        await pilot.press("enter")
        assert not block.collapsible and not block.expanded
        assert "created a.txt" in block_text(block)
        assert "kept:" not in block_text(block)  # no artifacts on this entry: no line for them


async def test_a_write_block_names_the_artifacts_it_kept() -> None:
    entry = tool_entry("builtin:fs:write_text", {"path": "a.txt", "text": "hi\n"}, WROTE)
    entry["artifacts"] = [  # the registry keeps identical content once: the before is named "x.after"
        {"name": "x.after", "role": "snapshot", "path": "/w/notes/a.txt"},
        {"name": "a.txt.after", "role": "after", "path": "/w/notes/a.txt"},
        {"name": "a.txt.diff", "role": "diff", "path": "/w/notes/a.txt\x1b[31m"},  # from disk: neutralised
        {"name": "page.html", "role": "body"},
    ]
    block = ToolCallBlock(entry)
    async with Harness(block).run_test(size=(100, 10)):
        shown = block_text(block)
        assert "kept: a.txt before · after;  a.txt" in shown and "diff;  page.html page" in shown, shown
        assert "(F5 Artifacts)" in shown
        assert "\x1b" not in shown


def test_text_results_are_text_not_json() -> None:
    stdout = "line one\nline two\n\x1b[31mred\x1b[0m"
    ran = {"exit_code": 0, "stdout": stdout, "stderr": "", "stdout_bytes": 28, "stderr_bytes": 0, "process_id": "p1-a"}
    entry = tool_entry("builtin:shell:run", {"argv": ["echo", "hi"]}, {**ran, "cleaned_up": []})
    shown = text_of(render_body(entry, None).renderable)
    assert "line one\nline two" in shown and "\\n" not in shown.replace("\\x1b", "")
    assert "\\x1b[31mred" in shown and "\x1b" not in shown  # the escape is visible, not executed
    assert "exit 0" in shown
    text = "# Title\n\nbody [/x]"
    read = tool_entry(
        "builtin:fs:read_text",
        {"path": "a.md"},
        {"path": "a.md", "text": text, "encoding": "utf-8", "size": 17, "offset": 0},
    )
    assert text_of(render_body(read, None).renderable).splitlines()[:3] == ["# Title", "", "body [/x]"]


def test_an_output_that_does_not_fit_its_model_shows_its_raw_json() -> None:
    """An older version's output is shown as the JSON it is, never a crash; one whose data is not in the
    entry (cut for size, an attachment's text stored in its message) says so in a line."""
    older = tool_entry("builtin:shell:run", {"argv": ["echo", "hi"]}, {"exit_code": 0, "stdout": "hi\n", "pid": 7})
    shown = text_of(render_body(older, None).renderable)
    assert '"stdout": "hi\\n"' in shown and '"pid": 7' in shown and "exit 0" not in shown
    cut = tool_entry("builtin:fs:read_text", {"path": "a.md"}, {"omitted": "too large for the transcript"})
    assert text_of(render_body(cut, None).renderable).strip() == "(too large for the transcript)"
    listed = tool_entry("builtin:fs:list_dir", {"path": "docs"}, [1, 2])
    assert "1" in text_of(render_body(listed, None).renderable)


def test_errors_show_type_message_and_rule() -> None:
    error = {
        "type": "PolicyDenied",
        "message": "denied by the operator: not today",
        "details": {"rule": "approval.operator_denied", "policy_rule": "mode.guide.requires_approval"},
    }
    entry = tool_entry("builtin:shell:run", {"argv": ["rm", "-rf", "x"]}, error=error)
    shown = text_of(render_body(entry, None).renderable)
    assert "PolicyDenied: denied by the operator: not today" in shown
    assert "approval.operator_denied" in shown and "mode.guide.requires_approval" in shown


def test_search_results_web_pages_and_patches_by_kind() -> None:
    search = tool_entry(
        "builtin:web:search",
        {"query": "aries"},
        {
            "query": "aries",
            "endpoint": "http://127.0.0.1/search",
            "results": [{"title": "Aries [b]", "url": "http://127.0.0.1/a", "snippet": "first", "engine": "x"}],
            "artifact_id": "abc",
            "citation": "web:abc",
        },
    )
    shown = text_of(render_body(search, None).renderable)
    assert "Aries [b]" in shown and "http://127.0.0.1/a" in shown and "first" in shown
    page = tool_entry(
        "builtin:web:extract",
        {"artifact_id": "abc"},
        {
            "artifact_id": "abc",
            "citation": "web:abc",
            "title": "Page",
            "text": "Heading\n\nBody",
            "chars": 13,
            "truncated": False,
            "source_url": "http://127.0.0.1/p",
        },
    )
    assert text_of(render_body(page, None).renderable).splitlines()[:4] == [
        "Page",
        "http://127.0.0.1/p",
        "artifact abc",
        "Heading",
    ]
    patch = tool_entry(
        "builtin:fs:apply_patch",
        {"patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"},
        {"files": [{"path": "x", "action": "modify", "hunks": 1, "added": 1, "removed": 1}], "applied": True},
    )
    body = render_body(patch, None).renderable
    shown = text_of(body)
    assert "applied" in shown and "+1" in shown and "-old" in shown and "+new" in shown
    console = Console(width=80, record=True, file=StringIO(), color_system="truecolor", force_terminal=True)
    console.print(body)
    assert "\x1b[32m+new" in console.export_text(styles=True)  # added lines are green


# -- RunStatus -------------------------------------------------------------------------------------
async def test_run_status_shows_what_runs_with_elapsed_time_and_hides_when_idle() -> None:
    now = [100.0]
    status = RunStatus(clock=lambda: now[0])
    async with Harness(status).run_test() as pilot:
        assert not status.display or status.region.height == 0
        status.start("call-0", "builtin:fs:read_text  a.md")  # not cancellable: no hint
        status.start("call-1", "builtin:shell:run  `sleep 10`", cancellable=True)
        now[0] = 104.2
        status.start("call-2", "builtin:web:fetch  http://127.0.0.1/")
        now[0] = 105.0
        await until(pilot, lambda: "5.0 s" in str(status.render()), what="the status line's next tick")
        shown = str(status.render())
        assert "builtin:shell:run  `sleep 10`  5.0 s  ·  Ctrl+X cancels" in shown
        assert "builtin:web:fetch  http://127.0.0.1/  0.8 s" in shown and shown.count("Ctrl+X") == 1
        assert "a.md  5.0 s\n" in shown  # the first line, not cancellable, has no hint
        assert status.running == ["call-0", "call-1", "call-2"] and status.region.height == 3
        status.stop("call-0")
        status.stop("call-1")
        status.stop("nothing")
        await pilot.pause()
        assert status.running == ["call-2"] and status.region.height == 1
        status.stop("call-2")
        await pilot.pause()
        assert status.region.height == 0


# -- ContextPane -----------------------------------------------------------------------------------
HITS = [
    {"rank": 1, "handle": "docs:abc", "source_path": "a.md [/x]", "section": "Intro", "score": 0.5},
    {"rank": 2, "handle": "docs:def", "source_path": "b.md", "page": 3, "score": 0.25},
]


async def test_context_pane_reset_and_stale_rows_explain_instead_of_opening() -> None:
    pane = ContextPane(id="context")
    messages = Messages()
    seen = messages.seen
    app = Harness(pane)
    async with app.run_test(message_hook=messages) as pilot:
        pane.set_workspace("alpha")
        pane.show_results("query: rivers", HITS)
        await pilot.pause()
        pane.focus_main()
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        opened = list({id(m): m for m in seen if isinstance(m, ContextPane.ShowChunk)}.values())
        assert [(m.handle, m.workspace, m.index) for m in opened] == [("docs:abc", "alpha", "docs")]

        pane.index_dropped("docs")
        await pilot.press("enter")
        await messages.notified(pilot, "index docs, which was dropped")
        assert len({id(m) for m in seen if isinstance(m, ContextPane.ShowChunk)}) == 1

        pane.show_results("query: rivers", HITS, workspace="alpha")
        pane.set_workspace("beta")  # switched, but the rows were not cleared
        mark = messages.mark()
        await pilot.press("enter")
        await messages.notified(pilot, "belongs to workspace alpha", since=mark)
        assert len({id(m) for m in seen if isinstance(m, ContextPane.ShowChunk)}) == 1

        pane.reset("Nothing retrieved yet in workspace beta.")
        await pilot.pause()
        assert not pane.query_one("#context-table").display
        assert "workspace beta" in str(pane.query_one("#context-empty").render())


async def test_context_pane_shows_the_last_record_after_a_restart() -> None:
    from services.retrieval.models import RetrievalRecord

    record = RetrievalRecord(1, "2026-01-01T09:00:00Z", "rivers [/x]", "docs", "hash", {}, HITS, "alpha")
    pane = ContextPane(id="context")
    async with Harness(pane).run_test() as pilot:
        pane.show_last(record)
        await pilot.pause()
        caption = str(pane.query_one("#context-caption").render())
        assert caption.startswith("last: rivers [/x]  ·  index docs  ·  2026-01-01 09:00:00")
        assert pane.query_one("#context-table").row_count == 2  # type: ignore[attr-defined]


# -- header and palette ----------------------------------------------------------------------------
def test_subtitle_shows_only_what_is_in_force() -> None:
    assert subtitle(workspace="demo", mode="guide") == "workspace demo · approvals guide"
    assert subtitle(workspace="d[/x]\x1b", model=None, profile="") == "workspace d[/x]\\x1b"


async def test_header_is_plain_and_cut_to_one_line_at_80_columns() -> None:
    class Titled(App[None]):
        TITLE = "Aries"

        def compose(self) -> Any:
            yield WorkbenchHeader()

        def on_mount(self) -> None:
            self.sub_title = "workspace [/x]\x1b]0;t\x07 · " + "model " + "x" * 200

    app = Titled()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        title = app.screen.query_one("HeaderTitle")
        assert title.region.height == 1 and title.region.right <= 80
        shown = str(title.render())
        assert "[/x]\\x1b]0;t\\x07" in shown and "\x1b" not in shown


async def test_palette_lists_slash_commands_and_runs_or_prefills_them() -> None:
    from app.palette import AriesCommands

    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        texts = [text for text, _, _ in AriesCommands(app.screen)._commands()]
        assert "command: /rag last" in texts and "command: /rag query …" in texts
        assert "command: /policy mode strict" in texts and "command: /help" in texts
        await pilot.press("ctrl+p", *"command: /policy mode strict")
        await until(pilot, lambda: palette_offers(app, "command: /policy mode strict"), what="the palette's hit")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.workspace is not None and app.workspace.setting("approval_mode") == "strict"
        await pilot.press("ctrl+p", *"command: /rag query")
        await until(pilot, lambda: palette_offers(app, "command: /rag query"), what="the palette's hit")
        await pilot.press("enter")
        await pilot.pause()
        prompt = app.screen.query_one("#prompt")
        assert prompt.value == "/rag query " and app.focused is prompt  # type: ignore[attr-defined]
