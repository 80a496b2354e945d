"""``/profile list | use NAME | show NAME`` for the App, and the palette's profile picker.

A small controller: the session does the work (``Session.use_profile``: persisted, gateway rebound,
audited, a notice in the conversation); this only lists, opens the viewer and refreshes the header.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING

from widgets.commands import Action, CommandError, Named
from widgets.messages import SessionChanged

if TYPE_CHECKING:
    from app.host import Host
    from services.profiles import ProfileEntry
    from services.session.session import Session


class ProfileController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def command(self, parsed: Action | Named) -> None:
        """The parsed ``/profile`` line: ``list``, ``use NAME``, ``show NAME``."""
        if isinstance(parsed, Action):
            self.list()
        elif parsed.action == "use":
            self.use(parsed.name)
        else:
            self.show(parsed.name)

    def check_in_background(self) -> None:
        """Load the active profile in a thread; if it is broken, the session records an error notice
        and the header is refreshed to say so. The shipped ``default`` profile with no workspace copy
        cannot be broken (a test holds it so): nothing to load, and an idle workbench does not pay for
        the profile parser."""
        session = self.host.session
        if session is not None and session.profile_may_set():
            self.host.run_worker(partial(self._check, session), group="profile", exit_on_error=False)

    async def _check(self, session: Session) -> None:
        def check() -> None:
            if not session.closed:
                session.profile()

        await asyncio.to_thread(check)
        if session.profile_broken and self.host.session is session:
            self.host.publish(SessionChanged(session))

    def entries(self) -> list[ProfileEntry]:
        from services.profiles import list_profiles

        session = self.host.session
        return list_profiles(session.workspace.root if session is not None else None)

    def list(self) -> None:
        session = self.host.require_session()
        lines = [f"Profiles (in use: {session.profile_name}; * marks it):"]
        for entry in self.entries():
            mark = "*" if entry.name == session.profile_name else " "
            text = f"BROKEN — {entry.error}" if entry.error else entry.description
            lines.append(f"{mark} {entry.name}  ({entry.origin})  {text}")
        lines.append("Switch with /profile use NAME; read one with /profile show NAME.")
        self.host.say("\n".join(lines), "profile")

    def use(self, name: str) -> None:
        session = self.host.require_session()
        session.use_profile(name)  # a broken or unknown profile raises ProfileError: reported, nothing changes
        self.host.publish(SessionChanged(session))  # its notice reaches the transcript as an entry

    def show(self, name: str) -> None:
        from screens.profile_viewer import ProfileViewer
        from services.profiles import profile_path

        session = self.host.require_session()
        path, origin = profile_path(name, session.workspace.root)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise CommandError(f"{path}: cannot be read ({exc.strerror})") from None
        error = next((e.error for e in self.entries() if e.name == name), None)
        # Shown as it is found: profiles/NAME.yaml beside Aries (shipped) or in the workspace.
        shown = f"profiles/{path.name}" if origin == "shipped" else f"<workspace>/profiles/{path.name}"
        self.host.push_screen(ProfileViewer(name, shown, origin, text, error))
