"""``services.export``: a conversation as Markdown and as one self-contained HTML file.

Real components throughout: the conversation writer, the gateway and its audit store, a real index
(hash embedder), the real secret detectors; the HTML is checked by parsing it (``html.parser``) and
the Markdown by rendering it with markdown-it (CommonMark, as GitHub and most viewers read it)."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from services.conversation import AssistantAnswer, RetrievalSet, UserMessage
from services.errors import InvalidInput, NotFound
from services.export import FORMATS, export_conversation, export_path, write_export
from services.export.html import CSP
from services.session.session import Session
from services.workspace.manager import Workspace
from tests.export.hostile import GITHUB_TOKEN, SECRETS, make_workspace, write_conversation

URL_SCHEME = ("http:", "https:", "javascript:", "data:", "file:", "vbscript:", "//")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(data: bytes) -> Elements:
    parser = Elements()
    parser.feed(data.decode("utf-8"))
    parser.close()
    return parser


def assert_inert_bytes(data: bytes) -> None:
    text = data.decode("utf-8")
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text and "\u202e" not in text
    shown = html.unescape(text)
    assert "\\x1b]0;pwned title\\x07" in shown and "<U+202E>exe.txt<U+202C>" in shown  # as visible escapes
    for secret in SECRETS:
        assert secret not in text
    assert "[REDACTED:api_key]" in text and "[REDACTED:password]" in text


async def test_the_same_conversation_exports_to_the_same_bytes(workspace: Workspace) -> None:
    conversation_id, _ = await write_conversation(workspace)
    for fmt in FORMATS:
        first = export_conversation(workspace, conversation_id, fmt)
        again = export_conversation(workspace, conversation_id[:20], fmt)  # a unique start of the id
        assert first.data == again.data and first.conversation_id == conversation_id
        path = write_export(first, export_path(workspace, first))
        assert path == workspace.root / "exports" / f"{conversation_id}.{fmt}"
        assert path.read_bytes() == first.data


async def test_hostile_html_is_inert_with_a_restrictive_csp(workspace: Workspace) -> None:
    conversation_id, _ = await write_conversation(workspace)
    data = export_conversation(workspace, conversation_id, "html").data
    assert_inert_bytes(data)
    page = parse(data)
    tags = [tag for tag, _ in page.tags]
    for banned in ("script", "img", "iframe", "a", "link", "object", "embed", "form", "base", "svg"):
        assert banned not in tags, banned
    assert tags.count("style") == 1 and tags.count("article") == 6  # the page's own: one per entry
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert not value.strip().lower().startswith(URL_SCHEME), (tag, name, value)
    metas = [attrs for tag, attrs in page.tags if tag == "meta"]
    csp = [m["content"] for m in metas if m.get("http-equiv", "").lower() == "content-security-policy"]
    assert csp == [CSP] and "default-src 'none'" in CSP and "style-src 'unsafe-inline'" in CSP
    assert [tag for tag, _ in page.tags][:3] == ["html", "head", "meta"]  # charset, then the CSP at once
    text = "".join(page.text)
    assert '<script>window.__pwned = "script"</script>' in text  # the markup is there, as text
    assert "### Tool call — `builtin:shell:run`" in text  # the fake block is text inside one entry


async def test_hostile_markdown_renders_no_markup(workspace: Workspace) -> None:
    from markdown_it import MarkdownIt

    conversation_id, _ = await write_conversation(workspace)
    data = export_conversation(workspace, conversation_id, "md").data
    assert_inert_bytes(data)
    for renderer in (MarkdownIt("commonmark"), MarkdownIt("gfm-like")):
        page = parse(renderer.render(data.decode("utf-8")).encode("utf-8"))
        tags = [tag for tag, _ in page.tags]
        for banned in ("script", "img", "iframe", "a", "style", "article", "dl"):
            assert banned not in tags, (banned, renderer)
        headings = [tag for tag in tags if tag == "h3"]
        assert len(headings) == 6  # one per entry: the fake "### Tool call" stayed inside its fence
        assert '<script>window.__pwned = "script"</script>' in "".join(page.text)


async def test_tool_calls_show_the_decision_rule_and_approver(workspace: Workspace) -> None:
    conversation_id, handles = await write_conversation(workspace)
    text = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    read, write = text.split("\n### Tool call — `builtin:fs:")[1:3]
    assert "**Decision:** `allow`" in read and "**Rule:** `mode.guide.read_only`" in read
    assert "**Approved by:** `mode`" in read and "**Decision from:** `the audit store`" in read
    assert '"path": "notes.txt"' in read and "kestrelwing hovers" not in read  # arguments, then the file
    assert "**Status:** `denied`" in write and "**Decision:** `deny`" in write
    assert "**Rule:** `approval.no_approver`" in write and "nobody (no approval was given)" in write
    assert "PolicyDenied" in write
    assert f"`{handles[0]}`" in text and "as the turn saw it (recorded with the turn)" in text
    assert "kestrels.md § Kestrels" in text and "The kestrelwing hovers over the meadow." in text


async def test_the_decision_comes_from_the_transcript_when_the_audit_store_has_none(workspace: Workspace) -> None:
    conversation_id, _ = await write_conversation(workspace)
    (workspace.root / "audit.db").unlink()
    for side in workspace.root.glob("audit.db-*"):
        side.unlink()
    text = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    assert text.count("the transcript (no audit row found)") == 2 and "**Rule:** `approval.no_approver`" in text


async def test_an_older_turn_cites_by_lookup_and_says_what_is_gone(workspace: Workspace) -> None:
    """A turn recorded before passages were kept: the chunk is looked up (and said so); a chunk no longer
    in the index and an index that is gone are said so, with no text in their place."""
    session = Session(workspace, interactive=False, conversation=None)
    try:
        live = str(session.engine().query("kestrelwing", k=1).hits[0].handle)
        gone, no_index = "docs:0123456789abcdef", "removed:0123456789abcdef"
        conversation = session.conversation
        turn = conversation.new_turn()
        conversation.record(UserMessage(text="kestrelwing?", turn_id=turn, step=0))
        conversation.record(RetrievalSet(query="kestrelwing", index="docs", handles=[live, gone], turn_id=turn))
        answer = f"It hovers [{live}] [{gone}] [{no_index}]."
        cited = [live, gone, no_index]
        conversation.record(AssistantAnswer(text=answer, provider="offline", citations=cited, turn_id=turn))
        conversation_id = conversation.conversation_id
    finally:
        await session.aclose()
    entry = json.loads((workspace.transcripts_dir / f"{conversation_id}.ndjson").read_text().splitlines()[1])
    assert "passages" not in entry  # the older form: handles only
    text = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    citations = text.split("**Citations:**")[1].split("**[")[1:]
    assert "looked up in index docs when exported" in citations[0] and "hovers over the meadow" in citations[0]
    assert "no longer in index docs" in citations[1] and "```" not in citations[1]
    assert "index removed no longer exists" in citations[2] and "```" not in citations[2]
    shutil.rmtree(workspace.root / "indexes" / "docs")
    after = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    assert after.count("index docs no longer exists") == 2 and "hovers over the meadow" not in after


async def test_passages_are_recorded_with_the_turn_and_survive_the_index(workspace: Workspace) -> None:
    conversation_id, handles = await write_conversation(workspace)
    shutil.rmtree(workspace.root / "indexes" / "docs")
    text = export_conversation(workspace, conversation_id, "html").data.decode("utf-8")
    assert "as the turn saw it (recorded with the turn)" in text and "hovers over the meadow" in text


def test_unknown_ambiguous_and_bad_format_are_one_line(workspace: Workspace) -> None:
    with pytest.raises(NotFound, match="no conversation 'nope'"):
        export_conversation(workspace, "nope", "md")
    with pytest.raises(InvalidInput, match="unknown export format 'pdf'"):
        export_conversation(workspace, "last", "pdf")


async def test_a_github_token_in_a_tool_result_is_redacted(workspace: Workspace) -> None:
    conversation_id, _ = await write_conversation(workspace)
    transcript = (workspace.transcripts_dir / f"{conversation_id}.ndjson").read_text(encoding="utf-8")
    assert GITHUB_TOKEN in transcript  # the transcript keeps what happened; the export does not show it
    for fmt in FORMATS:
        assert GITHUB_TOKEN.encode() not in export_conversation(workspace, conversation_id, fmt).data


# -- the command line ----------------------------------------------------------------------------------
def aries(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    environ = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, stdin=subprocess.DEVNULL, env=environ, timeout=120
    )


async def test_the_cli_writes_stdout_or_a_file_and_fails_in_one_line(
    workspace: Workspace, aries_home: Path, tmp_path: Path
) -> None:
    conversation_id, _ = await write_conversation(workspace)
    printed = aries(aries_home, "-w", "share", "history", "export", "last")
    assert printed.returncode == 0 and printed.stderr == b""
    assert printed.stdout == export_conversation(workspace, conversation_id, "md").data
    target = tmp_path / "out" / "talk.html"
    html_args = ("history", "export", conversation_id, "--format", "html", "-o", str(target))
    written = aries(aries_home, "-w", "share", *html_args)
    assert written.returncode == 0 and written.stdout == b""
    assert target.read_bytes() == export_conversation(workspace, conversation_id, "html").data
    assert f"wrote {target}".encode() in written.stderr
    failures = {
        ("history", "export", "nope"): 1,  # an unknown conversation, as `history fork` and `ask --conversation`
        ("history", "export", "last", "--format", "pdf"): 2,  # usage
        ("history", "export", "last", "-o", "/proc/no/such/dir/x.md"): 1,  # cannot write
    }
    for args, code in failures.items():
        done = aries(aries_home, "-w", "share", *args)
        lines = done.stderr.decode().strip().splitlines()
        assert done.returncode == code and done.stdout == b"", (args, done.stderr)
        assert lines[-1].startswith("aries: ") and (len(lines) == 1 or lines[0].startswith("usage:")), lines
    missing = aries(aries_home, "-w", "nowhere", "history", "export", "last")
    assert missing.returncode == 1 and missing.stderr.decode().startswith("aries: no workspace named 'nowhere'")


async def test_an_ambiguous_start_of_an_id_is_bad_input(workspace: Workspace, aries_home: Path) -> None:
    await write_conversation(workspace)
    await write_conversation(workspace)
    done = aries(aries_home, "-w", "share", "history", "export", "c-")
    assert done.returncode == 2 and b"names 2 conversations" in done.stderr


async def test_a_turn_records_its_passages_and_the_export_shows_them(workspace: Workspace) -> None:
    """The real turn loop against a scripted Ollama server: the retrieval entry keeps the passages'
    text, and the export cites from it even after the document changed and the index was rebuilt."""
    from services.assistant import TurnLoop
    from services.models.config import make_provider, resolve_model
    from services.retrieval import RetrievalEngine
    from tests.models.servers import Reply, ScriptedServer

    server = ScriptedServer("ollama").start()
    session = Session(workspace, interactive=False, conversation=None)
    try:
        handle = str(session.engine().query("kestrelwing", k=1).hits[0].handle)
        server.add(Reply(text=f"It hovers over the meadow [{handle}]."))
        provider = make_provider(resolve_model(None, {"ARIES_MODEL": "ollama:llama3.2:3b", "OLLAMA_HOST": server.url}))
        loop = TurnLoop(session, provider)
        outcome = await loop.run("what does the kestrelwing do?")
        await provider.aclose()
        conversation_id = session.conversation.conversation_id
    finally:
        await session.aclose()
        server.stop()
    assert outcome.citations == [handle]
    entries = [json.loads(line) for line in (workspace.transcripts_dir / f"{conversation_id}.ndjson").open()]
    retrieval = next(e for e in entries if e.get("kind") == "retrieval")
    passage = next(p for p in retrieval["passages"] if p["handle"] == handle)
    assert set(passage) == {"handle", "source_path", "page", "section", "text"}
    assert "hovers over the meadow" in passage["text"] and passage["source_path"] == "kestrels.md"
    docs = tmp_docs(workspace)
    (docs / "kestrels.md").write_text("# Kestrels\n\nRewritten since.\n", encoding="utf-8")
    with RetrievalEngine(workspace) as engine:
        engine.index_add(str(docs), "docs")
    text = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    cited = text.split("**Citations:**")[1]
    assert "as the turn saw it (recorded with the turn)" in cited and "hovers over the meadow" in cited
    assert "Rewritten since" not in text


def tmp_docs(workspace: Workspace) -> Path:
    from services.retrieval.store_manifest import read_index_info

    info = read_index_info(workspace.root / "indexes" / "docs")
    assert info is not None
    return Path(info["roots"][0])


async def test_a_workspace_bundle_does_not_carry_its_exports(workspace: Workspace, tmp_path: Path) -> None:
    """Exports are made again from the transcripts; a bundle never brings a document into exports/."""
    from services.bundles.export import export_workspace
    from services.bundles.importer import peek_manifest

    conversation_id, _ = await write_conversation(workspace)
    export = export_conversation(workspace, conversation_id, "html")
    write_export(export, export_path(workspace, export))
    bundle = export_workspace(workspace, tmp_path / "share.tar.zst", aries_version="test")
    names = [entry.path for entry in peek_manifest(Path(bundle.path)).files]
    assert any(name.startswith("transcripts/") for name in names)
    assert not any(name.startswith("exports") for name in names), names


async def test_a_damaged_index_or_audit_store_is_said_not_fatal(workspace: Workspace) -> None:
    """Older turns whose index cannot be read, and an audit store that cannot be read: the export still
    comes out, and says so in a line each."""
    session = Session(workspace, interactive=False, conversation=None)
    try:
        live = str(session.engine().query("kestrelwing", k=1).hits[0].handle)
        conversation = session.conversation
        turn = conversation.new_turn()
        conversation.record(UserMessage(text="kestrelwing?", turn_id=turn, step=0))
        await session.call_tool("builtin:fs:read_text", {"path": "notes.txt"}, source="assistant", turn_id=turn)
        conversation.record(AssistantAnswer(text=f"[{live}]", provider="offline", citations=[live], turn_id=turn))
        conversation_id = conversation.conversation_id
    finally:
        await session.aclose()
    for path in (workspace.root / "indexes" / "docs").glob("manifest.db*"):
        path.unlink()
    (workspace.root / "indexes" / "docs" / "manifest.db").write_bytes(b"not a database" * 100)
    for path in workspace.root.glob("audit.db*"):
        path.unlink()
    (workspace.root / "audit.db").write_bytes(b"not a database either" * 100)
    text = export_conversation(workspace, conversation_id, "md").data.decode("utf-8")
    assert "index docs could not be read (" in text
    assert "The audit store could not be read (" in text and "the transcript (no audit row found)" in text
    assert "**Rule:** `mode.guide.read_only`" in text  # the transcript's record of the decision


def test_an_imported_bundle_that_carries_exports_has_them_dropped(tmp_path: Path) -> None:
    """A crafted bundle cannot plant a page in exports/ (where the workbench writes its own)."""
    import hashlib
    import io
    import tarfile

    import zstandard

    from services.bundles.importer import import_bundle
    from services.workspace.manager import WorkspaceManager

    files = [
        ("workspace.yaml", b"format_version: 1\nname: carried\n"),
        ("transcripts/c-x.ndjson", b""),
        ("exports/c-x.html", b"<script>window.__pwned = 1</script>"),
    ]
    manifest = {
        "format": "aries-bundle",
        "format_version": 1,
        "aries_version": "test",
        "workspace": {"name": "carried"},
        "embedders": {},
        "files": [
            {"path": name, "size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "mime": "text/plain"}
            for name, body in files
        ],
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in [("aries-bundle.json", json.dumps(manifest).encode()), *files]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    bundle = tmp_path / "carried.tar.zst"
    bundle.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    report = import_bundle(bundle, WorkspaceManager(tmp_path / "ws"))
    assert (tmp_path / "ws" / report.name / "transcripts" / "c-x.ndjson").is_file()
    assert not (tmp_path / "ws" / report.name / "exports").exists()


async def test_no_tool_may_write_the_exports_folder(workspace: Workspace) -> None:
    """exports/ is one of the workspace's own folders: a model's write there is refused, approved or not."""
    from services.tools.calls import approve_all

    session = Session(workspace, interactive=False, conversation=None)
    try:
        args = {"path": "exports/c-x.html", "text": "<script>window.__pwned = 1</script>"}
        result = await session.call_tool("builtin:fs:write_text", args, approver=approve_all, source="assistant")
    finally:
        await session.aclose()
    assert not result.ok and result.error is not None and result.error.type == "PolicyDenied", result.to_dict()
    assert not (workspace.root / "exports" / "c-x.html").exists()
