"""The ``aries`` command as a user runs it: a real subprocess per call."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def aries(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARIES_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_new_then_list_shows_the_layout(aries_home: Path) -> None:
    first = aries("workspace", "new", "demo", home=aries_home)
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout
    again = aries("workspace", "new", "demo", home=aries_home)
    assert again.returncode == 0 and "already exists" in again.stdout
    listing = aries("workspace", "list", "--json", home=aries_home)
    rows = json.loads(listing.stdout)
    assert [r["name"] for r in rows] == ["demo"]
    root = Path(rows[0]["path"])
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "artifacts",
        "indexes",
        "transcripts",
        "workspace.yaml",
    ]
    human = aries("workspace", "list", home=aries_home)
    assert "demo" in human.stdout


@pytest.mark.parametrize("name", ["../x", "a/b", ".", "", "x" * 300])
def test_bad_names_are_refused_in_one_line_and_create_nothing(aries_home: Path, name: str) -> None:
    result = aries("workspace", "new", name, home=aries_home)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aries: workspace name")
    assert not (aries_home / "workspaces").exists() or not any((aries_home / "workspaces").iterdir())


def test_open_without_a_terminal_checks_and_reports(aries_home: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    result = aries("workspace", "open", "demo", "--check", "--json", home=aries_home)
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["name"] == "demo" and report["transcript_problems"] == []
    missing = aries("workspace", "open", "nope", home=aries_home)
    assert missing.returncode == 1 and "aries workspace new nope" in missing.stderr


def test_close_clears_a_stale_marker(aries_home: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    marker = aries_home / "workspaces" / "demo" / ".aries-session.json"
    marker.write_text('{"pid": 999999999, "opened_at": "then"}')
    result = aries("workspace", "close", "demo", home=aries_home)
    assert result.returncode == 0 and "stale" in result.stdout
    assert not marker.exists()


def test_artifact_add_and_list(aries_home: Path, tmp_path: Path) -> None:
    aries("workspace", "new", "demo", home=aries_home)
    file = tmp_path / "report.txt"
    file.write_text("findings\n")
    added = aries("-w", "demo", "artifact", "add", str(file), "--description", "the report", "--json", home=aries_home)
    assert added.returncode == 0, added.stderr
    artifact = json.loads(added.stdout)
    assert artifact["created"] and artifact["description"] == "the report"
    assert artifact["provenance"]["kind"] == "cli"
    dup = aries("-w", "demo", "artifact", "add", str(file), home=aries_home)
    assert "already in the registry" in dup.stdout
    listing = json.loads(aries("-w", "demo", "artifact", "list", "--json", home=aries_home).stdout)
    assert [a["name"] for a in listing] == ["report.txt"]
    no_ws = aries("artifact", "list", home=aries_home)
    assert no_ws.returncode != 0 and "--workspace" in no_ws.stderr
    missing = aries("-w", "demo", "artifact", "add", str(tmp_path / "nope"), home=aries_home)
    assert missing.returncode == 1 and "no such file" in missing.stderr


@pytest.mark.parametrize("name", ["../x", "a/b", ""])
def test_tui_refuses_a_bad_workspace_name_before_starting(aries_home: Path, name: str) -> None:
    result = aries("-w", name, home=aries_home)
    assert result.returncode == 2 and result.stderr.startswith("aries: workspace name")
    assert not aries_home.exists()


def test_usage_errors_are_one_line(aries_home: Path) -> None:
    result = aries("workspace", "frobnicate", home=aries_home)
    assert result.returncode == 2 and "aries:" in result.stderr
    assert aries("--version", home=aries_home).stdout.startswith("aries ")
