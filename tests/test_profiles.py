"""Profiles: loading (every kind of error names file, line and field), discovery (the workspace's own
win by name, a broken one is listed, never fatal), and the session's use of them (persisted per
workspace but not for an ephemeral one, enforced by the gateway for every caller, fail closed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.errors import ConfigError
from services.profiles import ProfileError, list_profiles, load_profile, parse_profile
from services.session.session import Session
from services.workspace.manager import Workspace, WorkspaceManager, ephemeral_workspace

GOOD = """\
name: mine
description: my own
system_prompt: be brief
tools:
  enable: [builtin:fs:read_*, shell]
retrieval: {k: 3, threshold: 0.5}
model: {default: "ollama:llama3.2", temperature: 0.1}
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str, name: str = "mine") -> str:
    path = write(tmp_path / "profiles", name, text)
    with pytest.raises(ProfileError) as info:
        load_profile(name, tmp_path)
    assert "\n" not in info.value.message and str(path) in info.value.message
    return info.value.message.replace(str(path), "FILE")


@pytest.fixture
def workspace() -> Workspace:
    workspace, _ = WorkspaceManager().create("prof")
    (workspace.root / "notes.txt").write_text("notes\n", encoding="utf-8")
    return workspace


def test_a_good_profile_loads_with_its_references_resolved(tmp_path: Path) -> None:
    write(tmp_path / "profiles", "mine", GOOD)
    profile = load_profile("mine", tmp_path)
    assert profile.origin == "workspace" and profile.system_prompt == "be brief"
    assert profile.tools == {
        "builtin:fs:read_text",
        "builtin:shell:kill",
        "builtin:shell:poll",
        "builtin:shell:run",
        "builtin:shell:start",
    }
    assert profile.retrieval.k == 3 and profile.model.default == "ollama:llama3.2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: mine\ndescription: [unclosed\n", "FILE:3: "),
        ("name: mine\ncolour: blue\n", "FILE:2: colour: unknown field (known: name, description"),
        ("name: mine\ntools:\n  enable: [fs]\n  approve: all\n", "FILE:4: tools.approve: unknown field (known: enable"),
        ("name: mine\nretrieval:\n  k: many\n", "FILE:3: retrieval.k: must be a valid integer"),
        ("name: mine\nretrieval:\n  k: 0\n", "FILE:3: retrieval.k: must be greater than or equal to 1"),
        ("name: mine\nmodel:\n  temperature: hot\n", "FILE:3: model.temperature: must be a valid number"),
        ("name: mine\nmodel:\n  default: llama\n", "FILE:3: model.default: must be provider:model"),
        (
            "name: mine\ntools:\n  enable:\n    - fs\n    - builtin:fs:delete_all\n",
            "FILE:5: tools.enable.1: no tool or tool class 'builtin:fs:delete_all' exists",
        ),
        (
            "name: mine\noutput_schema:\n  type: object\n  properties:\n    a: {type: strnig}\n",
            "FILE:5: output_schema.properties.a.type: not a valid JSON Schema",
        ),
        ("name: other\n", "FILE:1: name: 'other' does not match the file name 'mine.yaml'"),
        ("description: x\n", "FILE:1: name: is required"),
        ("- a list\n", "FILE:1: a profile is a mapping"),
        ("name: mine\nsystem_prompt_file: missing.md\n", "FILE:2: system_prompt_file: "),
        ("name: mine\nsystem_prompt: a\nsystem_prompt_file: b.md\n", "give system_prompt or system_prompt_file"),
        ("name: mine\ntools:\n  policy: nope.yaml\n", "FILE:3: tools.policy: "),
        ("name: mine\ntools:\n  mode: yolo\n", "FILE:3: tools.mode: must be 'guide', 'commander' or 'strict'"),
    ],
)
def test_every_loading_error_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    message = error_of(tmp_path, text)
    assert message.startswith(expected) or (not expected.startswith("FILE") and expected in message), message


def test_a_prompt_file_and_a_policy_file_are_relative_to_the_profile(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "prompt.md").write_text("from a file\n", encoding="utf-8")
    (folder / "strict.yaml").write_text("version: 1\nmode: strict\n", encoding="utf-8")
    write(folder, "mine", "name: mine\nsystem_prompt_file: prompt.md\ntools: {policy: strict.yaml}\n")
    profile = load_profile("mine", tmp_path)
    assert profile.system_prompt == "from a file\n" and profile.policy_path == folder / "strict.yaml"


