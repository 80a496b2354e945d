"""``/profile list | use NAME | show NAME`` for the App, and the palette's profile picker.

A small controller: the session does the work (``Session.use_profile``: persisted, gateway rebound,
audited, a notice in the conversation); this only lists, opens the viewer and refreshes the header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.commands import CommandError

if TYPE_CHECKING:
    from app.aries_app import AriesApp
    from services.profiles import ProfileEntry


class ProfileController:
    def __init__(self, app: AriesApp) -> None:
        self.app = app

    def command(self, args: list[str]) -> None:
        if not args or args == ["list"]:
            self.list()
        elif len(args) == 2 and args[0] == "use":
            self.use(args[1])
        elif len(args) == 2 and args[0] == "show":
            self.show(args[1])
        else:
            raise CommandError(f"cannot read '/profile {' '.join(args)}'.")

    def check_in_background(self) -> None:
        """Load the active profile in a thread; if it is broken, the session records an error notice
        and the header is refreshed to say so."""
        session = self.app.session
        if session is None:
            return

        def check() -> None:
            if session.closed:
                return
            session.profile()
            if session.profile_broken and self.app.session is session:
                self.app.call_from_thread(self.app.reload_panes, transcript=False)

        self.app.run_worker(check, thread=True, group="profile", exit_on_error=False)

    def entries(self) -> list[ProfileEntry]:
        from services.profiles import list_profiles

        session = self.app.session
        return list_profiles(session.workspace.root if session is not None else None)

    def list(self) -> None:
        session = self.app.require_session()
        lines = [f"Profiles (in use: {session.profile_name}; * marks it):"]
        for entry in self.entries():
            mark = "*" if entry.name == session.profile_name else " "
            text = f"BROKEN — {entry.error}" if entry.error else entry.description
            lines.append(f"{mark} {entry.name}  ({entry.origin})  {text}")
        lines.append("Switch with /profile use NAME; read one with /profile show NAME.")
        self.app.say("\n".join(lines), "profile")

    def use(self, name: str) -> None:
        session = self.app.require_session()
        session.use_profile(name)  # a broken or unknown profile raises ProfileError: reported, nothing changes
        self.app.reload_panes(transcript=False)  # its notice reaches the transcript as an entry

    def show(self, name: str) -> None:
        from screens.profile_viewer import ProfileViewer
        from services.profiles import profile_path

        session = self.app.require_session()
        path, origin = profile_path(name, session.workspace.root)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror})") from None
        error = next((e.error for e in self.entries() if e.name == name), None)
        # Shown as it is found: profiles/NAME.yaml beside Aries (shipped) or in the workspace.
        shown = f"profiles/{path.name}" if origin == "shipped" else f"<workspace>/profiles/{path.name}"
        self.app.push_screen(ProfileViewer(name, shown, origin, text, error))
