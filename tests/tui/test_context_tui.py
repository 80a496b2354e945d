"""The context browser in the TUI, as an operator uses it: F6 and ``/context`` open it on the workspace's
``axiom://`` tree (built here with the real ``ContextTree`` and ``synthesize_tiers``), folders list when
expanded, a folder's L0/L1 preview, a file's start, Enter opens the file viewer; hostile names and
contents stay inert; ``temp`` and ``queue`` are visible, dimmed and read-only; the trace view renders
the agreed trace shape; ``/context find|search`` run the real retriever and open their trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot

from app.aries_app import AriesApp
from screens.context_browser import ContextBrowser
from screens.context_file_viewer import ContextFileViewer
from screens.context_trace import ContextTraceScreen
from services.context.scopes import can_write
from services.context.tiers import synthesize_tiers
from services.context.tree import ContextTree
from services.context.uri import AxiomUri, parse_uri
from services.workspace.manager import Workspace, WorkspaceManager
from tests.tui.helpers import Messages, palette_offers, settle, until
from widgets.context_tree.preview import PREVIEW_BYTES, VIEWER_BYTES, ContextPreview
from widgets.context_tree.trace import TraceView, render_trace
from widgets.context_tree.tree import ContextTreeView

SIZE = (120, 36)
HOSTILE = "[red]boom[/red] \x1b[31mansi\x1b[0m bell\x07 [link=https://evil.example]click[/link] \u202eevil"
HOSTILE_NAME = "[b]bold [i]it [link=evil]oops.md"

TRACE: dict[str, Any] = {
    "id": "t-0001",
    "query": "rivers silt",
    "start_points": [
        {"uri": "axiom://resources/guides", "score": 0.91, "level": "L0"},
        {"uri": "axiom://resources", "score": 0.42, "level": "L1"},
    ],
    "steps": [
        {"uri": "axiom://resources/guides", "depth": 1, "score": 0.91, "kept": ["axiom://resources/guides/rivers.md"]},
    ],
    "budget": {"max_ms": 120, "max_nodes": 200, "max_depth": 4, "used_ms": 7, "nodes": 3, "depth": 1},
    "stop_reason": "exhausted",
    "hits": [
        {"uri": "axiom://resources/guides/rivers.md", "score": 0.88, "level": "L2", "snippet": "Rivers carry silt"}
    ],
}


RIVERS = "# Rivers\n\nRivers carry silt to the sea. Deltas form where they slow.\n"


def build_tree(workspace: Workspace) -> ContextTree:
    tree = ContextTree(workspace.root / "context")
    files = {
        "axiom://resources/guides/rivers.md": RIVERS,
        "axiom://resources/guides/lakes.md": "# Lakes\n\nLakes hold still water.\n",
        "axiom://resources/readme.md": "# Readme\n\nAll about water.\n",
        "axiom://user/notes.md": "Prefers metric units.\n",
    }
    for uri, text in files.items():
        tree.write_text(parse_uri(uri), text, actor="user")
    synthesize_tiers(tree, AxiomUri.root("resources"))
    synthesize_tiers(tree, AxiomUri.root("user"))
    return tree


@pytest.fixture
def workspace() -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    build_tree(workspace)
    return workspace


def text_of(renderable: Any, width: int = 100) -> str:
    import io

    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def preview_text(app: AriesApp) -> str:
    return text_of(app.screen.query_one(ContextPreview).rendered)


async def command(pilot: Pilot[int], line: str) -> None:
    await pilot.press(*line, "enter")
    await settle(pilot)


def labels(tree: ContextTreeView) -> dict[str, Any]:
    """The plain text of each listed node's label, by URI."""
    out = {}

    def walk(node: Any) -> None:
        for child in node.children:
            if child.data is not None:
                out[str(child.data.uri)] = child.label
            walk(child)

    walk(tree.root)
    return out


