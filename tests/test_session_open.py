"""One ``Session.open()`` for every surface (issue 29, item 8): no surface builds a ``Session`` itself,
and the surfaces differ exactly where ``services.session.opening.RULES`` (and its docstring's table) says:
the audit source, who approves, the lease, creating, and the conversation opened."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from services.errors import ConfigError, InvalidInput, NotFound
from services.session.opening import RULES, Surface, close_session, open_session, take
from services.session.session import Session
from services.workspace.leases import WorkspaceBusy, lease_holder
from services.workspace.manager import WorkspaceManager

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("app", "services", "screens", "widgets")
OPENERS = {
    Surface.TUI: ("app/sessions.py", "app/commands/workspace.py"),
    Surface.CLI: ("app/cli/_common.py",),
    Surface.ASK: ("services/pipe/headless.py",),
    Surface.PLAN: ("app/cli/plan.py",),
    Surface.SERVE: ("app/cli/serve.py",),
    Surface.PLAIN: ("app/plain.py",),
}


def _calls(path: Path) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        inner = func.value.id if isinstance(func.value, ast.Name) else "?"
        return f"{inner}.{func.attr}"
    return "?"


def test_no_product_module_builds_a_session_itself() -> None:
    """``Session(…)`` appears nowhere in the product: every surface goes through ``Session.open``
    (``services/session/opening.py`` builds it from the class it is handed)."""
    offenders = [
        f"{path.relative_to(REPO)}:{call.lineno}"
        for top in PRODUCT
        for path in sorted((REPO / top).rglob("*.py"))
        for call in _calls(path)
        if _name(call) in {"Session", "session.Session"}
    ]
    assert offenders == []


@pytest.mark.parametrize("surface", list(Surface), ids=[s.value for s in Surface])
def test_every_surface_opens_through_session_open(surface: Surface) -> None:
    """Each surface's module names its surface, and opens with ``Session.open`` (or ``take``, the TUI's
    first step, before the current session closes) or the CLI's ``open_session`` over it."""
    text = "\n".join((REPO / rel).read_text(encoding="utf-8") for rel in OPENERS[surface])
    names = {_name(call) for rel in OPENERS[surface] for call in _calls(REPO / rel)}
    spelled = (f"Surface.{surface.name}", f'surface="{surface.value}"', f'surface: str = "{surface.value}"')
    assert any(spelling in text for spelling in spelled)
    assert names & {"Session.open", "take", "open_session"}
    for rel in OPENERS[surface]:  # the lease and the ephemeral workspace are session_open's steps now
        assert not {"acquire_lease", "ephemeral_workspace"} & {_name(c) for c in _calls(REPO / rel)}, rel


def test_the_rules_are_the_documented_table() -> None:
    table = {surface.value: (r.source, r.interactive, r.lease) for surface, r in RULES.items()}
    assert table == {
        "tui": ("operator", True, True),
        "cli": ("cli", False, False),
        "ask": ("cli", False, False),
        "plan": ("plan", False, False),
        "serve": ("cli", False, False),
        "plain": ("operator", False, True),
    }
    import services.session.opening as module

    doc = module.__doc__ or ""
    for surface, rules in RULES.items():  # the docstring's table has one row per surface, as the rules say
        row = next(line.split() for line in doc.splitlines() if line.startswith(f"{surface.value} "))
        assert row[1] == rules.source and row[2] == ("yes" if rules.interactive else "no")
        assert row[4 if rules.interactive else 3] == ("yes" if rules.lease else "no")


@pytest.mark.parametrize("surface", list(Surface), ids=[s.value for s in Surface])
def test_a_named_workspace_opens_with_its_surfaces_rules(surface: Surface) -> None:
    WorkspaceManager().create("w")
    session = Session.open("w", surface=surface)
    try:
        rules = RULES[surface]
        assert session.source == rules.source
        assert (session.approver == session.approvals.ask) is rules.interactive
        assert (session.lease is not None) is rules.lease
        assert (lease_holder(session.workspace) is not None) is rules.lease
        assert session.workspace.name == "w" and not session.workspace.ephemeral
    finally:
        close_session(session)
    assert lease_holder(session.workspace) is None  # released with the session


def test_the_tui_holds_the_lease_and_the_one_shot_commands_do_not() -> None:
    WorkspaceManager().create("w")
    tui = Session.open("w", surface=Surface.TUI)
    try:
        with pytest.raises(WorkspaceBusy):
            take("w", surface=Surface.TUI)  # a second TUI on it: refused, before any repair
        cli = Session.open("w", surface=Surface.CLI)  # a one-shot command still opens it (it only reports)
        close_session(cli)
        assert lease_holder(tui.workspace) is not None  # and leaves the TUI's lease alone
    finally:
        close_session(tui)


