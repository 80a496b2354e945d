"""``/trust``: review an imported workspace's settings in a modal and, on ``t``, put them in force.

The App holds the workspace's lease, so trusting happens here (in a thread worker), then the session
reads its policy, profile and settings again (``Session.reload_settings``) and the header is redrawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.host import run_task
from widgets.messages import SessionChanged

if TYPE_CHECKING:
    from app.host import Host


class TrustController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def offer(self) -> None:
        """When a workspace that needs a review opens: say so once, with the way to review it."""
        session = self.host.session
        if session is None or not session.trust.needs_review:
            return
        self.host.notify(
            f"{session.trust.reason}. Aries's defaults are in force; /trust reviews them.",
            title=f"Workspace {session.workspace.name}: {session.trust.label}",
            severity="warning",
            timeout=12,
        )

    def review(self) -> None:
        from screens.trust import TrustScreen
        from services.trust.records import review_authority, workspace_trust
        from services.trust.review import review

        session = self.host.require_session()
        state = workspace_trust(session.workspace.root, ephemeral=session.workspace.ephemeral)
        if not state.needs_review:
            self.host.say(f"Workspace {session.workspace.name}: {state.reason}; nothing to review.", "trust")
            return
        after, before = review_authority(session.workspace.root)
        name = session.workspace.name

        def decided(yes: bool | None) -> None:
            if yes:
                self._trust(name)

        self.host.push_screen(TrustScreen(name, state, review(after, before)), decided)

    def _trust(self, name: str) -> None:
        from services.trust.records import TrustReport, trust

        session = self.host.session
        if session is None or session.workspace.name != name:
            return

        def trusted(report: TrustReport) -> None:
            session.reload_settings()  # on the App's thread; an error here is the same one line
            restored = f" ({'; '.join(report.restored)})" if report.restored else ""
            self.host.say(
                f"Workspace {name} trusted by {report.trusted_by}: its settings{restored} are in force. "
                "A change made outside Aries takes them out of force until it is reviewed again.",
                "trust",
            )
            self.host.publish(SessionChanged(session))

        run_task(self.host, "Trust", lambda: trust(session.workspace.root), trusted, group="trust")
