"""The bridge against a loopback "cloud" that records every byte it receives.

The acceptance line of issue 11, item 3: no must-redact string reaches the server in any mode,
every must-not-redact question arrives unchanged, with the bridge off the server receives nothing
at all, ``auto`` sends only below the threshold, ``ask`` only when approved, and the audit log has
hashes and counts but no raw text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.bridge import (
    CloudAudit,
    CloudNotConfigured,
    QueryRefused,
    headless_approver,
    maybe_ask_cloud,
)
from services.hashing import sha256_tagged
from services.workspace.bridge_config import BridgeConfig
from tests.bridge.conftest import ENV, RecordingCloud, config_for, must_not_redact, must_redact

REDACT = must_redact()
KEEP = must_not_redact()


def _wire(text: str) -> bytes:
    """How ``text`` travels in the JSON body (UTF-8, JSON string escapes)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


def _leak_forms(leak: str) -> list[bytes]:
    return [leak.encode("utf-8"), _wire(leak), json.dumps(leak)[1:-1].encode("utf-8")]


async def _yes(text: str) -> bool:
    return True


async def _run_all(config: BridgeConfig, questions: list[str], confidence: float = 0.0) -> tuple[int, int]:
    """Ask every question; returns (sent, refused)."""
    sent = refused = 0
    for question in questions:
        try:
            reply = await maybe_ask_cloud(question, confidence, config, _yes, environ=ENV)
        except QueryRefused:
            refused += 1
            continue
        sent += reply is not None
    return sent, refused


@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_no_must_redact_string_reaches_the_cloud(cloud: RecordingCloud, mode: str) -> None:
    cloud.answer(len(REDACT))
    sent, refused = await _run_all(config_for(cloud, mode), [e["question"] for e in REDACT])
    assert sent + refused == len(REDACT) and sent >= len(REDACT) * 3 // 4  # most still go, redacted
    assert len(cloud.chat_requests()) == sent
    received = cloud.received()
    for entry in REDACT:
        for leak in entry["leaks"]:
            for form in _leak_forms(leak):
                assert form not in received, (entry["kind"], leak)
    assert b"[REDACTED:" in received


@pytest.mark.parametrize("mode", ["ask", "auto"])
async def test_every_must_not_redact_question_arrives_unchanged(cloud: RecordingCloud, mode: str) -> None:
    cloud.answer(len(KEEP))
    sent, refused = await _run_all(config_for(cloud, mode), KEEP)
    assert (sent, refused) == (len(KEEP), 0)
    assert cloud.user_messages() == KEEP
    received = cloud.received()
    for question in KEEP:
        assert _wire(question) in received


async def test_off_sends_nothing_at_all(cloud: RecordingCloud, tmp_path: Path) -> None:
    audit = CloudAudit(tmp_path / "audit.db")
    config = config_for(cloud, "off")
    for question in [e["question"] for e in REDACT] + KEEP:
        assert await maybe_ask_cloud(question, 0.0, config, _yes, audit=audit, environ=ENV) is None
    assert BridgeConfig().mode == "off"  # the default
    assert await maybe_ask_cloud(KEEP[0], None, BridgeConfig(), _yes, environ=ENV) is None
    assert cloud.requests == [] and cloud.raw == []
    assert audit.recent() == []


async def test_auto_sends_only_below_the_threshold(cloud: RecordingCloud) -> None:
    cloud.answer(2)
    config = config_for(cloud, "auto", threshold=0.4)
    question = KEEP[0]
    assert await maybe_ask_cloud(question, 0.9, config, _yes, environ=ENV) is None
    assert await maybe_ask_cloud(question, 0.4, config, _yes, environ=ENV) is None  # not below
    assert cloud.requests == []
    reply = await maybe_ask_cloud(question, 0.39, config, _yes, environ=ENV)
    assert reply is not None and reply.provenance == "cloud"
    assert len(cloud.chat_requests()) == 1
    reply = await maybe_ask_cloud(question, None, config, _yes, environ=ENV)  # no local answer at all
    assert reply is not None and len(cloud.chat_requests()) == 2


