"""workspace.yaml is typed: wrong values are one line with file:line and field; unknown keys and
comments survive; the environment is typed the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.errors import ConfigError
from services.settings.config import env_settings
from services.settings.env import EnvSettings
from services.workspace.manager import Workspace, WorkspaceManager

REPO = Path(__file__).resolve().parent.parent

GOOD = """\
# my notes about this workspace
format_version: 1
name: demo
profile: default
settings:
  model: offline
  approval_mode: guide   # how careful
  active_index:
  future_setting: [1, 2]   # from a newer Aries
team: research
"""


def _workspace(text: str) -> Workspace:
    workspace, _ = WorkspaceManager().create("demo")
    workspace.meta_path.write_text(text, encoding="utf-8")
    return Workspace(workspace.root, "demo")


@pytest.mark.parametrize(
    ("old", "new", "line", "expected"),
    [
        ("approval_mode: guide", "approval_mode: yolo", 7, "approval_mode: must be one of guide, commander, strict"),
        ("approval_mode: guide", "approval_mode: [a, b]", 7, "approval_mode: must be one of guide, commander, strict"),
        ("format_version: 1", "format_version: one", 2, "format_version: must be a whole number"),
        ("profile: default", "profile: ../etc", 4, "profile: "),
        ("model: offline", "model: {a: 1}", 6, "model: must be text"),
        ("active_index:", "active_index: ../x", 8, "active_index: "),
        (GOOD[GOOD.index("settings:") : GOOD.index("team")], "settings: 7\n", 5, "settings: must be a mapping"),
    ],
)
def test_wrong_values_name_file_line_and_field(aries_home: Path, old: str, new: str, line: int, expected: str) -> None:
    workspace = _workspace(GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as caught:
        workspace.setting("approval_mode")
    message = caught.value.message
    assert message.startswith(f"{workspace.meta_path}:{line}: {expected}"), message
    assert "\n" not in message


def test_unknown_keys_and_comments_survive_an_update(aries_home: Path) -> None:
    workspace = _workspace(GOOD)
    config = workspace.config
    assert config.settings.approval_mode == "guide" and config.model_extra == {"team": "research"}
    assert workspace.setting("future_setting") == [1, 2]
    workspace.update(approval_mode="strict")
    text = workspace.meta_path.read_text(encoding="utf-8")
    assert "# my notes about this workspace" in text and "# how careful" in text and "# from a newer Aries" in text
    assert "team: research" in text and "approval_mode: strict" in text
    assert Workspace(workspace.root, "demo").setting("approval_mode") == "strict"


def test_a_refused_update_leaves_the_file_alone(aries_home: Path) -> None:
    workspace = _workspace(GOOD)
    before = workspace.meta_path.read_bytes()
    with pytest.raises(ConfigError, match="approval_mode: must be one of"):
        workspace.update(approval_mode="yolo")
    assert workspace.meta_path.read_bytes() == before
    assert workspace.setting("approval_mode") == "guide"


def test_the_cli_says_file_line_and_field_without_a_traceback(aries_home: Path) -> None:
    workspace = _workspace(GOOD.replace("approval_mode: guide", "approval_mode: yolo", 1))
    env = {**os.environ, "ARIES_HOME": str(aries_home), "PYTHONPATH": str(REPO)}
    commands = (
        ["workspace", "list", "--json"],
        ["-w", "demo", "rag", "query", "x"],
        ["workspace", "open", "demo", "--check"],
    )
    for argv in commands:
        done = subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, env=env, timeout=60)
        combined = done.stdout + done.stderr
        assert "Traceback" not in combined, (argv, combined)
        assert f"{workspace.meta_path}:7: approval_mode: must be one of guide, commander, strict" in combined, argv


def test_environment_settings_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = env_settings({"AXIOMME_EMBEDDER": "HASH", "AXIOMME_MIN_SCORE": "0.4", "ARIES_HOME": "/x"})
    assert settings.embedder == "hash" and settings.min_score == 0.4 and settings.home == Path("/x")
    assert env_settings({}) == EnvSettings()
    with pytest.raises(ConfigError, match="AXIOMME_RETRIEVAL_BACKEND='disk': must be one of sqlite, memory"):
        env_settings({"AXIOMME_RETRIEVAL_BACKEND": "disk"})
    with pytest.raises(ConfigError, match="AXIOMME_EMBEDDER_THREADS='two': must be a whole number"):
        env_settings({"AXIOMME_EMBEDDER_THREADS": "two"})
    with pytest.raises(ConfigError, match="AXIOMME_EMBEDDER_THREADS='0'"):
        env_settings({"AXIOMME_EMBEDDER_THREADS": "0"})
    for name, info in EnvSettings.model_fields.items():  # every field is a documented variable
        assert info.alias and info.description, name


def test_every_workspace_setting_is_documented() -> None:
    from services.workspace.config import RetrievalConfig, WorkspaceConfig, WorkspaceSettings

    for model in (WorkspaceConfig, WorkspaceSettings, RetrievalConfig):
        for name, info in model.model_fields.items():
            assert info.description or name == "settings", (model.__name__, name)
