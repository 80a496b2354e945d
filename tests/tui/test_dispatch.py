"""The slash-command table and its handlers; the controllers' reach into the App."""

from __future__ import annotations

import ast
from pathlib import Path

from app.commands import HANDLERS
from widgets.commands import COMMANDS

APP = Path(__file__).resolve().parents[2] / "app"


def test_every_row_of_the_table_has_a_handler_and_every_handler_a_row() -> None:
    assert sorted(command.handler for command in COMMANDS) == sorted(HANDLERS)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_controllers_reach_the_app_only_through_the_host_protocol() -> None:
    """No controller imports the App (not even for typing), and none calls into it from a thread:
    a worker thread posts messages (``call_from_thread`` is nowhere in app/)."""
    controllers = sorted((APP / "commands").glob("*.py"))
    assert len(controllers) >= 10
    for path in [*controllers, APP / "palette.py", APP / "sessions.py"]:
        assert "app.aries_app" not in _imports(path), path
    for path in APP.rglob("*.py"):
        assert "call_from_thread" not in path.read_text(encoding="utf-8"), path
