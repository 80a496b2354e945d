"""Every tool output the spec names is kept as an artifact and linked from the audit row and the
transcript event; ``builtin:fs:restore`` undoes a write or patch from its snapshot (issue 15, items
2 and 3). Real gateway, real SQLite audit store, real artifact registry, loopback HTTP server."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from services.audit.db import SCHEMA_VERSION
from services.audit.log import AuditStore
from services.tools.calls import deny_all
from services.tools.gateway import ToolGateway
from services.tools.undo import RESTORE_ID, last_undoable, undo_arguments
from services.workspace.transcripts import Transcript
from tests.tools.conftest import PAGE, LoopbackServer, Sandbox, make_policy


def _links(gateway: ToolGateway, result: Any) -> list[dict[str, Any]]:
    """The links on the call's audit row (asserting the result carries the same ones)."""
    row = gateway.audit.get_call(result.meta["call_id"])
    assert row is not None
    assert row["artifacts"] == result.meta["artifacts"]
    return list(row["artifacts"])


def _event(transcript: Transcript, call_id: str) -> dict[str, Any]:
    [entry] = [e for e in transcript.read().entries if e.get("call_id") == call_id]
    return entry


def _content(sandbox: Sandbox, link: dict[str, Any]) -> bytes:
    registry = sandbox.workspace.artifacts
    return registry.read_bytes(registry.get(link["id"]))


def _by_role(links: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {link["role"]: link for link in links}


@pytest.fixture
def web_gateway(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> ToolGateway:
    policy = make_policy(sandbox.root, web__schemes=["http"], web__allow_private=[f"127.0.0.1:{web_server.port}"])
    return gateway_factory(policy)


# -- artifacts of web calls -------------------------------------------------------------------------
def test_fetch_body_and_extracted_text_are_linked_from_audit_and_transcript(
    sandbox: Sandbox, web_gateway: ToolGateway, web_server: LoopbackServer
) -> None:
    transcript = sandbox.workspace.new_transcript()
    url = f"{web_server.url}/page.html"
    fetched = web_gateway.execute_sync("builtin:web:fetch", {"url": url}, transcript=transcript)
    assert fetched.ok and fetched.data is not None, fetched.to_dict()
    [body] = _links(web_gateway, fetched)
    assert body["role"] == "body" and body["id"] == fetched.data["artifact_id"] and body["url"] == url
    assert body["hash"] == "sha256:" + hashlib.sha256(PAGE.encode()).hexdigest()
    assert _content(sandbox, body) == PAGE.encode()
    assert _event(transcript, fetched.meta["call_id"])["artifacts"] == [body]

    extracted = web_gateway.execute_sync("builtin:web:extract", {"artifact_id": body["id"]}, transcript=transcript)
    assert extracted.ok and extracted.data is not None
    links = _by_role(_links(web_gateway, extracted))
    assert links["source"]["id"] == body["id"]
    text = links["text"]
    assert text["source"] == body["id"] and text["name"] == "page.extract.txt"
    assert _content(sandbox, text).decode() == extracted.data["text"]
    assert "Heading" in extracted.data["text"] and "do not extract" not in extracted.data["text"]
    assert _event(transcript, extracted.meta["call_id"])["artifacts"] == [links["source"], text]

    # Hashed and deduplicated: the same page fetched again is the same artifact, listed once.
    again = web_gateway.execute_sync("builtin:web:fetch", {"url": url})
    assert again.ok and again.meta["artifacts"][0]["id"] == body["id"]
    ids = [a.id for a in sandbox.workspace.artifacts.list()]
    assert ids.count(body["id"]) == 1


# -- artifacts of writes and patches ----------------------------------------------------------------
def test_write_keeps_snapshot_after_and_diff(sandbox: Sandbox, gateway: ToolGateway) -> None:
    transcript = sandbox.workspace.new_transcript()
    target = sandbox.root / "hello.txt"
    result = gateway.execute_sync(
        "builtin:fs:write_text", {"path": str(target), "text": "hello aries\n"}, transcript=transcript
    )
    assert result.ok
    links = _by_role(_links(gateway, result))
    snapshot, after, diff = links["snapshot"], links["after"], links["diff"]
    assert _content(sandbox, snapshot) == b"hello world\nsecond line\n"
    assert snapshot["existed"] is True and snapshot["path"] == str(target.resolve())
    assert snapshot["after_sha256"] == hashlib.sha256(b"hello aries\n").hexdigest()
    assert _content(sandbox, after) == b"hello aries\n"
    shown = _content(sandbox, diff).decode()
    assert "-hello world\n-second line\n+hello aries\n" in shown and "a/hello.txt" in shown
    assert _event(transcript, result.meta["call_id"])["artifacts"] == result.meta["artifacts"]
    artifact = sandbox.workspace.artifacts.get(snapshot["id"])
    assert artifact.provenance["call_id"] == result.meta["call_id"] and artifact.provenance["role"] == "snapshot"


def test_patch_keeps_a_snapshot_and_diff_per_file(sandbox: Sandbox, gateway: ToolGateway) -> None:
    patch = (
        "--- a/hello.txt\n+++ b/hello.txt\n@@ -1,2 +1,2 @@\n-hello world\n+hello patched\n second line\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"
    )
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
    assert result.ok, result.to_dict()
    links = _links(gateway, result)
    assert [link["role"] for link in links] == ["snapshot", "after", "diff", "snapshot", "after", "diff"]
    hello, new = links[:3], links[3:]
    assert _content(sandbox, hello[0]) == b"hello world\nsecond line\n" and hello[0]["existed"] is True
    assert new[0]["existed"] is False and _content(sandbox, new[0]) == b""
    assert "+hello patched" in _content(sandbox, hello[2]).decode()
    assert "--- /dev/null" in _content(sandbox, new[2]).decode()


def test_a_dry_run_patch_keeps_nothing(sandbox: Sandbox, gateway: ToolGateway) -> None:
    patch = "--- a/hello.txt\n+++ b/hello.txt\n@@ -1 +1 @@\n-hello world\n+x\n"
    before = len(sandbox.workspace.artifacts.list())
    result = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch, "dry_run": True})
    assert result.ok and "artifacts" not in result.meta
    assert len(sandbox.workspace.artifacts.list()) == before


