"""Lasting grants through the real gateway, policy, shell and store: "always" keeps a grant that
answers the next call (and a new gateway's, as after a restart), counts its uses, expires, is revoked,
belongs to one workspace identity, and never overrides a deny rule, strict mode or a call read from
text; the store is the operator's (``$ARIES_HOME/settings.json``), protected from tools."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.grants.proposal import from_words
from services.grants.store import GrantStore, identity
from services.policy import Policy
from services.settings.operator import GrantOrigin, load_settings, settings_path
from services.tools.calls import ApprovalDecision, ApprovalRequest
from services.tools.gateway import ToolGateway
from services.workspace.manager import Workspace, WorkspaceManager
from tests.tools.conftest import make_policy

RUN = "builtin:shell:run"
WRITE = "builtin:fs:write_text"


class Always:
    """An approver that answers "always" with the proposal's choice ``level``, and records requests."""

    def __init__(self, level: int = 0) -> None:
        self.level = level
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        assert request.proposal is not None, "no lasting grant was proposed"
        return ApprovalDecision.always(request.proposal.choices[self.level])


@pytest.fixture
def workspace(aries_home: Path) -> Iterator[Workspace]:
    made, _ = WorkspaceManager().create("demo")
    (made.root / "docs").mkdir()
    (made.root / "docs" / "a.txt").write_text("a\n", encoding="utf-8")
    (made.root / ".env").write_text("SECRET=1\n", encoding="utf-8")
    yield made


def _policy(root: Path, mode: str = "guide", **extra: Any) -> Policy:
    return make_policy(root, mode=mode, **extra)


def _gateway(workspace: Workspace, approver: Any = None, mode: str = "guide", **extra: Any) -> ToolGateway:
    return ToolGateway(workspace, policy=_policy(workspace.root, mode, **extra), approver=approver)


def _grant(workspace: Workspace, tool_id: str, words: str) -> str:
    with _gateway(workspace) as gateway:
        assert gateway.lasting is not None
        spec = gateway.registry.get(tool_id)
        pattern = from_words(
            tool_id, spec.session_keys, words, roots=gateway.bound.roots, resolve=gateway.bound.resolve_executable
        )
        return gateway.lasting.add(tool_id, pattern, GrantOrigin(by="cli", at="t")).id


def test_always_keeps_a_grant_that_answers_the_next_call_after_a_restart(workspace: Workspace) -> None:
    approver = Always()
    with _gateway(workspace, approver) as gateway:
        first = gateway.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert first.ok and first.meta["decision"]["approved_by"] == "operator_always"
        request = approver.requests[0]
        assert request.proposal.words() == "ls docs" and request.proposal.words(1) == "ls *"
    with _gateway(workspace) as restarted:  # no approver: only the grant can let it run
        again = restarted.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert again.ok, again.to_dict()
        assert again.meta["decision"]["approved_by"] == "operator_grant"
        decision = restarted.last_decision()
        assert decision is not None
        grant = decision["policy_decision"]["facts"]["grant"]
        assert grant["scope"] == "workspace" and grant["pattern"] == "ls docs"
        other = restarted.execute_sync(RUN, {"argv": ["ls", "-la", "docs"]})
        assert not other.ok and other.error.details["rule"] == "approval.no_approver"
        listed = [g for g in restarted.grants() if g["scope"] == "workspace"]
        assert [(g["pattern"], g["uses"], g["origin"]["by"]) for g in listed] == [("ls docs", 1, "approval")]
        assert listed[0]["origin"]["call_id"] == request.call_id
        assert restarted.revoke_grant(grant["id"]) is not None
        after = restarted.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert not after.ok and after.error.details["rule"] == "approval.no_approver"


