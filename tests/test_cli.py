"""The ``aries`` command as a user runs it: a real subprocess per call."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def aries(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_new_then_list_shows_the_layout(aries_home: Path) -> None:
    first = aries("workspace", "new", "demo", home=aries_home)
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout
    again = aries("workspace", "new", "demo", home=aries_home)
    assert again.returncode == 0 and "already exists" in again.stdout
    listing = aries("workspace", "list", "--json", home=aries_home)
    rows = json.loads(listing.stdout)
    assert [r["name"] for r in rows] == ["demo"]
    root = Path(rows[0]["path"])
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "artifacts",
        "indexes",
        "transcripts",
        "workspace.yaml",
    ]
    human = aries("workspace", "list", home=aries_home)
    assert "demo" in human.stdout


@pytest.mark.parametrize("name", ["../x", "a/b", ".", "", "x" * 300])
def test_bad_names_are_refused_in_one_line_and_create_nothing(aries_home: Path, name: str) -> None:
    result = aries("workspace", "new", name, home=aries_home)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: workspace name")
    assert not (aries_home / "workspaces").exists() or not any((aries_home / "workspaces").iterdir())


def test_open_without_a_terminal_checks_and_reports(aries_home: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    result = aries("workspace", "open", "demo", "--check", "--json", home=aries_home)
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["name"] == "demo" and report["transcript_problems"] == []
    missing = aries("workspace", "open", "nope", home=aries_home)
    assert missing.returncode == 1 and "aries workspace new nope" in missing.stderr


def test_close_clears_a_stale_marker(aries_home: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    marker = aries_home / "workspaces" / "demo" / ".aries-session.json"
    marker.write_text('{"pid": 999999999, "opened_at": "then"}')
    result = aries("workspace", "close", "demo", home=aries_home)
    assert result.returncode == 0 and "stale" in result.stdout
    assert not marker.exists()


def _wide_policy(folder: Path) -> Path:
    """The operator's own policy file: the default rules, with ``folder`` among the allowed roots."""
    policy = folder / "wide-policy.yaml"
    policy.write_text(
        "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
        f"filesystem: {{allowed_roots: ['${{workspace}}', '{folder}']}}\n",
        encoding="utf-8",
    )
    return policy


