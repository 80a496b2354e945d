"""Snapshot tests of the screens at 160×48. Baselines live in snapshots/test_snapshots/."""

from __future__ import annotations

from app.aries_app import AriesApp
from services.workspace.manager import WorkspaceManager
from tests.tui.fixtures import workspace_with_transcript

SIZE = (160, 48)


def test_main_screen_empty(snap_compare) -> None:
    """You should see the header with workspace demo, profile default, model offline and approvals guide;
    the empty Transcript pane with its hint, the Context, Approvals and Artifacts panes with their empty
    states, the prompt with its placeholder, and the footer keys."""
    WorkspaceManager().create("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_main_screen_with_transcript(snap_compare) -> None:
    """You should see four transcript entries (you, assistant, a builtin:fs:list_dir tool entry marked
    success in 4 ms listing a.md, b.md and c.md with their sizes, and an aries note) with times
    09:00:00 to 09:00:04, the conversation id in the pane's bottom border, and findings.md listed and
    previewed in the Artifacts pane."""
    workspace_with_transcript("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE)


def test_workspace_switcher(snap_compare) -> None:
    """You should see the switcher modal: the filter "al", then alpha and alpine matching it (alpha
    highlighted, the matched letters marked), beta (the current one) and gamma-ray filtered out, and
    the key hints."""
    for name in ("alpha", "alpine", "beta", "gamma-ray"):
        WorkspaceManager().create(name)
    assert snap_compare(AriesApp("beta"), terminal_size=SIZE, press=["ctrl+o", "a", "l"])


def test_help_screen(snap_compare) -> None:
    """You should see the help modal: every command of the dispatch table (/help, /workspace, /artifact,
    /fs, /shell, /web, /desktop, /tool, /undo, /policy, /doctor, /context, /serve, /new, /quit), each usage
    in bold with its summary beneath (now also /history, /resume, /fork, /pin, /unpin, /checkpoint,
    /checkpoints, /rewind, /copy, /usage, /instructions, /tools, /compact, so the list scrolls), then the
    Keys table (Ctrl+O, F1 to F6, Ctrl+X, Ctrl+F, Esc, Ctrl+P, Ctrl+Q with what each does; one notation,
    the README's), further down the keys of the approval modal, the chunk viewer, the workspace switcher
    and the /history search hits."""
    WorkspaceManager().create("demo")
    assert snap_compare(AriesApp("demo"), terminal_size=SIZE, press=[*"/help", "enter"])