def test_a_widened_grant_covers_plain_arguments_only(workspace: Workspace) -> None:
    with _gateway(workspace, Always(level=1)) as gateway:
        assert gateway.execute_sync(RUN, {"argv": ["ls", "docs"]}).ok
    with _gateway(workspace) as gateway:
        assert gateway.execute_sync(RUN, {"argv": ["ls", "docs/a.txt"]}).ok
        for argv in (["ls", "-la"], ["ls", "--color=always", "docs"], ["ls", "/etc"], ["ls"]):
            result = gateway.execute_sync(RUN, {"argv": argv})
            assert not result.ok, argv
        with_env = gateway.execute_sync(RUN, {"argv": ["ls", "docs"], "env": {"LANG": "C"}})
        assert not with_env.ok


def test_a_grant_never_overrides_a_deny_rule_strict_mode_or_a_call_read_from_text(workspace: Workspace) -> None:
    _grant(workspace, RUN, "cat *")
    with _gateway(workspace) as gateway:
        assert gateway.execute_sync(RUN, {"argv": ["cat", "docs/a.txt"]}).ok
        denied = gateway.execute_sync(RUN, {"argv": ["cat", ".env"]})
        assert not denied.ok and denied.error.details["rule"] == "shell.path_argument"
        from_text = gateway.execute_sync(RUN, {"argv": ["cat", "docs/a.txt"]}, from_text=True)
        assert not from_text.ok and from_text.error.details["rule"] == "approval.no_approver"
    with _gateway(workspace, mode="strict") as strict:
        result = strict.execute_sync(RUN, {"argv": ["cat", "docs/a.txt"]})
        assert not result.ok and result.error.details["rule"] == "approval.no_approver"


def test_a_call_read_from_text_is_offered_no_lasting_grant(workspace: Workspace) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.always(None)

    with _gateway(workspace, approver) as gateway:
        result = gateway.execute_sync(RUN, {"argv": ["ls", "docs"]}, from_text=True)
        assert result.ok and result.meta["decision"]["approved_by"] == "operator_once"
        assert asked[0].proposal is None
        assert [g for g in gateway.grants() if g["scope"] == "workspace"] == []


def test_a_file_grant_on_a_folder(workspace: Workspace) -> None:
    _grant(workspace, WRITE, "docs/")
    with _gateway(workspace) as gateway:
        assert gateway.execute_sync(WRITE, {"path": "docs/new.txt", "text": "x"}).ok
        outside = gateway.execute_sync(WRITE, {"path": "other.txt", "text": "x"})
        assert not outside.ok and outside.error.details["rule"] == "approval.no_approver"
        listed = {g["id"]: g for g in gateway.grants()}
        assert all(g["runs_code_unasked"] is None for g in listed.values())


def test_a_write_grant_and_a_program_that_runs_the_folders_code_are_named(workspace: Workspace) -> None:
    write = _grant(workspace, WRITE, "docs/")
    runner = _grant(workspace, RUN, "make test")
    with _gateway(workspace) as gateway:
        notes = {g["id"]: g["runs_code_unasked"] for g in gateway.grants()}
    assert "the Makefile" in notes[runner] and "builtin:fs:write_text grant on" in notes[runner]
    assert "runs make (the Makefile)" in notes[write]


