"""The operator's settings store (``$ARIES_HOME/settings.json``): a round trip, a corrupt file reported
in one line and left as it was, writes that are atomic and do not lose a concurrent change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.session.inforce import Operator, resolve
from services.settings.operator import (
    GrantOrigin,
    GrantPattern,
    LastingGrant,
    Notifications,
    OperatorSettings,
    OperatorSettingsError,
    WorkspaceIdentity,
    load_settings,
    settings_path,
    update_settings,
)
from services.workspace.manager import WorkspaceManager

REPO = Path(__file__).resolve().parents[1]


def test_the_store_lives_in_aries_home_outside_every_workspace(aries_home: Path) -> None:
    assert settings_path() == aries_home / "settings.json"
    workspace, _ = WorkspaceManager().create("demo")
    assert not settings_path().is_relative_to(workspace.root)
    assert load_settings() == OperatorSettings() and not settings_path().exists()  # defaults, nothing written
    assert resolve(workspace, Operator()).operator_settings == OperatorSettings()


def test_a_round_trip_keeps_every_field(aries_home: Path) -> None:
    grant = LastingGrant(
        id="g000001",
        workspace=WorkspaceIdentity(path="/w", key="f" * 32),
        tool_id="builtin:fs:read_text",
        pattern=GrantPattern(kind="path", path="/w/docs", folder=True),
        origin=GrantOrigin(by="cli", at="2026-01-01T09:00:00.000Z"),
    )

    def change(settings: OperatorSettings) -> OperatorSettings:
        return settings.model_copy(
            update={
                "theme": "nord",
                "notifications": Notifications(bell=False, desktop=True, long_turn_seconds=9),
                "grants": [grant],
            }
        )

    written = update_settings(change)
    assert load_settings() == written
    data = json.loads(settings_path().read_text(encoding="utf-8"))
    assert (
        data["format"] == 1
        and data["theme"] == "nord"
        and data["notifications"]
        == {
            "bell": False,
            "desktop": True,
            "long_turn_seconds": 9,
        }
    )
    assert data["grants"][0]["tool_id"] == "builtin:fs:read_text"
    assert [p.name for p in settings_path().parent.iterdir() if p.name.startswith("settings.json")] == ["settings.json"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "Invalid JSON"),
        ('{"format": 2}', "format"),
        ('{"theme": 3}', "theme"),
        ('{"grants": [{"tool_id": "x"}]}', "grants.0.id"),
    ],
)
def test_a_corrupt_file_is_one_line_and_never_overwritten(aries_home: Path, text: str, reason: str) -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(OperatorSettingsError) as caught:
        load_settings()
    message = caught.value.message
    assert message.startswith(f"{path}: ") and reason in message and "\n" not in message
    with pytest.raises(OperatorSettingsError):
        update_settings(lambda settings: settings.model_copy(update={"theme": "nord"}))
    assert path.read_text(encoding="utf-8") == text  # left as the operator has it


WRITER = """
import sys
from services.settings.operator import update_settings
from services.settings.operator import GrantOrigin, GrantPattern, LastingGrant, WorkspaceIdentity
for n in range(int(sys.argv[2])):
    grant = LastingGrant(
        id=f"g{n}", workspace=WorkspaceIdentity(path=sys.argv[1], key="k"), tool_id=f"t{n}",
        pattern=GrantPattern(kind="argv", argv=("ls",)), origin=GrantOrigin(by="cli", at="t"),
    )
    update_settings(lambda s: s.model_copy(update={"grants": [*s.grants, grant]}))
"""


def test_concurrent_writers_lose_no_change_and_leave_a_whole_file(aries_home: Path) -> None:
    """Two processes each add grants at once: the lock makes each read-change-write whole (none lost);
    the atomic write means a reader never sees half a file."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, name, "15"], cwd=REPO) for name in ("/one", "/two")]
    while any(w.poll() is None for w in writers):
        if settings_path().exists():
            load_settings()  # never a torn file
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    grants = load_settings().grants
    assert sorted((g.workspace.path, g.tool_id) for g in grants) == sorted(
        (path, f"t{n}") for path in ("/one", "/two") for n in range(15)
    )