async def test_f6_opens_the_browser_on_the_scopes_and_expanding_lists_lazily(workspace: Workspace) -> None:
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("f6")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        tree = app.screen.query_one(ContextTreeView)
        scopes = [c.data.uri.scope for c in tree.root.children]
        assert scopes == ["resources", "user", "agent", "session", "temp", "queue"]
        assert all(not c.children for c in tree.root.children)  # nothing listed before it is expanded
        assert app.focused is tree
        await settle(pilot)
        assert "resources holds 1 file and 1 folder" in preview_text(app)  # its L0, rendered
        await pilot.press("right")
        await settle(pilot)
        shown = labels(tree)
        assert {"axiom://resources/guides", "axiom://resources/readme.md"} <= set(shown)
        assert not any(".abstract.md" in uri or ".overview.md" in uri for uri in shown)  # tiers are in the preview
        await pilot.press("down")  # guides/
        await settle(pilot)
        text = preview_text(app)
        assert "L0 · abstract" in text and "guides holds 2 files" in text
        assert "L1 · overview" in text and "lakes.md" in text and "rivers.md" in text
        await pilot.press("enter")  # a folder: Enter expands it
        await settle(pilot)
        assert "axiom://resources/guides/rivers.md" in labels(tree)
        await pilot.press("down", "down")  # lakes.md, rivers.md
        await settle(pilot)
        assert tree.cursor_info is not None and str(tree.cursor_info.uri) == "axiom://resources/guides/rivers.md"
        assert "Rivers carry silt to the sea" in preview_text(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContextFileViewer))
        viewer = app.screen
        assert "Deltas form where they slow" in str(viewer.query_one("#context-file-text").render())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ContextBrowser)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ContextBrowser)


async def test_slash_context_opens_at_a_uri_and_reads_files(workspace: Workspace) -> None:
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/context ls axiom://resources/guides")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        await settle(pilot)
        tree = app.screen.query_one(ContextTreeView)
        # The browser moves its cursor to the URI once the tree has loaded the path to it.
        await until(pilot, lambda: tree.cursor_info is not None and str(tree.cursor_info.uri).endswith("/guides"))
        assert str(tree.cursor_info.uri) == "axiom://resources/guides"  # type: ignore[union-attr]
        assert "axiom://resources/guides/lakes.md" in labels(tree)  # the folder at the URI is listed
        assert "guides holds 2 files" in preview_text(app)
        await pilot.press("escape")
        await pilot.pause()
        await command(pilot, "/context read axiom://user/notes.md")
        await until(pilot, lambda: isinstance(app.screen, ContextFileViewer))
        assert "Prefers metric units." in str(app.screen.query_one("#context-file-text").render())
        await pilot.press("escape")
        await pilot.pause()
        await command(pilot, "/context")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        await pilot.press("escape")
        await pilot.pause()


async def test_bad_uris_and_hooks_are_one_line_errors(workspace: Workspace) -> None:
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        for line, expected in [
            ("/context read axiom://resources/../etc/passwd", "'..'"),
            ("/context read axiom://nowhere/x", "unknown scope"),
            ("/context ls axiom://resources/missing", "nothing at axiom://resources/missing"),
            ("/context trace t-0001", "t-0001"),
            ("/context trace last", "no find or search has run"),
            ("/context bogus", "cannot read '/context bogus'"),
        ]:
            mark = messages.mark()
            await command(pilot, line)
            await messages.notified(pilot, expected, since=mark)
            assert not isinstance(app.screen, ContextBrowser | ContextFileViewer)


async def test_temp_and_queue_are_visible_dimmed_and_read_only(workspace: Workspace) -> None:
    tree_on_disk = ContextTree(workspace.root / "context")
    tree_on_disk.write_text(parse_uri("axiom://queue/job-1.json"), '{"op": "index"}\n', actor="system")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/context ls axiom://queue")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        await settle(pilot)
        tree = app.screen.query_one(ContextTreeView)
        shown = labels(tree)
        for scope in ("temp", "queue", "session"):
            label = shown[f"axiom://{scope}"]
            assert "(read-only)" in label.plain
            assert not can_write(AxiomUri(scope, ("x",)), "user")
        for scope in ("temp", "queue"):
            assert "dim" in str(shown[f"axiom://{scope}"].style) or any(
                "dim" in str(span.style) for span in shown[f"axiom://{scope}"].spans
            )
        for scope in ("resources", "user", "agent"):
            assert "(read-only)" not in shown[f"axiom://{scope}"].plain
        assert "axiom://queue/job-1.json" in shown
        text = preview_text(app)
        assert "read-only" in text and "internal scope" in text
        await pilot.press("down")
        await settle(pilot)
        assert tree.cursor_info is not None and tree.cursor_info.read_only
        assert "read-only" in preview_text(app)
    assert tree_on_disk.read_text(parse_uri("axiom://queue/job-1.json")) == '{"op": "index"}\n'  # untouched


