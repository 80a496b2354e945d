"""What is in force (``services.session.inforce``): the approval mode's precedence against an independent table,
for every trust state × workspace mode × profile mode × policy mode × operator override, on real
workspaces; the trust review lists the approval mode exactly when trusting changes it; a change
replaces the value and denies what waited only when it narrows or replaces something."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from services.approval_mode import MODE_NAMES, SHIPPED_MODE, ApprovalMode
from services.session.inforce import InForce, Operator, resolve
from services.trust.authority import quarantine
from services.trust.records import record_import, review_authority, trust, workspace_trust
from services.trust.review import describe
from services.workspace.manager import Workspace, WorkspaceManager

STATES = ("own", "untrusted", "trusted", "changed")
LEVEL = (None, *MODE_NAMES)  # unset, or each mode


@pytest.fixture
def workspace(aries_home: Path) -> Workspace:
    return WorkspaceManager().create("demo")[0]


def expected_mode(
    state: str, workspace: str | None, profile: str | None, policy: str | None, operator: str | None
) -> str:
    """The documented table, written independently of the code: the operator's override; else, only
    while the workspace's settings are in force (own or trusted), its approval_mode, its profile's
    mode, its policy file's mode; else the shipped default."""
    if operator is not None:
        return operator
    if state in ("own", "trusted"):
        for mode in (workspace, profile, policy):
            if mode is not None:
                return mode
    return "guide"


def _write(workspace: Workspace, ws_mode: str | None, profile_mode: str | None, policy_mode: str | None) -> None:
    """The workspace's own authority: a profile ``p`` (with ``profile_mode``, or none) in use, its
    ``approval_mode`` setting and a ``policy.yaml`` (with ``policy_mode``, or no ``mode:``)."""
    (workspace.root / "profiles").mkdir(exist_ok=True)
    tools = f"tools:\n  mode: {profile_mode}\n" if profile_mode else ""
    (workspace.root / "profiles" / "p.yaml").write_text(f"name: p\n{tools}", encoding="utf-8")
    (workspace.root / "policy.yaml").write_text(
        "version: 1\n" + (f"mode: {policy_mode}\n" if policy_mode else ""), encoding="utf-8"
    )
    settings = {"approval_mode": ws_mode} if ws_mode else {}
    workspace.update(profile="p", **settings)


def _in_state(manager: WorkspaceManager, name: str, state: str, modes: tuple[str | None, ...]) -> Workspace:
    """A real workspace in trust ``state``, whose own files carry ``modes`` (workspace, profile, policy)."""
    workspace, _ = manager.create(name)
    _write(workspace, *modes)
    root = workspace.root
    if state == "untrusted":  # as an import leaves it: its authority waits in .quarantine/
        moved = quarantine(root)
        record_import(root, root, {"bundle": "test.aries.tar.zst"}, moved)
    elif state in ("trusted", "changed"):
        trust(root)
        if state == "changed":  # an edit outside Aries, after the operator trusted it
            (root / "profiles" / "other.yaml").write_text("name: other\n", encoding="utf-8")
    opened, _ = manager.open(name)
    assert workspace_trust(root).status == state
    return opened


@pytest.mark.parametrize("state", STATES)
def test_resolve_follows_the_precedence_table_and_the_review_lists_what_trusting_changes(
    state: str, tmp_path: Path
) -> None:
    manager = WorkspaceManager(tmp_path / "workspaces")
    for number, modes in enumerate(itertools.product(LEVEL, LEVEL, LEVEL)):
        workspace = _in_state(manager, f"w{number}", state, modes)
        for operator in LEVEL:
            in_force = resolve(workspace, Operator.for_session(mode=operator, env={}))
            want = expected_mode(state, *modes, operator)
            assert in_force.mode == want, (state, modes, operator, in_force.mode_source)
            assert isinstance(in_force.mode, ApprovalMode)
        if state in ("untrusted", "changed"):
            after, _before = review_authority(workspace.root)
            listed = [line.text for line in describe(after) if "approval mode" in line.text]
            trusted_mode = expected_mode("trusted", *modes, None)
            assert bool(listed) == (trusted_mode != "guide"), (state, modes, listed)
            assert all(text.startswith(f"approval mode: {trusted_mode} (default: guide)") for text in listed)
            trust(workspace.root)  # … and trusting puts exactly that in force
            reopened, _ = manager.open(workspace.name)
            assert resolve(reopened, Operator(mode=None)).mode == trusted_mode, (state, modes)


def test_each_mode_says_where_it_came_from(workspace: Workspace) -> None:
    (workspace.root / "policy.yaml").write_text("version: 1\nmode: strict\n", encoding="utf-8")
    assert resolve(workspace, Operator()).mode_source == f"policy file {workspace.root / 'policy.yaml'}"
    workspace.update(approval_mode="commander")
    assert resolve(workspace, Operator()).mode_source == "workspace approval_mode"
    chosen = resolve(workspace, Operator().choose_mode(ApprovalMode.GUIDE))
    assert (chosen.mode, chosen.mode_source) == ("guide", "operator override (/policy mode)")
    (workspace.root / "policy.yaml").unlink()
    workspace.meta_path.write_text(workspace.meta_path.read_text().replace("  approval_mode: commander\n", ""))
    plain = resolve(workspace, Operator())
    assert (plain.mode, plain.mode_source, plain.policy_path) == ("guide", "shipped default", None)