def test_workspace_profiles_win_by_name_and_broken_ones_are_listed(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    write(folder, "researcher", "name: researcher\ndescription: my researcher\n")
    write(folder, "broken", "name: broken\nbogus: 1\n")
    entries = {e.name: e for e in list_profiles(tmp_path)}
    assert {"default", "researcher", "operator", "auditor", "broken"} <= set(entries)
    assert entries["researcher"].origin == "workspace" and entries["researcher"].description == "my researcher"
    assert entries["auditor"].origin == "shipped" and entries["auditor"].error is None
    assert entries["broken"].profile is None and "bogus: unknown field" in str(entries["broken"].error)
    with pytest.raises(ProfileError, match="no profile named 'nope' \\(known: auditor, broken, default"):
        load_profile("nope", tmp_path)


def test_the_shipped_profiles_load_and_say_what_they_enable() -> None:
    entries = {e.name: e for e in list_profiles(None)}
    assert all(e.error is None for e in entries.values()), [e.error for e in entries.values()]
    assert entries["default"].profile is not None and entries["default"].profile.tools is None
    researcher = entries["researcher"].profile
    assert researcher is not None and researcher.tools is not None
    assert not any(t.startswith(("builtin:shell", "builtin:web")) or "write" in t for t in researcher.tools)
    auditor = entries["auditor"].profile
    assert auditor is not None and auditor.output_schema is not None
    assert parse_profile(auditor.text, source="x").output_schema == auditor.output_schema


def test_the_shipped_default_sets_nothing_so_a_session_need_not_load_it(workspace: Workspace) -> None:
    """``Session.profile_may_set`` answers what is in force without loading the shipped default (it
    keeps the profile parser out of opening a workspace): that holds only while it names no policy,
    mode or model. A workspace's own ``default`` profile, or any other, is loaded to know."""
    default = load_profile("default")
    assert default.policy_path is None and default.mode is None and default.model.default is None
    with Session(workspace, interactive=False) as session:
        assert not session.profile_may_set()
        assert session.policy_path is None and session.mode == "guide"
    own = workspace.root / "profiles"
    own.mkdir(exist_ok=True)
    (own / "default.yaml").write_text("name: default\ntools:\n  mode: strict\n", encoding="utf-8")
    with Session(workspace, interactive=False) as session:
        assert session.profile_may_set() and session.mode == "strict"


async def test_an_operator_command_is_refused_too_after_switching(workspace: Workspace) -> None:
    """The gateway enforces the profile for every caller, not only for the model."""
    session = Session(workspace, interactive=False)
    try:
        allowed = await session.call_tool("builtin:shell:run", {"argv": ["ls"]}, approver=lambda r: None)
        assert allowed.meta["decision"]["rule"] != "profile.researcher"
        session.use_profile("researcher")
        refused = await session.call_tool("builtin:shell:run", {"argv": ["ls"]})
        assert refused.error is not None and refused.error.type == "PolicyDenied"
        assert refused.meta["decision"]["rule"] == "profile.researcher"
        read = await session.call_tool("builtin:fs:read_text", {"path": "notes.txt"})
        assert read.ok
    finally:
        await session.aclose()


def test_the_choice_persists_per_workspace_and_a_session_can_override_it(workspace: Workspace) -> None:
    with Session(workspace, interactive=False) as session:
        session.use_profile("auditor")
    assert WorkspaceManager().open("prof")[0].profile == "auditor"
    with Session(workspace, interactive=False) as session:
        assert session.profile_name == "auditor" and session.profile() is not None
    with Session(workspace, interactive=False, profile="researcher") as session:  # aries ask --profile
        assert session.profile_name == "researcher"
    assert workspace.profile == "auditor"  # the override is not persisted
    with pytest.raises(ProfileError, match="no profile named 'nope'"):
        Session(workspace, interactive=False, profile="nope")


def test_an_ephemeral_workspace_does_not_persist_the_choice() -> None:
    workspace = ephemeral_workspace()
    try:
        with Session(workspace, interactive=False) as session:
            session.use_profile("researcher")
            assert session.profile_name == "researcher"
            assert "builtin:shell:run" not in {t["id"] for t in session.gateway().list_tools() if t["enabled"]}
        assert workspace.profile == "default"
    finally:
        workspace.close()


def test_a_broken_active_profile_fails_closed_and_says_so(workspace: Workspace) -> None:
    write(workspace.root / "profiles", "mine", "name: mine\ntools:\n  enable: [nothing]\n")
    workspace.update(profile="mine")
    with Session(workspace, interactive=False) as session:
        assert session.profile() is None and "tools.enable.0" in str(session.profile_error)
        result = session.call_tool_sync("builtin:fs:read_text", {"path": "notes.txt"})
        assert not result.ok and result.meta["decision"]["rule"] == "profile.mine"
        notices = [e for e in session.conversation.read().entries if e.get("title") == "profile"]
        assert notices and notices[0]["level"] == "error" and "cannot be used" in notices[0]["content"]
        with pytest.raises(ConfigError):
            session.use_profile("mine")
        session.use_profile("default")  # the way out
        assert session.call_tool_sync("builtin:fs:read_text", {"path": "notes.txt"}).ok


def test_switching_keeps_grants(workspace: Workspace) -> None:
    from services.tools.calls import ApprovalDecision

    with Session(workspace, interactive=False) as session:
        session.use_profile("operator")
        session.call_tool_sync(
            "builtin:fs:write_text", {"path": "a.txt", "text": "x"}, approver=lambda r: ApprovalDecision.session()
        )
        assert session.grants()
        session.use_profile("default")
        assert session.grants()  # kept, like reload_policy
