"""The bridge wired into the one turn loop: ``aries ask`` (real subprocesses), the headless ``ask``
path over the whole redaction corpus, and the TUI's modal — each against the loopback "cloud" that
records every byte it receives.

Issue 11's acceptance line: no must-redact string reaches the server in any mode, every
must-not-redact question arrives unchanged, and with the bridge off the server receives nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.bridge import CloudAudit
from services.pipe.request import RESPONSE_SCHEMA, AskRequest, schema_errors
from services.workspace.manager import Workspace, WorkspaceManager
from tests.bridge.conftest import (
    CORPUS_HOSTS,
    CORPUS_PROJECTS,
    ENV,
    KEY_ENV,
    RecordingCloud,
    must_not_redact,
    must_redact,
)
from tests.bridge.test_cloud_bridge import _leak_forms
from tests.pipe.test_ask_cli import aries

pytestmark = pytest.mark.timeout(300)

SECRET_QUESTION = (
    "Why does jane.doe@acme-corp.com get a 403 from /home/jane/app/run.py under Bluebird "
    "when the token is ghp_76dEyTzAeKOmXRrvft2Gx9eWnZ4kPq8Lm1Ob?"
)
LEAKS = ["jane.doe@acme-corp.com", "/home/jane/app/run.py", "Bluebird", "ghp_76dEyTzAeKOmXRrvft2Gx9eWnZ4kPq8Lm1Ob"]


def cloud_block(cloud: RecordingCloud, mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "mode": mode,
        "base_url": cloud.base_url,
        "model": "cloud-model",
        "api_key_env": KEY_ENV,
        "hostnames": list(CORPUS_HOSTS),
        "projects": list(CORPUS_PROJECTS),
        **extra,
    }


def set_cloud(root: Path, block: dict[str, Any]) -> None:
    Workspace(root, root.name).update(cloud=block)


@pytest.fixture
def ws(aries_home: Path, tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tantivy.md").write_text("# Tantivy\n\nTantivy is a full-text search engine library written in Rust.\n")
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    done = aries("-w", "demo", "ingest", str(docs), "--index", "docs", home=aries_home)
    assert done.returncode == 0, done.stderr
    return aries_home / "workspaces" / "demo"


def ask_json(home: Path, *flags: str, question: str = SECRET_QUESTION) -> tuple[int, dict[str, Any], str]:
    done = aries("-w", "demo", "ask", "--json", *flags, question, home=home, **ENV)
    response = json.loads(done.stdout)
    assert schema_errors(response, RESPONSE_SCHEMA) == []
    return done.returncode, response, done.stderr


def test_ask_cli_off_ask_auto(ws: Path, aries_home: Path, cloud: RecordingCloud) -> None:
    # Off (the default, and explicitly): the server receives nothing at all.
    code, response, _ = ask_json(aries_home)
    assert code == 0 and response["cloud"] == {"mode": "off", "status": "off"}
    set_cloud(ws, {"mode": "off"})
    code, response, _ = ask_json(aries_home, "--cloud")
    assert code == 0 and response["cloud"]["status"] == "off" and response["provenance"]["cloud"] == []
    assert cloud.raw == []

    # ask without --cloud: declined, nothing sent, one audit row that says so.
    set_cloud(ws, cloud_block(cloud, "ask"))
    code, response, _ = ask_json(aries_home)
    assert code == 0 and response["cloud"] == {"mode": "ask", "status": "declined", "reason": "not approved"}
    assert cloud.raw == []
    plain = aries("-w", "demo", "ask", SECRET_QUESTION, home=aries_home, **ENV)
    assert "rerun with --cloud" in plain.stdout and cloud.raw == []

    # ask with --cloud: the redacted question goes, the reply comes back tagged cloud.
    cloud.answer(1, "Check the token's scopes.")
    code, response, stderr = ask_json(aries_home, "--cloud")
    assert code == 0, stderr
    assert len(cloud.chat_requests()) == 1
    for leak in LEAKS:
        for form in _leak_forms(leak):
            assert form not in cloud.received(), leak
    [entry] = response["provenance"]["cloud"]
    assert entry["answer"] == "Check the token's scopes." and "[REDACTED:email#1]" in entry["sent"]
    assert entry["sent"] == cloud.user_messages()[0] and entry["merged_into"] == "cloud"
    assert response["confidence"]["cloud"] == 0.5 and response["cloud"]["status"] == "sent"
    request_id = entry["request_id"]
    transcript = Path(response["logs_ref"].split("#")[0])
    tagged = [json.loads(line) for line in transcript.read_text().splitlines() if request_id in line]
    assert [(e["role"], e["provenance"], e["turn_id"]) for e in tagged] == [("assistant", "cloud", response["turn_id"])]
    audit = CloudAudit.for_workspace(ws)
    rows = audit.recent(10)
    audit.close()
    assert [r["status"] for r in rows][:2] == ["sent", "declined"] and rows[0]["request_id"] == request_id

    # auto: not sent when the local answer is confident enough, sent below the threshold.
    set_cloud(ws, cloud_block(cloud, "auto", threshold=0.0))
    code, response, _ = ask_json(aries_home, question="What is Tantivy?")
    assert response["cloud"]["status"] == "confident" and len(cloud.chat_requests()) == 1
    set_cloud(ws, cloud_block(cloud, "auto", threshold=1.0))
    cloud.answer(1, "A search library.")
    code, response, _ = ask_json(aries_home, question="What is Tantivy?")
    assert code == 0 and response["cloud"]["status"] == "sent" and len(cloud.chat_requests()) == 2

    # A question the allowlist refuses: nothing sent, exit 3, the local answer still printed.
    refused = "Why does src/app/main.py fail to import its sibling module?"
    code, response, stderr = ask_json(aries_home, question=refused)
    assert code == 3 and response["cloud"]["status"] == "refused" and response["answer"]
    assert stderr.startswith("aries: cloud refused:") and len(cloud.chat_requests()) == 2

    # status shows the bridge and its calls; forget removes every kept reply and the index.
    status = aries("-w", "demo", "cloud", "status", "--json", home=aries_home)
    report = json.loads(status.stdout)
    assert report["mode"] == "auto" and report["source"] == "workspace"
    assert [r["status"] for r in report["recent"]][:3] == ["refused", "sent", "sent"]
    assert "prompt" not in json.dumps(report).lower().replace("prompt_sha256", "")
    whole = json.loads(aries("-w", "demo", "status", "--json", home=aries_home).stdout)
    assert whole["cloud"]["mode"] == "auto" and whole["cloud"]["recent"]
    listed = aries("-w", "demo", "rag", "index", "list", home=aries_home).stdout
    assert "cloud" in listed
    forget = aries("-w", "demo", "cloud", "forget", home=aries_home)
    assert forget.returncode == 0 and "removed 2 cloud replies" in forget.stdout
    assert not (ws / "cloud").exists()
    assert "cloud" not in aries("-w", "demo", "rag", "index", "list", home=aries_home).stdout.split()


def test_a_profile_turns_the_bridge_on_and_a_bad_block_is_one_error(
    ws: Path, aries_home: Path, cloud: RecordingCloud
) -> None:
    profiles = ws / "profiles"
    profiles.mkdir(exist_ok=True)
    block = json.dumps(cloud_block(cloud, "auto", threshold=1.0))
    (profiles / "bridged.yaml").write_text(f"name: bridged\ndescription: asks the cloud\ncloud: {block}\n")
    cloud.answer(1, "From the cloud.")
    code, response, stderr = ask_json(aries_home, "--profile", "bridged", question="What is a BM25 score?")
    assert code == 0, stderr
    assert response["cloud"]["status"] == "sent" and len(cloud.chat_requests()) == 1
    (profiles / "broken.yaml").write_text("name: broken\ncloud:\n  mode: sometimes\n")
    done = aries("-w", "demo", "ask", "--profile", "broken", "hello?", home=aries_home, **ENV)
    assert done.returncode == 2 and "cloud.mode" in done.stderr and len(cloud.chat_requests()) == 1


async def _corpus_turns(root: Path, questions: list[str], **flags: Any) -> list[dict[str, Any]]:
    from services.models.offline import OfflineProvider
    from services.pipe.headless import HeadlessApprover, ask
    from services.session.session import Session

    approver = HeadlessApprover()
    responses = []
    session = Session(Workspace(root, root.name), source="cli", interactive=False, approver=approver)
    try:
        for question in questions:
            result = await ask(session, AskRequest(query=question), OfflineProvider(), approver=approver, k=3, **flags)
            responses.append(result.response)
    finally:
        await session.aclose()
        session.workspace.close()
    return responses


@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_the_corpus_through_the_turn_loop(
    aries_home: Path, cloud: RecordingCloud, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every question of both corpora through the headless turn (the same loop as the TUI)."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    workspace, _ = WorkspaceManager().create(f"corpus-{mode}")
    workspace.update(cloud=cloud_block(cloud, mode, threshold=1.0))
    redact = must_redact()
    keep = must_not_redact()
    cloud.answer(len(redact) + len(keep))
    responses = await _corpus_turns(workspace.root, [e["question"] for e in redact], cloud=True)
    statuses = [r["cloud"]["status"] for r in responses]
    assert set(statuses) <= {"sent", "refused"} and statuses.count("sent") >= len(redact) * 3 // 4
    received = cloud.received()
    for entry in redact:
        for leak in entry["leaks"]:
            for form in _leak_forms(leak):
                assert form not in received, (entry["kind"], leak)
    before = len(cloud.chat_requests())
    responses = await _corpus_turns(workspace.root, keep, cloud=True)
    assert [r["cloud"]["status"] for r in responses] == ["sent"] * len(keep)
    assert cloud.user_messages()[before:] == keep


async def test_off_and_ask_without_yes_send_nothing_through_the_turn_loop(
    aries_home: Path, cloud: RecordingCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    workspace, _ = WorkspaceManager().create("quiet")
    questions = [e["question"] for e in must_redact()[:10]] + must_not_redact()[:10]
    for block in (None, cloud_block(cloud, "off"), cloud_block(cloud, "ask")):
        if block is not None:
            workspace.update(cloud=block)
        responses = await _corpus_turns(workspace.root, questions)
        assert {r["cloud"]["status"] for r in responses} <= {"off", "declined", "refused"}
    assert cloud.raw == []


async def test_the_tui_asks_with_the_modal_and_shows_the_cloud_answer(
    aries_home: Path, cloud: RecordingCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """You should see the modal with exactly the redacted text; Don't send leaves the server untouched;
    Send makes the cloud's answer appear in the transcript tagged ``cloud · cloud-model``."""
    from app.aries_app import AriesApp
    from screens.cloud_send import CloudSendScreen
    from tests.tui.helpers import until
    from widgets.transcript.pane import TranscriptEntry

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ARIES_MODEL", raising=False)
    workspace, _ = WorkspaceManager().create("demo")
    workspace.update(cloud=cloud_block(cloud, "ask"))
    cloud.answer(1, "Check the file permissions.")
    app = AriesApp("demo")
    async with app.run_test(size=(160, 48)) as pilot:
        await app.ready()
        for key in ("n", "s"):
            app.commands.assistant.ask(SECRET_QUESTION)
            await until(pilot, lambda: isinstance(app.screen, CloudSendScreen))
            shown = app.screen.text  # type: ignore[attr-defined]
            assert "[REDACTED:email#1]" in shown and all(leak not in shown for leak in LEAKS)
            await pilot.press(key)
            await until(pilot, lambda: not app.commands.assistant.running)
            if key == "n":
                assert cloud.raw == []
        assert cloud.user_messages() == [shown]
        labels = [str(w.render()) for w in app.query(TranscriptEntry)]
        cloud_entries = [text for text in labels if "cloud · cloud-model" in text]
        assert len(cloud_entries) == 1 and "Check the file permissions." in cloud_entries[0]
        assert any("operator declined" in text for text in labels)
