"""Cloud replies in the transcript (tagged ``cloud``) and in the ``cloud`` index, removable as a set;
the ``settings.cloud`` block of ``workspace.yaml``."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.bridge import CloudReply
from services.bridge.merge import CLOUD_INDEX, cloud_replies, forget_cloud, forget_reply, merge_reply, record_reply
from services.conversation import Conversation
from services.errors import ConfigError
from services.hashing import sha256_tagged
from services.retrieval import RetrievalEngine, RetrievalSettings
from services.workspace.config import validate_config
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import Transcript


def _reply(request_id: str, text: str) -> CloudReply:
    sent = "How do connection pools size themselves under load?"
    return CloudReply(
        request_id=request_id,
        text=text,
        model="cloud-model",
        sent=sent,
        prompt_sha256=sha256_tagged(sent),
        reply_sha256=sha256_tagged(text),
        redactions={"email": 1},
        usage={"prompt_tokens": 11, "completion_tokens": 5},
    )


def test_a_cloud_reply_is_tagged_cloud_in_the_transcript(tmp_path: Path) -> None:
    conversation = Conversation(Transcript(tmp_path, "c-cloud"))
    reply = _reply("cloud-abc123", "Pools grow until the limit.")
    record_reply(conversation, reply, turn_id="c-cloud-t0001")
    (entry,) = [e for e in conversation.read().entries if e["role"] == "assistant"]
    assert entry["provenance"] == "cloud" and entry["provider"] == "cloud"
    assert entry["content"] == "Pools grow until the limit."
    assert entry["cloud"] == {
        "request_id": "cloud-abc123",
        "model": "cloud-model",
        "prompt_sha256": reply.prompt_sha256,
        "reply_sha256": reply.reply_sha256,
        "redactions": {"email": 1},
    }


def test_replies_merge_into_the_cloud_index_and_are_removed_as_a_set(tmp_path: Path) -> None:
    workspace, _ = WorkspaceManager(tmp_path / "workspaces").create("w")
    with RetrievalEngine(workspace, RetrievalSettings.from_env()) as engine:
        first = merge_reply(engine, workspace.root, _reply("cloud-one", "Zebrafish pools rebalance nightly."))
        merge_reply(engine, workspace.root, _reply("cloud-two", "Use bounded queues for backpressure."))
        assert first == workspace.root / "cloud" / "cloud-one.md"
        assert cloud_replies(workspace.root) == ["cloud-one", "cloud-two"]
        (info,) = [i for i in engine.index_list() if i.name == CLOUD_INDEX]
        assert info.files == 2
        hits = engine.query("zebrafish pools", k=3, index=CLOUD_INDEX).hits
        assert hits and hits[0].source_path == "cloud-one.md" and hits[0].index == "cloud"
        assert "provenance: cloud" in first.read_text(encoding="utf-8")
        forget_reply(engine, workspace.root, "cloud-one")
        assert [i.files for i in engine.index_list() if i.name == CLOUD_INDEX] == [1]
        assert forget_cloud(engine, workspace.root) == 1
        assert CLOUD_INDEX not in [i.name for i in engine.index_list()]
        assert not (workspace.root / "cloud").exists()


def test_settings_cloud_is_typed_and_off_by_default(tmp_path: Path) -> None:
    path = tmp_path / "workspace.yaml"
    assert validate_config({}, path).settings.cloud.mode == "off"
    config = validate_config({"settings": {"cloud": {"mode": "auto", "threshold": 0.2, "projects": ["X"]}}}, path)
    assert config.settings.cloud.mode == "auto" and config.settings.cloud.projects == ("X",)
    with pytest.raises(ConfigError, match=r"cloud.mode: must be one of off, ask, auto"):
        validate_config({"settings": {"cloud": {"mode": "always"}}}, path)
    with pytest.raises(ConfigError, match=r"cloud.treshold: unknown setting"):
        validate_config({"settings": {"cloud": {"treshold": 0.2}}}, path)
    with pytest.raises(ConfigError, match=r"api_key_env"):
        validate_config({"settings": {"cloud": {"api_key_env": "sk-live key"}}}, path)