def test_the_shipped_mode_is_the_shipped_policy_files() -> None:
    """``SHIPPED_MODE`` spares start-up loading the shipped policy to know its mode: it must say the same."""
    from services.policy import load_policy

    assert load_policy(None).mode == SHIPPED_MODE


def test_the_model_in_force_is_aries_model_then_the_workspace_then_the_profile(workspace: Workspace) -> None:
    (workspace.root / "profiles").mkdir()
    (workspace.root / "profiles" / "m.yaml").write_text("name: m\nmodel:\n  default: ollama:qwen\n", encoding="utf-8")
    workspace.update(profile="m")
    in_force = resolve(workspace, Operator.for_session(env={}))
    assert (in_force.model, in_force.model_source) == ("ollama:qwen", "profile m")
    workspace.update(model="openai:gemma")
    in_force = resolve(workspace, Operator.for_session(env={"ARIES_MODEL": " ollama:llama3.2 "}))
    assert (in_force.model, in_force.model_source) == ("ollama:llama3.2", "ARIES_MODEL")
    assert in_force.model_env()["ARIES_MODEL"] == "ollama:llama3.2" and in_force.model_setting == "openai:gemma"
    assert resolve(workspace, Operator.for_session(env={})).model_source == "workspace model"


def _value(workspace: Workspace, **operator: object) -> InForce:
    return resolve(workspace, Operator(**operator))  # type: ignore[arg-type]


def test_a_value_replaces_another_only_when_it_narrows_or_replaces_something(workspace: Workspace) -> None:
    first = _value(workspace)
    assert not _value(workspace).replaces(first)  # the same: nothing waiting is denied
    assert _value(workspace, mode=ApprovalMode.STRICT).replaces(first)
    assert _value(workspace, profile="operator").replaces(first)
    loaded = first.policy  # as a gateway built on it would have
    assert not replace(first, grants=("a lasting grant",)).replaces(first)  # what only adds keeps them
    (workspace.root / "policy.yaml").write_text("version: 1\ntool_classes: {fs: disabled}\n", encoding="utf-8")
    assert _value(workspace).replaces(first) and loaded.hash != _value(workspace).policy.hash


def test_a_session_replaces_its_value_on_each_change(workspace: Workspace) -> None:
    from services.session.session import Session

    with Session(workspace, interactive=False) as session:
        before = session.in_force
        assert session.set_mode("strict") == 0
        assert session.in_force is not before and session.mode == "strict"
        assert session.in_force.mode_source == "operator override (/policy mode)"
        assert workspace.setting("approval_mode") == "strict"  # persisted, as the operator's explicit step
        session.reload_settings()  # a /policy mode choice gives way; the persisted setting stays in force
        assert session.mode == "strict" and session.in_force.mode_source == "workspace approval_mode"
    with Session(workspace, mode="commander", interactive=False) as session:
        session.reload_settings()
        assert session.mode == "commander"  # --mode holds for the whole session


def test_a_bad_mode_is_one_line() -> None:
    from services.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^the approval mode is one of guide, commander, strict, not 'yolo'$"):
        Operator.for_session(mode="yolo", env={})
    assert [mode.help for mode in ApprovalMode] and all(mode.help for mode in ApprovalMode)
    assert ApprovalMode.GUIDE == "guide" and f"{ApprovalMode.STRICT}" == "strict"


async def test_a_change_that_replaces_nothing_keeps_the_waiting_call(workspace: Workspace) -> None:
    """``/model use`` resolves what is in force again but replaces no policy, mode or profile: the call
    waiting for approval stays; ``/policy mode`` then replaces the mode and denies it."""
    import asyncio

    from services.session.session import Session

    (workspace.root / "policy.yaml").write_text(
        "version: 1\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
        "filesystem: {allowed_roots: ['${workspace}']}\n",
        encoding="utf-8",
    )
    session = Session(workspace)
    write = asyncio.create_task(session.call_tool("builtin:fs:write_text", {"path": "b.txt", "text": "y"}))
    for _ in range(200):
        if session.approvals.pending():
            break
        await asyncio.sleep(0.02)
    assert len(session.approvals.pending()) == 1, write.done() and write.result().to_dict()
    before = session.in_force
    session.update_settings(model="ollama:llama3.2")
    assert session.in_force is not before and session.in_force.model_setting == "ollama:llama3.2"
    assert len(session.approvals.pending()) == 1 and not write.done()
    assert session.set_mode("commander") == 1
    assert (await write).denied
    await session.aclose()