def test_create_missing_names_and_no_name() -> None:
    with pytest.raises(NotFound, match="aries workspace new nowhere"):
        Session.open("nowhere", surface=Surface.CLI)
    assert not WorkspaceManager().exists("nowhere")
    created = Session.open("fresh", surface=Surface.TUI, create=True)
    close_session(created)
    assert WorkspaceManager().exists("fresh")
    for surface in (Surface.TUI, Surface.CLI):
        ephemeral = Session.open(None, surface=surface)
        root = ephemeral.workspace.root
        assert ephemeral.workspace.ephemeral and (ephemeral.lease is not None) is RULES[surface].lease
        close_session(ephemeral)
        assert not root.exists()  # the workspace goes with its session


def test_the_conversation_choice() -> None:
    workspace, _ = WorkspaceManager().create("w")
    first = Session.open("w", surface=Surface.CLI, conversation="new")
    first.conversation.notice("hello", title="t")
    conversation_id = first.conversation.conversation_id
    close_session(first)
    last = Session.open("w", surface=Surface.CLI)  # the default: the last one
    assert last.conversation.conversation_id == conversation_id
    close_session(last)
    for new in ("new", None):
        fresh = Session.open("w", surface=Surface.ASK, conversation=new)
        assert fresh.conversation.conversation_id != conversation_id
        assert not fresh.conversation.transcript.path.exists()  # its file comes with its first entry
        close_session(fresh)
    by_id = Session.open("w", surface=Surface.PLAN, conversation=conversation_id[:8])
    assert by_id.conversation.conversation_id == conversation_id
    close_session(by_id)


def test_a_session_that_cannot_be_made_leaves_nothing_held() -> None:
    """An unknown conversation id: the error, and the lease taken for it released (the TUI then
    opens the last conversation on the same lease, ``app.sessions``)."""
    WorkspaceManager().create("w")
    with pytest.raises(NotFound, match="no conversation"):
        Session.open("w", surface=Surface.TUI, conversation="0123456789abcdef")
    again = take("w", surface=Surface.TUI)  # would be WorkspaceBusy if the lease were left held
    assert again.lease is not None
    again.release()
    with pytest.raises(ConfigError):
        Session.open("w", surface=Surface.CLI, mode="reckless")


def test_the_tui_refuses_a_broken_workspace_yaml_at_once() -> None:
    workspace, _ = WorkspaceManager().create("w")
    workspace.meta_path.write_text("settings: [not, a, mapping\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        take("w", surface=Surface.TUI)
    assert lease_holder(workspace) is None


def test_a_workspace_needing_review_is_said_once_where_asked() -> None:
    workspace, _ = WorkspaceManager().create("w")
    record = workspace.root.parent / ".trust" / "w.json"
    record.parent.mkdir()
    record.write_text("not json", encoding="utf-8")  # a damaged trust record: "changed", needs review
    said: list[str] = []
    session = Session.open("w", surface=Surface.CLI, on_warning=said.append)
    close_session(session)
    assert len(said) == 1 and said[0].startswith("workspace w is changed since trusted:")
    quiet = Session.open("w", surface=Surface.ASK)  # no one to tell: nothing said, the session opens
    assert quiet.trust.needs_review
    close_session(quiet)
    mine: list[str] = []
    close_session(Session.open(None, surface=Surface.CLI, on_warning=mine.append))
    assert mine == []  # an ephemeral workspace is always the operator's own


def test_open_session_builds_from_the_class_it_is_given() -> None:
    """``session_open`` never imports ``services.session.session`` (no import circle): ``Session.open`` hands
    it the class, and a subclass gets its own kind back."""

    class Recorded(Session):
        pass

    WorkspaceManager().create("w")
    session = open_session(Recorded, "w", surface=Surface.CLI)
    assert type(session) is Recorded
    close_session(session)
    source = (REPO / "services" / "session" / "opening.py").read_text(encoding="utf-8")
    assert "services.session.session " not in source and "services.session.session\n" not in source
    assert "from services.session.session import" not in source


def test_the_cli_needs_a_workspace_where_it_says_so() -> None:
    import argparse

    from app.cli._common import open_session as cli_open

    with pytest.raises(InvalidInput, match="pass -w"), cli_open(argparse.Namespace(), need="pass -w NAME"):
        pass


def test_aries_ask_says_a_workspace_under_review_like_every_command() -> None:
    from services.pipe.headless import run_ask
    from services.pipe.request import parse_input

    workspace, _ = WorkspaceManager().create("w")
    record = workspace.root.parent / ".trust" / "w.json"
    record.parent.mkdir()
    record.write_text("not json", encoding="utf-8")
    said: list[str] = []
    result = run_ask(parse_input("what grazes?", None), workspace="w", on_warning=said.append)
    assert result.exit_code == 0 and result.response["answer"]
    assert len(said) == 1 and "workspace w is changed since trusted" in said[0]