def test_expiry_follows_the_clock(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    monkeypatch.setenv("ARIES_FROZEN_TIME", "1")  # services.clock: now is 2026-01-01T09:00
    with _gateway(workspace) as gateway:
        assert gateway.lasting is not None
        spec = gateway.registry.get(RUN)
        pattern = from_words(
            RUN, spec.session_keys, "ls docs", roots=gateway.bound.roots, resolve=gateway.bound.resolve_executable
        )
        grant = gateway.lasting.add(RUN, pattern, GrantOrigin(by="cli", at="t"), expires=timedelta(hours=1))
        assert grant.expires_at == "2026-01-01T10:00:00.000Z"
        assert gateway.execute_sync(RUN, {"argv": ["ls", "docs"]}).ok  # frozen: still within the hour
    monkeypatch.delenv("ARIES_FROZEN_TIME")  # the real clock is long past it
    with _gateway(workspace) as gateway:
        assert not gateway.execute_sync(RUN, {"argv": ["ls", "docs"]}).ok
        assert [g["expired"] for g in gateway.grants()] == [True]


def test_a_workspace_made_again_or_replaced_starts_with_no_grants(aries_home: Path) -> None:
    manager = WorkspaceManager()
    workspace, _ = manager.create("demo")
    _grant(workspace, RUN, "ls *")
    key = identity(workspace).key
    assert len(GrantStore(identity(workspace)).list()) == 1
    manager.delete("demo")
    again, _ = manager.create("demo")
    assert identity(again).key != key and GrantStore(identity(again)).list() == []
    # Replaced the way ``import --force`` does it: another folder renamed into place, same created_at.
    _grant(again, RUN, "ls *")
    staging = again.root.with_name("staging")
    shutil.copytree(again.root, staging)
    shutil.rmtree(again.root)
    staging.rename(again.root)
    replaced = Workspace(again.root, "demo")
    assert replaced.meta.get("created_at") == again.meta.get("created_at")
    assert GrantStore(identity(replaced)).list() == []
    assert len(load_settings().grants) == 2  # the old ones stay, inert, until revoked


def test_the_store_is_never_written_by_a_file_tool(aries_home: Path, workspace: Workspace) -> None:
    """Even with the operator's whole data root allowed, the store is refused (rule fs.operator_store)."""
    _grant(workspace, RUN, "ls *")
    before = settings_path().read_bytes()
    policy = _policy(aries_home)
    with ToolGateway(workspace, policy=policy, approver=lambda r: ApprovalDecision.once()) as gateway:
        for path in (settings_path(), settings_path().with_name(".settings.json.lock")):
            result = gateway.execute_sync(WRITE, {"path": str(path), "text": json.dumps({"grants": []})})
            assert not result.ok and result.error.details["rule"] == "fs.operator_store", result.to_dict()
    assert settings_path().read_bytes() == before


def test_another_program_of_that_name_earlier_on_the_path_is_not_granted(workspace: Workspace, tmp_path: Path) -> None:
    _grant(workspace, RUN, "ls *")
    with _gateway(workspace) as gateway:
        assert gateway.execute_sync(RUN, {"argv": ["ls", "docs"]}).ok
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ls").write_text("#!/bin/sh\necho shadowed\n", encoding="utf-8")
    (shadow / "ls").chmod(0o755)
    with _gateway(workspace, shell__search_path=[str(shadow), "/usr/bin", "/bin"]) as gateway:
        result = gateway.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert not result.ok and result.error.details["rule"] == "approval.no_approver"


def test_a_store_that_does_not_read_grants_nothing_and_is_left_alone(workspace: Workspace) -> None:
    settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings_path().write_text("{not json", encoding="utf-8")
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision.once()

    with _gateway(workspace, approver) as gateway:
        result = gateway.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert result.ok and asked and asked[0].proposal is None  # asked; "always" not offered
        decision = gateway.last_decision()
        assert decision is not None and "settings.json" in decision["policy_decision"]["facts"]["grants_unreadable"]
    assert settings_path().read_text(encoding="utf-8") == "{not json"


def test_a_grant_never_overrides_the_active_profile_or_the_roots(workspace: Workspace, tmp_path: Path) -> None:
    _grant(workspace, RUN, "ls *")
    restricted = _policy(workspace.root).restricted("reader", frozenset({"builtin:fs:read_text"}))
    with ToolGateway(workspace, policy=restricted) as gateway:
        result = gateway.execute_sync(RUN, {"argv": ["ls", "docs"]})
        assert not result.ok and result.error.details["rule"] == "profile.reader"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ToolGateway(workspace, policy=_policy(elsewhere)) as gateway:  # the roots no longer hold the cwd
        result = gateway.execute_sync(RUN, {"argv": ["ls", "docs"], "cwd": str(workspace.root)})
        assert not result.ok and result.error.details["rule"] == "fs.allowed_roots", result.to_dict()
        assert result.meta["decision"]["approved_by"] is None