def test_an_old_audit_store_gets_the_artifacts_column(sandbox: Sandbox) -> None:
    path = sandbox.workspace.root / "audit.db"
    with AuditStore(path):
        pass
    with sqlite3.connect(path) as db:  # what schema 1 left: no artifacts_json column
        db.execute("ALTER TABLE tool_results DROP COLUMN artifacts_json")
        db.execute("PRAGMA user_version = 1")
    with AuditStore(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 2
    with sqlite3.connect(path) as db:
        assert "artifacts_json" in {row[1] for row in db.execute("PRAGMA table_info(tool_results)")}


# -- undo ---------------------------------------------------------------------------------------------
def _write(gateway: ToolGateway, path: str, text: str) -> str:
    result = gateway.execute_sync("builtin:fs:write_text", {"path": path, "text": text})
    assert result.ok, result.to_dict()
    return str(result.meta["call_id"])


def test_undo_restores_the_snapshot_through_the_gateway(sandbox: Sandbox, gateway: ToolGateway) -> None:
    transcript = sandbox.workspace.new_transcript()
    target = sandbox.root / "hello.txt"
    call_id = _write(gateway, str(target), "changed\n")
    args = undo_arguments(gateway.audit)
    assert args == {"call_id": call_id, "paths": [str(target.resolve())]}
    result = gateway.execute_sync(RESTORE_ID, args, transcript=transcript)
    assert result.ok, result.to_dict()
    assert target.read_text() == "hello world\nsecond line\n"
    assert result.data == {
        "call_id": call_id,
        "files": [{"path": str(target.resolve()), "action": "restored", "existed": True}],
    }
    row = gateway.audit.get_call(result.meta["call_id"])
    assert row is not None and row["tool_name"] == RESTORE_ID and row["status"] == "success"
    assert row["tier"] == "WRITE_DESTRUCTIVE" and row["rule_id"]
    # The restore keeps its own snapshot (the content it replaced) and diff, and is in the transcript.
    links = _by_role(row["artifacts"])
    assert _content(sandbox, links["snapshot"]) == b"changed\n"
    assert "+hello world" in _content(sandbox, links["diff"]).decode()
    assert _event(transcript, result.meta["call_id"])["tool_name"] == RESTORE_ID
    # Nothing left to undo by default (the restore itself is undone only when named).
    assert last_undoable(gateway.audit) is None
    redo = gateway.execute_sync(RESTORE_ID, undo_arguments(gateway.audit, result.meta["call_id"]))
    assert redo.ok and target.read_text() == "changed\n"


def test_undo_walks_back_one_call_at_a_time(sandbox: Sandbox, gateway: ToolGateway) -> None:
    target = sandbox.root / "hello.txt"
    _write(gateway, str(target), "one\n")
    _write(gateway, str(target), "two\n")
    assert gateway.execute_sync(RESTORE_ID, undo_arguments(gateway.audit)).ok
    assert target.read_text() == "one\n"
    assert gateway.execute_sync(RESTORE_ID, undo_arguments(gateway.audit)).ok
    assert target.read_text() == "hello world\nsecond line\n"


def test_undo_is_refused_after_a_later_edit_with_the_diff(sandbox: Sandbox, gateway: ToolGateway) -> None:
    target = sandbox.root / "hello.txt"
    call_id = _write(gateway, str(target), "by the tool\n")
    target.write_text("by the tool\nand by hand\n")  # a later edit outside Aries
    result = gateway.execute_sync(RESTORE_ID, undo_arguments(gateway.audit, call_id))
    assert not result.ok and result.error is not None
    assert result.error.type == "InvalidInput" and result.error.details["rule"] == "fs.undo_changed"
    assert f"changed since call {call_id}" in result.error.message and "\n" not in result.error.message
    diff = result.error.details["diff"]
    assert "+and by hand" in diff and " by the tool" in diff
    assert target.read_text() == "by the tool\nand by hand\n"  # nothing touched
    row = gateway.audit.get_call(result.meta["call_id"])
    assert row is not None and row["status"] == "error" and row["error"]["details"]["diff"] == diff


def test_undo_of_a_patch_restores_every_file(sandbox: Sandbox, gateway: ToolGateway) -> None:
    patch = (
        "--- a/hello.txt\n+++ b/hello.txt\n@@ -1,2 +1,2 @@\n-hello world\n+hello patched\n second line\n"
        "--- a/sub/ok.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-inside\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"
    )
    patched = gateway.execute_sync("builtin:fs:apply_patch", {"patch": patch})
    assert patched.ok, patched.to_dict()
    assert not (sandbox.root / "sub" / "ok.txt").exists() and (sandbox.root / "new.txt").exists()
    args = undo_arguments(gateway.audit)
    assert len(args["paths"]) == 3
    result = gateway.execute_sync(RESTORE_ID, args)
    assert result.ok, result.to_dict()
    assert (sandbox.root / "hello.txt").read_text() == "hello world\nsecond line\n"
    assert (sandbox.root / "sub" / "ok.txt").read_text() == "inside\n"
    assert not (sandbox.root / "new.txt").exists()
    assert result.data is not None
    assert [f["action"] for f in result.data["files"]] == ["restored", "recreated", "removed"]


def test_undo_names_exactly_the_files_the_call_changed(sandbox: Sandbox, gateway: ToolGateway) -> None:
    call_id = _write(gateway, "hello.txt", "x\n")
    result = gateway.execute_sync(RESTORE_ID, {"call_id": call_id, "paths": [str(sandbox.root / "sub" / "ok.txt")]})
    assert result.error is not None and result.error.type == "InvalidInput"
    assert "paths must name exactly those files" in result.error.message
    assert (sandbox.root / "hello.txt").read_text() == "x\n"


def test_undo_of_a_call_that_wrote_nothing_is_refused(gateway: ToolGateway) -> None:
    listed = gateway.execute_sync("builtin:fs:list_dir", {"path": "."})
    from services.errors import InvalidInput, NotFound

    with pytest.raises(InvalidInput, match="changes no file"):
        undo_arguments(gateway.audit, str(listed.meta["call_id"]))
    with pytest.raises(NotFound, match="no tool call to undo"):
        undo_arguments(gateway.audit)


def test_undo_denied_by_the_policy_changes_nothing(
    sandbox: Sandbox, gateway: ToolGateway, gateway_factory: Callable[..., ToolGateway]
) -> None:
    target = sandbox.root / "hello.txt"
    call_id = _write(gateway, str(target), "kept\n")
    args = undo_arguments(gateway.audit, call_id)
    # The operator says no in the approval step.
    refused = gateway.execute_sync(RESTORE_ID, args, approver=deny_all)
    assert refused.denied and refused.error is not None
    assert refused.error.details["rule"] == "approval.operator_denied"
    # A policy that denies writes to the file: the restore is refused by that rule.
    strict = gateway_factory(
        make_policy(
            sandbox.root,
            filesystem__deny=[{"id": "no-hello", "glob": "**/hello.txt", "ops": ["write"]}],
        )
    )
    denied = strict.execute_sync(RESTORE_ID, args)
    assert denied.denied and denied.error is not None and denied.error.details["rule"] == "fs.deny.no-hello"
    assert target.read_text() == "kept\n"
    row = strict.audit.get_call(denied.meta["call_id"])
    assert row is not None and row["status"] == "denied" and row["tool_name"] == RESTORE_ID
