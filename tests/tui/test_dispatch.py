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


async def test_a_misuse_and_a_failed_task_are_one_line_each() -> None:
    """Through the App: a misuse is one error line with the generated usage; blocking work run by
    ``run_task`` that fails with a typed error is one error line titled by its command."""
    from app.aries_app import AriesApp
    from services.workspace.manager import WorkspaceManager
    from tests.tui.helpers import Messages
    from tests.tui.helpers import command as typed

    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=(160, 48), message_hook=messages) as pilot:
        await app.ready()
        await typed(pilot, "/rag query storms -k 0")
        note = await messages.notified(pilot, "-k is between 1 and 100.")
        assert "Usage: /rag index add PATH [--name ID] |" in note and "\n" not in note
        await typed(pilot, "/rag index use nothing-here")
        note = await messages.notified(pilot, "nothing-here")
        assert note.startswith("/rag index use ") and "Traceback" not in note
        assert app.session is not None and app.is_running


async def test_a_typed_error_raised_after_the_work_is_one_line_too() -> None:
    """``run_task``'s ``then`` (on the App's thread: a session reloading its settings after ``/trust``,
    a result shown) may fail with a typed error as well: the same one line titled by the task, not an
    internal error of the worker."""
    from app.aries_app import AriesApp
    from app.host import run_task
    from services.errors import InvalidInput
    from services.workspace.manager import WorkspaceManager
    from tests.tui.helpers import Messages

    WorkspaceManager().create("demo")
    app = AriesApp("demo")
    messages = Messages()
    async with app.run_test(size=(160, 48), message_hook=messages) as pilot:
        await app.ready()

        def shown(value: int) -> None:
            raise InvalidInput(f"cannot show {value}")

        worker = run_task(app, "/probe", lambda: 41 + 1, shown, group="probe")
        await worker.wait()
        note = await messages.notified(pilot, "cannot show 42")
        assert note.startswith("/probe ") and "Internal error" not in note and "Traceback" not in note
        assert app.is_running
