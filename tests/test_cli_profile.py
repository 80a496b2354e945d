"""``aries profile list|show|use`` as a user runs it: a real subprocess per call."""

from __future__ import annotations

import json
from pathlib import Path

from services.profiles.audit import switches
from services.workspace.manager import WorkspaceManager
from tests.test_cli import aries


def test_list_show_use_and_errors(aries_home: Path) -> None:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    workspace, _ = WorkspaceManager().open("demo")
    own = workspace.root / "profiles"
    own.mkdir()
    (own / "broken.yaml").write_text("name: broken\ntools:\n  enable: [teleport]\n", encoding="utf-8")

    listed = aries("-w", "demo", "profile", "list", home=aries_home)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith("* default") for line in lines)
    broken = next(line for line in lines if "broken" in line)
    assert "BROKEN:" in broken and "broken.yaml:3: tools.enable.0: no tool or tool class 'teleport'" in broken

    data = json.loads(aries("-w", "demo", "profile", "list", "--json", home=aries_home).stdout)
    assert data["active"] == "default" and {p["name"] for p in data["profiles"]} >= {"researcher", "auditor"}

    shown = aries("profile", "show", "auditor", home=aries_home)
    assert shown.returncode == 0 and "output_schema:" in shown.stdout and "(shipped)" in shown.stdout.splitlines()[0]

    used = aries("-w", "demo", "profile", "use", "researcher", home=aries_home)
    assert used.returncode == 0 and "profile researcher" in used.stdout
    assert WorkspaceManager().open("demo")[0].profile == "researcher"
    assert switches(workspace.root)[0]["new_profile"] == "researcher"

    for args in (("profile", "use", "nope"), ("profile", "use", "broken")):
        refused = aries("-w", "demo", *args, home=aries_home)
        assert (
            refused.returncode == 2 and refused.stderr.startswith("aries: ") and len(refused.stderr.splitlines()) == 1
        )
    assert WorkspaceManager().open("demo")[0].profile == "researcher"  # unchanged
    assert aries("profile", "use", "auditor", home=aries_home).returncode == 2  # needs -w