def test_artifact_add_and_list(aries_home: Path, tmp_path: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    inside = aries_home / "workspaces" / "demo" / "report.txt"
    inside.write_text("findings\n")
    added = aries(
        "-w", "demo", "artifact", "add", str(inside), "--description", "the report", "--json", home=aries_home
    )
    assert added.returncode == 0, added.stderr
    artifact = json.loads(added.stdout)
    assert artifact["created"] and artifact["description"] == "the report"
    assert artifact["provenance"]["kind"] == "tool" and artifact["provenance"]["tool"] == "builtin:fs:add_artifact"
    dup = aries("-w", "demo", "artifact", "add", str(inside), home=aries_home)
    assert "already in the registry" in dup.stdout
    listing = json.loads(aries("-w", "demo", "artifact", "list", "--json", home=aries_home).stdout)
    assert [a["name"] for a in listing] == ["report.txt"]
    no_ws = aries("artifact", "list", home=aries_home)
    assert no_ws.returncode != 0 and "--workspace" in no_ws.stderr
    policy = _wide_policy(tmp_path)
    missing = aries("-w", "demo", "artifact", "add", str(tmp_path / "nope"), "--policy", str(policy), home=aries_home)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_artifact_add_from_outside_the_roots_is_refused_and_audited_like_the_tui(
    aries_home: Path, tmp_path: Path
) -> None:
    """``aries artifact add`` is a governed call of builtin:fs:add_artifact: outside the policy's roots it
    is refused in one line (exit 3), with an audit row and a transcript entry, and nothing is stored —
    the decision the TUI's ``/artifact add`` gets from the same Session core. The operator's own
    ``--policy`` that allows the folder lets it in."""
    import asyncio

    from services.audit.log import AuditStore
    from services.conversation import Conversation
    from services.session.session import Session
    from services.workspace.manager import WorkspaceManager

    aries("workspace", "new", "demo", home=aries_home)
    secret = tmp_path / "outside" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN KEY-----\n")
    refused = aries("-w", "demo", "artifact", "add", str(secret), "--json", home=aries_home)
    assert refused.returncode == 3, refused.stderr
    assert refused.stdout == ""
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: ") and "outside the allowed roots" in lines[0]
    workspace, _ = WorkspaceManager().open("demo")
    assert workspace.artifacts.list() == []
    with AuditStore.for_workspace(workspace.root) as audit:
        rows = [c for c in audit.calls(limit=10) if c["tool_name"] == "builtin:fs:add_artifact"]
    assert len(rows) == 1
    assert rows[0]["status"] == "denied" and rows[0]["rule_id"] == "fs.allowed_roots" and rows[0]["source"] == "cli"
    entries = Conversation(workspace.latest_transcript()).read().entries
    tool_entries = [e for e in entries if e["role"] == "tool" and e.get("tool_name") == "builtin:fs:add_artifact"]
    assert len(tool_entries) == 1 and tool_entries[0]["status"] == "fail"

    # The TUI's /artifact add: the same call through the same Session core gets the same decision.
    with Session(workspace) as session:
        tui = asyncio.run(session.call_tool("builtin:fs:add_artifact", {"path": str(secret)}))
    assert tui.denied and tui.error is not None and tui.error.details["rule"] == rows[0]["rule_id"]

    allowed = aries(
        "-w", "demo", "artifact", "add", str(secret), "--policy", str(_wide_policy(tmp_path)), home=aries_home
    )
    assert allowed.returncode == 0, allowed.stderr
    assert [a.name for a in workspace.artifacts.list()] == ["id_rsa"]


@pytest.mark.parametrize("name", ["../x", "a/b", ""])
def test_tui_refuses_a_bad_workspace_name_before_starting(aries_home: Path, name: str) -> None:
    result = aries("-w", name, home=aries_home)
    assert result.returncode == 2 and result.stderr.startswith("aries: workspace name")
    assert not aries_home.exists()


def test_usage_errors_are_one_line(aries_home: Path) -> None:
    result = aries("workspace", "frobnicate", home=aries_home)
    assert result.returncode == 2 and "aries:" in result.stderr
    assert aries("--version", home=aries_home).stdout.startswith("aries ")


# -- safe and quiet output ------------------------------------------------------------------------

EVIL_NAME = "evil\x1b[2J\u202etxt.md"
EVIL_TEXT = (
    "# Hostile\n\nLlamas graze \x1b]0;pwned\x07 on the altiplano \x1b[31mred\x1b[0m \u202ereversed\u202c text.\n"
)


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text, repr(text[:400])


def test_a_closed_pipe_ends_quietly(aries_home: Path) -> None:
    """``aries workspace list | head -1`` with many rows: the reader is gone before aries writes
    (as ``head`` is once it has its line), so every write meets a closed pipe."""
    import shutil

    from services.workspace.manager import WorkspaceManager

    manager = WorkspaceManager()
    template, _ = manager.create("ws0000")
    for n in range(1, 300):
        shutil.copytree(template.root, manager.root / f"ws{n:04d}")
    env = {**os.environ, "ARIES_HOME": str(aries_home)}
    for extra in ([], ["--json"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader has exited
        producer = subprocess.Popen(
            [sys.executable, "-m", "app", "workspace", "list", *extra],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(write_end)
        _, stderr = producer.communicate(timeout=120)
        assert stderr.decode() == "", stderr.decode()  # no BrokenPipeError traceback, no "Exception ignored"
        assert producer.returncode == 141
        # and literally through head: whatever the kernel lets through first, nothing on stderr
        piped = subprocess.run(
            [
                "bash",
                "-c",
                f"{sys.executable} -m app workspace list {' '.join(extra)} | head -1; exit ${{PIPESTATUS[0]}}",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert piped.stdout.strip() and piped.stderr == "" and piped.returncode in (0, 141)


def test_hostile_names_and_text_are_inert_in_every_listing(aries_home: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / EVIL_NAME).write_text(EVIL_TEXT, encoding="utf-8")
    env_home = {"home": aries_home}
    assert aries("workspace", "new", "demo", **env_home).returncode == 0
    added = aries("-w", "demo", "rag", "index", "add", str(docs), "--name", "docs", **env_home)
    assert added.returncode == 0, added.stderr
    outputs = [added.stdout, added.stderr]
    for argv in (
        ["rag", "query", "llamas", "altiplano"],
        ["rag", "index", "list"],
        ["rag", "last"],
    ):
        done = aries("-w", "demo", *argv, **env_home)
        assert done.returncode == 0, (argv, done.stderr)
        outputs += [done.stdout, done.stderr]
    query = aries("-w", "demo", "rag", "query", "llamas", "altiplano", **env_home).stdout
    assert "\\x1b[2J<U+202E>txt.md" in query and "\\x1b]0;pwned\\x07" in query  # visible, not executed
    handle = next(word for word in query.split() if word.startswith("docs:"))
    shown = aries("-w", "demo", "rag", "show", handle, **env_home)
    outputs += [shown.stdout]
    assert "\\x1b[31mred" in shown.stdout
    for text in outputs:
        _no_raw_controls(text)
    # JSON stays JSON: the same data back, but nothing raw on the terminal
    as_json = aries("-w", "demo", "rag", "query", "llamas", "--json", **env_home)
    _no_raw_controls(as_json.stdout)
    hit = json.loads(as_json.stdout)["hits"][0]
    assert hit["source_path"] == EVIL_NAME and "\x1b]0;pwned\x07" in hit["text"] and "\u202e" in hit["text"]
    refused = aries("-w", "demo", "artifact", "add", str(docs / EVIL_NAME), **env_home)  # names are validated
    assert refused.returncode == 2
    _no_raw_controls(refused.stderr)


def test_the_index_made_active_by_the_cli_is_seen_by_an_open_workspace(aries_home: Path, tmp_path: Path) -> None:
    """The TUI keeps one Workspace open while the CLI indexes beside it: it must not say
    "no index is in use" when the CLI has just made one active."""
    from services.models.answers import NO_INDEX_REPLY, answer_from_index
    from services.retrieval import RetrievalEngine
    from services.retrieval.settings import RetrievalSettings
    from services.workspace.manager import WorkspaceManager

    workspace, _ = WorkspaceManager().create("demo")
    engine = RetrievalEngine(workspace, RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"}))
    try:
        assert engine.active_index is None  # read once, as the TUI does at start
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "llamas.md").write_text("# Llamas\n\nLlamas graze on the altiplano.\n", encoding="utf-8")
        added = aries("-w", "demo", "rag", "index", "add", str(docs), "--name", "docs", home=aries_home)
        assert added.returncode == 0, added.stderr
        assert engine.active_index == "docs"
        _, answer = answer_from_index(engine, "where do llamas graze", k=5)
        assert answer.text != NO_INDEX_REPLY and answer.citations
    finally:
        engine.close()
