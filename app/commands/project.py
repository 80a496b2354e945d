"""The workspace's own commands and instructions in the TUI: ``/NAME`` (``commands/NAME.md``) and
``/instructions`` (``AGENTS.md``, and the commands).

What is read and whether it is in force is decided in ``services`` (``InForce.commands`` and
``InForce.instructions``: empty while the workspace's settings are not in force; the turn of a command
by ``services.session.command_turn``); this module registers the commands in the App's grammar and
shows what is there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from services.errors import AriesError

if TYPE_CHECKING:
    from app.commands.assistant import AssistantController
    from app.host import Host
    from services.session.inforce import InForce
    from widgets.command_spec import CommandRegistry
    from widgets.workspace_commands import WorkspaceRun


class _Controllers(Protocol):
    """What a workspace command's handler needs of ``app.commands.Commands`` (not imported: it imports
    this module)."""

    @property
    def project(self) -> ProjectController: ...


def register_workspace_commands(registry: CommandRegistry[Any], in_force: InForce | None) -> None:
    """The registry's run-time commands made those of ``in_force`` (a built-in's name is refused by the
    registry itself: the command file is listed as shadowed by ``/instructions``)."""
    registry.drop_runtime()
    if in_force is None or not in_force.commands:
        return
    from widgets.workspace_commands import workspace_spec

    for command in in_force.commands:
        spec = workspace_spec(command.name, command.description, command.arguments, command.source)
        registry.register(spec, _run)


def _run(commands: _Controllers, parsed: WorkspaceRun) -> None:
    commands.project.run(parsed)


class ProjectController:
    def __init__(self, host: Host, assistant: AssistantController) -> None:
        self.host = host
        self.assistant = assistant
        self.drafts: dict[str, str] = {}  # a refused edit's text, by command name: reopened next time

    def run(self, parsed: WorkspaceRun) -> None:
        """``/NAME args…``: the command's template with the arguments is the turn's message, sent with
        the tools the command may use (its own within the active profile's)."""
        from services.session.command_turn import command_turn

        session = self.host.require_session()
        try:
            turn = command_turn(session.in_force, parsed.name, parsed.words())
        except AriesError as exc:
            self.host.report_error(exc.message, f"/{parsed.name}")
            return
        self.assistant.ask(turn.text, only=turn.only)

    def instructions(self, parsed: Any = None) -> None:
        """``/instructions``: the project instructions in force (or why there are none) and the workspace
        commands, each with its usage; command files that are no command, one line each.
        ``/instructions edit NAME``: :meth:`edit`."""
        if getattr(parsed, "action", None) == "edit":
            self.edit(parsed.name)
            return
        session = self.host.require_session()
        in_force = session.in_force
        lines = _instruction_lines(in_force)
        lines.append("")
        if in_force.commands:
            lines.append("Workspace commands (commands/NAME.md; built-in commands always win):")
            for command in in_force.commands:
                about = f" — {command.description}" if command.description else ""
                lines.append(f"  {command.usage}{about}")
        else:
            lines.append("No workspace commands in force (a file commands/NAME.md becomes /NAME).")
        lines += [f"  not a command: {problem}" for problem in in_force.command_problems]
        self.host.say("\n".join(lines), "instructions")

    def edit(self, name: str) -> None:
        """``/instructions edit NAME``: ``commands/NAME.md`` (or a new file's template) in $VISUAL/$EDITOR,
        the App suspended. What is saved is checked and written through ``services.trust.edits``, so a
        trusted import stays trusted, and is in force at once. A file that is no command is refused in
        one line and the draft kept: the same command reopens it. An editor that fails changes nothing."""
        from services.trust.edits import command_draft, editable, write_command
        from widgets.prompt.external import edit_in_editor

        session = self.host.require_session()
        root, ephemeral, title = session.workspace.root, session.workspace.ephemeral, f"/instructions edit {name}"
        try:
            draft = self.drafts.get(name) or command_draft(root, name, ephemeral=ephemeral)
        except AriesError as exc:
            self.host.report_error(exc.message, title)
            return
        edited = edit_in_editor(self.host, draft)
        if edited.text is None:
            self.host.report_error(f"{edited.problem} Nothing changed.", title)
            return
        text = edited.text if edited.text.endswith("\n") else edited.text + "\n"  # a file ends with a newline
        if text == draft and name not in self.drafts:
            self.host.notify(f"commands/{name}.md unchanged.", title=title)
            return
        try:
            editable(root, name, ephemeral=ephemeral)  # the workspace may have changed meanwhile
            path = write_command(root, name, text, ephemeral=ephemeral)
        except AriesError as exc:
            self.drafts[name] = text
            self.host.report_error(f"Not saved: {exc.message} (your draft is kept: {title} reopens it)", title)
            return
        self.drafts.pop(name, None)
        session.reread_commands()  # the registry follows the new value: /NAME works at once
        self.host.notify(f"commands/{path.name} saved: /{name} is in force.", title=title)


def _instruction_lines(in_force: InForce) -> list[str]:
    from services.workspace.paths import AGENTS_FILE, QUARANTINE_DIR

    name = in_force.workspace.name
    if in_force.instructions:
        found = in_force.instructions[0]
        head = (
            f"Project instructions from {AGENTS_FILE} of workspace {name} ({found.full_chars:,} characters), in the "
            "system prompt of every turn (/usage counts them):"
        )
        return [head, *([found.notice] if found.cut else []), "", found.text]
    if in_force.trust.status == "changed":
        return [
            f"No project instructions are sent: workspace {name}'s settings changed since you trusted them "
            f"(review them with /trust)."
        ]
    if in_force.trust.pending and (in_force.workspace.root / QUARANTINE_DIR / AGENTS_FILE).is_file():
        return [f"No project instructions are sent: the imported {AGENTS_FILE} waits for your review (/trust)."]
    return [f"No project instructions: workspace {name} has no {AGENTS_FILE} at its root."]


__all__ = ["ProjectController", "register_workspace_commands"]
