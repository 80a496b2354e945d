"""The App's key map: every binding with an ``id`` (so keys can be remapped from config) and a tooltip
(shown by F1 and the key bar). The actions are the App's (``action_<name>``)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

BINDINGS: list[BindingType] = [
    Binding(
        "ctrl+o",
        "switch_workspace",
        "Workspaces",
        id="workspace.switch",
        tooltip="Open the workspace switcher (fuzzy filter, Enter opens, Ctrl+N creates)",
    ),
    Binding("f1", "help", "Help", id="help", tooltip="List every command and key"),
    Binding("f2", "focus_pane('transcript')", "Transcript", id="focus.transcript", tooltip="Focus the Transcript pane"),
    Binding(
        "f3",
        "focus_pane('context')",
        "Context",
        id="focus.context",
        tooltip="Focus the Context pane (retrieved chunks)",
    ),
    Binding(
        "f4",
        "focus_pane('approvals')",
        "Approvals",
        id="focus.approvals",
        tooltip="Focus the Approvals pane (pending tool calls)",
    ),
    Binding("f5", "focus_pane('artifacts')", "Artifacts", id="focus.artifacts", tooltip="Focus the Artifacts pane"),
    Binding(
        "f6",
        "context_browse",
        "Context tree",
        show=False,  # the workbench's key bar stays as it is; F1 and the palette list it
        id="context.browse",
        tooltip="Open the context browser: the axiom:// scopes, L0/L1 previews, files",
    ),
    Binding(
        "ctrl+x",
        "cancel",
        "Cancel",
        priority=True,  # over the prompt's own Ctrl+X (cut), but only while something runs (check_action)
        id="cancel",
        tooltip="Cancel the running turn (mid-stream, mid-tool or waiting for approval), else stop indexing "
        "after the current file",
    ),
    Binding(
        "ctrl+f",
        "screen.find",
        "Find",
        show=False,
        priority=True,
        id="transcript.find",
        tooltip="Find in the conversation (Enter/↓/F3 next, ↑/Shift+F3 previous, Esc closes)",
    ),
    Binding(
        "ctrl+g",
        "screen.external_editor",
        "Editor",
        show=False,
        id="prompt.external_editor",
        tooltip="Write the message in $VISUAL/$EDITOR (e.g. code --wait); it comes back into the prompt",
    ),
    Binding(
        "escape",
        "focus_prompt",
        "Prompt",
        show=False,
        id="focus.prompt",
        tooltip="Back to the prompt; at the prompt, the newest message typed ahead back to edit (again: removed)",
    ),
    Binding(  # priority: a modal screen hides the App's other keys; Ctrl+Q works from every one of them
        "ctrl+q",
        "quit",
        "Quit",
        id="quit",
        tooltip="Leave Aries (asks first when calls wait for approval)",
        priority=True,
    ),
]

PALETTE_ROW = ("ctrl+p", "Palette", "Command palette: workspace and help commands")
"""The palette's key, listed by F1 with the bindings (Textual binds it itself)."""

SELECTION_ROW = (
    "ctrl+c",
    "Copy selection",
    "Drag over the transcript to select, then Ctrl+C: the source text (a paragraph as written, code with its "
    "indentation), control and bidi characters removed. Shift+drag (Option+drag on macOS): your terminal's own "
    "selection",
)
"""The mouse selection's copy (Textual binds Ctrl+C itself), listed by F1 with the bindings."""