async def test_hostile_names_and_contents_are_shown_inert(workspace: Workspace) -> None:
    tree_on_disk = ContextTree(workspace.root / "context")
    tree_on_disk.write_text(parse_uri("axiom://resources/hostile").join(HOSTILE_NAME), HOSTILE + "\n", actor="user")
    (workspace.root / "context" / "resources" / "hostile" / "esc\x1b[2Jname.md").write_text("x")  # made outside Aries
    synthesize_tiers(tree_on_disk, parse_uri("axiom://resources/hostile"))
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/context ls axiom://resources/hostile")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        await settle(pilot)
        tree = app.screen.query_one(ContextTreeView)
        shown = labels(tree)
        hostile_uri = str(parse_uri("axiom://resources/hostile").join(HOSTILE_NAME))
        assert hostile_uri in shown, sorted(shown)
        assert shown[hostile_uri].plain == HOSTILE_NAME  # literally, markup not parsed
        assert not any("\x1b" in uri for uri in shown)  # a name with an escape is not a valid name: skipped
        text = preview_text(app)  # the folder's L0/L1 quote the hostile file
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        await pilot.press("down")
        await settle(pilot)
        text = preview_text(app)
        assert "[red]boom[/red]" in text and "[link=https://evil.example]click[/link]" in text
        assert "\\x1b[31mansi" in text and "bell\\x07" in text and "<U+202E>evil" in text
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContextFileViewer))
        body = app.screen.query_one("#context-file-text").render()
        rendered = str(body)
        assert "[red]boom[/red]" in rendered and "\\x1b[31mansi" in rendered and "\x1b" not in rendered
        title = str(app.screen.query_one("#context-file-title").render())
        assert HOSTILE_NAME in title


async def test_long_files_are_cut_with_a_note(workspace: Workspace) -> None:
    tree_on_disk = ContextTree(workspace.root / "context")
    big = "".join(f"line {n:06d} of a long file\n" for n in range(12000))  # ~310 KB
    tree_on_disk.write_text(parse_uri("axiom://resources/big.txt"), big, actor="user")
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await command(pilot, "/context ls axiom://resources/big.txt")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))
        await settle(pilot)
        text = preview_text(app)
        assert f"… {len(big) - PREVIEW_BYTES:,} more bytes" in text
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ContextFileViewer))
        more = str(app.screen.query_one("#context-file-more").render())
        assert f"… {len(big) - VIEWER_BYTES:,} more bytes" in more


async def test_the_palette_browses_the_context(workspace: Workspace) -> None:
    from textual.command import CommandPalette

    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"context: browse")
        await until(pilot, lambda: palette_offers(app, "context: browse"), what="the palette's hit")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ContextBrowser))


async def test_the_trace_view_renders_the_agreed_shape(workspace: Workspace) -> None:
    text = text_of(render_trace(TRACE), width=140)
    for expected in ("t-0001", "rivers silt", "stop reason: exhausted", "7 of 120 ms", "3 of 200 nodes",
                     "depth 1 of 4", "axiom://resources/guides", "0.910", "axiom://resources/guides/rivers.md",
                     "Rivers carry silt"):  # fmt: skip
        assert expected in text, expected
    partial = text_of(render_trace({"query": "[red]x[/red]\x1b[2J", "hits": "not a list"}))
    assert "stop reason: –" in partial and "[red]x[/red]\\x1b[2J" in partial and "\x1b" not in partial
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        app.commands.context.show_trace(TRACE)
        await until(pilot, lambda: isinstance(app.screen, ContextTraceScreen))
        assert app.screen.query_one(TraceView) is not None
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ContextTraceScreen)


def _snapshot_workspace() -> None:
    workspace, _ = WorkspaceManager().create("demo")
    build_tree(workspace)


def test_context_browser_snapshot(snap_compare, tmp_path: Path) -> None:
    """You should see the context browser: "Context axiom:// · workspace demo" on top; the tree with
    resources expanded (guides/ expanded with lakes.md and rivers.md, readme.md), user, agent, session
    marked read-only, temp and queue dimmed and read-only; the cursor on guides/; the preview of
    axiom://resources/guides with its L0 abstract and L1 overview (the list of files) rendered as
    Markdown; and the keys Esc Close, Enter Open, r Refresh, Tab Tree/preview at the bottom."""
    _snapshot_workspace()

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await pilot.press(*"/context ls axiom://resources/guides", "enter")
        await settle(pilot)
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, run_before=run_before)


def test_context_file_viewer_snapshot_small(snap_compare) -> None:
    """You should see, at 80×24, the file viewer over the workbench: "File rivers.md", its uri, scope,
    size and "writable yes", the text of rivers.md, and "Esc closes" at the bottom."""
    _snapshot_workspace()

    async def run_before(pilot: Pilot[int]) -> None:
        await pilot.app.ready()  # type: ignore[attr-defined]
        await pilot.press(*"/context read axiom://resources/guides/rivers.md", "enter")
        await settle(pilot)
        await settle(pilot)

    assert snap_compare(AriesApp("demo"), terminal_size=(80, 24), run_before=run_before)