async def test_ask_sends_only_when_approved_and_shows_exactly_what_leaves(cloud: RecordingCloud) -> None:
    cloud.answer(2, "Use a connection pool.")
    config = config_for(cloud, "ask")
    question = "Why does jane.doe@acme-corp.com get timeouts from 10.20.30.40 with password=hunter2xyz set?"
    shown: list[str] = []

    async def deny(text: str) -> bool:
        shown.append(text)
        return False

    async def allow(text: str) -> bool:
        shown.append(text)
        return True

    assert await maybe_ask_cloud(question, 0.99, config, deny, environ=ENV) is None  # ask ignores confidence
    assert cloud.requests == []
    assert await maybe_ask_cloud(question, 0.0, config, headless_approver(False), environ=ENV) is None
    assert cloud.requests == []
    reply = await maybe_ask_cloud(question, 0.0, config, allow, environ=ENV)
    assert reply is not None and reply.text == "Use a connection pool."
    assert shown[0] == shown[1] == reply.sent == cloud.user_messages()[0]
    assert shown[0] == (
        "Why does [REDACTED:email#1] get timeouts from [REDACTED:ip#1] with password=[REDACTED:password#1] set?"
    )
    assert await maybe_ask_cloud(question, 0.0, config, headless_approver(True), environ=ENV) is not None  # --cloud
    assert cloud.user_messages() == [shown[0], shown[0]]


async def test_only_the_redacted_question_is_sent(cloud: RecordingCloud) -> None:
    cloud.answer(1)
    await maybe_ask_cloud(KEEP[1], 0.0, config_for(cloud, "auto"), _yes, environ=ENV)
    (body,) = cloud.chat_requests()
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "tools" not in body and body["model"] == "cloud-model"
    assert cloud.requests[0].headers["Authorization"] == "Bearer " + ENV["ARIES_TEST_CLOUD_KEY"]


async def test_the_log_has_hashes_and_counts_but_no_raw_text(cloud: RecordingCloud, tmp_path: Path) -> None:
    reply_text = "Rotate it and use a vault; answer marker 7QX."
    cloud.answer(1, reply_text)
    audit = CloudAudit(tmp_path / "audit.db", workspace="w")
    config = config_for(cloud, "ask")
    question = "How do I rotate the key AKIAIOSFODNN7EXAMPL3 used by Bluebird on build01?"
    reply = await maybe_ask_cloud(question, 0.1, config, _yes, audit=audit, environ=ENV, request_id="cloud-r1")
    assert reply is not None
    refused = "$ curl -X POST https://example.com -H 'Authorization: Bearer abcdef123456'"
    with pytest.raises(QueryRefused):
        await maybe_ask_cloud(refused, 0.1, config, _yes, audit=audit, environ=ENV, request_id="cloud-r2")
    assert await maybe_ask_cloud(KEEP[2], 0.1, config, headless_approver(False), audit=audit, environ=ENV) is None
    rows = audit.recent()
    assert [r["status"] for r in rows] == ["declined", "refused", "sent"]
    sent = audit.get("cloud-r1")
    assert sent is not None
    assert sent["prompt_sha256"] == sha256_tagged(reply.sent) == reply.prompt_sha256
    assert sent["reply_sha256"] == sha256_tagged(reply_text)
    assert sent["redactions"] == {"api_key": 1, "host": 1, "project": 1} == reply.redactions
    assert sent["model"] == "cloud-model" and sent["ts"] and sent["mode"] == "ask"
    assert rows[1]["error"] == "command" and rows[1]["reply_sha256"] is None
    audit.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("audit.db"))
    for text in (question, reply.sent, reply_text, refused, KEEP[2], "AKIAIOSFODNN7EXAMPL3", "marker 7QX", "Bluebird"):
        assert text.encode("utf-8") not in stored
    assert len(cloud.chat_requests()) == 1


async def test_a_bridge_without_its_key_or_endpoint_refuses_before_sending(
    cloud: RecordingCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_for(cloud, "auto")
    with pytest.raises(CloudNotConfigured, match="ARIES_TEST_CLOUD_KEY"):
        await maybe_ask_cloud(KEEP[0], 0.0, config, _yes, environ={})
    with pytest.raises(CloudNotConfigured, match="model"):
        await maybe_ask_cloud(KEEP[0], 0.0, config.model_copy(update={"model": None}), _yes, environ=ENV)
    assert cloud.requests == []