async def test_find_and_search_open_their_trace_and_trace_last_reopens_it(workspace: Workspace) -> None:
    """You should see the search's trace view: its hits with rivers.md first, then the same trace
    again from ``/context trace last``."""
    from services.context.index import sync_index
    from services.retrieval import RetrievalEngine

    with RetrievalEngine(workspace) as engine:
        sync_index(ContextTree(workspace.root / "context"), engine)
    app = AriesApp("demo")
    async with app.run_test(size=SIZE) as pilot:
        await app.ready()
        seen = []
        for line in ("/context search rivers silt", "/context find rivers silt", "/context trace last"):
            await command(pilot, line)
            await until(pilot, lambda: isinstance(app.screen, ContextTraceScreen))
            shown = text_of(render_trace(app.screen.trace), width=160)  # type: ignore[attr-defined]
            assert "axiom://resources/guides/rivers.md" in shown and "stop reason" in shown
            seen.append(app.screen.trace["id"])  # type: ignore[attr-defined]
            await pilot.press("escape")
            await pilot.pause()
        assert seen[1] == seen[2] and seen[0] != seen[1]
        # the Context pane keeps the last find/search: its hits by handle, the trace named in the caption
        pane_text = str(app.query_one("#context-caption").render())
        assert f"trace {seen[1]}" in pane_text


async def test_context_add_from_the_prompt_stages_indexes_and_says_so(workspace: Workspace, tmp_path: Path) -> None:
    """You should see a transcript notice "Added axiom://resources/field: 1 file(s)…", after which the
    file is in the tree with its folder's tiers and ``/context find`` finds it."""

    def said() -> bool:
        assert app.session is not None
        return any(
            "Added axiom://resources/field" in str(e.get("content")) for e in app.session.conversation.read().entries
        )

    field = tmp_path / "field"
    field.mkdir()
    (field / "otters.md").write_text("# Otters\n\nOtters juggle pebbles on riverbanks.\n", encoding="utf-8")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await command(pilot, f"/context add {field}")
        tree = ContextTree(workspace.root / "context")
        await until(pilot, said, timeout=60)
        assert tree.exists(parse_uri("axiom://resources/field/otters.md"))
        assert tree.exists(parse_uri("axiom://resources/field/.abstract.md"))
        await command(pilot, "/context find juggling otters")
        await until(pilot, lambda: isinstance(app.screen, ContextTraceScreen), timeout=30)
        shown = text_of(render_trace(app.screen.trace), width=160)  # type: ignore[attr-defined]
        assert "axiom://resources/field/otters.md" in shown
        await pilot.press("escape")


async def test_context_add_url_in_the_tui_with_its_approval_in_the_queue(workspace: Workspace, loopback: Any) -> None:
    """``/context add URL`` fetches through ``builtin:web:fetch`` in the session: guide mode asks, the call
    waits in the Approvals pane, approved it is added; denied, one error line and nothing added (issue 24)."""
    import json

    from aiohttp import web

    from screens.approval import ApprovalScreen
    from tests.tools.conftest import policy_data
    from tests.tui.test_approvals import wait_for_pending

    async def page(_request: Any) -> Any:
        return web.Response(text="# Wombats\n\nWombats dig burrows.\n", content_type="text/markdown")

    server = loopback({"/wombats.md": page})
    data = policy_data(workspace.root)
    data["web"] = {"schemes": ["http"], "allow_private": [f"127.0.0.1:{server.port}"]}
    (workspace.root / "policy.yaml").write_text(json.dumps(data), encoding="utf-8")
    tree = ContextTree(workspace.root / "context")

    def said(text: str) -> bool:
        assert app.session is not None
        return any(text in str(e.get("content")) for e in app.session.conversation.read().entries)

    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=SIZE, message_hook=messages) as pilot:
        await app.ready()
        await pilot.press(*f"/context add {server.url}/wombats.md", "enter")  # its worker waits: no settle
        await wait_for_pending(app, pilot)
        assert app.session is not None and app.session.approvals.pending()[0].tool_id == "builtin:web:fetch"
        await pilot.press("f4", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("a")
        await until(pilot, lambda: said("Added axiom://resources/wombats.md"), timeout=60)
        assert tree.read_text(parse_uri("axiom://resources/wombats.md")) == "# Wombats\n\nWombats dig burrows.\n"

        mark = messages.mark()
        await pilot.press(*f"/context add {server.url}/wombats.md axiom://resources/w2.md", "enter")
        await wait_for_pending(app, pilot)
        await pilot.press("f4", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("d", "enter")
        note = await messages.notified(pilot, "refused", since=mark)
        assert "/context add" in note and "denied by the operator" in note
        assert not tree.exists(parse_uri("axiom://resources/w2.md"))
