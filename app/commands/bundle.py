"""``/workspace export PATH`` and ``/workspace import BUNDLE [NAME]`` in the TUI (services.bundles).

Both run in a thread worker with the status line showing progress; replacing an existing workspace
asks first (the CLI's ``--force``), and the workspace that is open here is never replaced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.host import run_task
from services.errors import AriesError
from widgets.messages import StatusStarted

if TYPE_CHECKING:
    from app.host import Host


class BundleController:
    def __init__(self, host: Host) -> None:
        self.host = host

    def _progress(self, verb: str) -> Callable[[int, int, str], None]:
        host = self.host

        def report(done: int, total: int, path: str) -> None:  # in the worker's thread: posted
            percent = int(100 * done / total) if total else 100
            host.publish(StatusStarted("bundle", f"{verb} {percent}%"))

        return report

    def export(self, raw_path: str) -> None:
        session = self.host.require_session()
        if session.workspace.ephemeral:
            raise AriesError("an ephemeral workspace is not exported; create one with /workspace new NAME")
        path, host, progress = self.host.resolve_path(raw_path), self.host, self._progress("exporting")

        def export() -> Any:
            from app import __version__
            from services.bundles.export import export_workspace

            return export_workspace(session.workspace, path, aries_version=__version__, progress=progress)

        def said(report: Any) -> None:
            host.say(
                f"Exported workspace {session.workspace.name}: {report.files} files to {report.path} "
                f"({report.bytes} bytes, sha256 {report.sha256[:16]}…).",
                "workspace export",
            )

        run_task(host, "Export", export, said, group="bundle", status="exporting…", key="bundle")

    def import_(self, raw_bundle: str, name: str | None) -> None:
        self.host.run_worker(
            self._import(self.host.resolve_path(raw_bundle), name), group="bundle", exit_on_error=False
        )

    async def _import(self, bundle: Path, name: str | None) -> None:
        from services.bundles.importer import import_bundle, peek_manifest, rebuild_indexes

        host = self.host
        try:
            manifest = await asyncio.to_thread(peek_manifest, bundle)
            target = name or str(manifest.workspace.get("name") or "")
            force = False
            if target and host.manager.exists(target):
                if target == host.workspace_name:
                    raise AriesError(f"workspace {target} is open here; switch to another one before replacing it")
                force = await self._confirm(target, bundle)
                if not force:
                    host.say(f"Import of {bundle.name} cancelled: workspace {target} was kept.", "workspace import")
                    return
            host.status_start("bundle", "importing…")
            report = await asyncio.to_thread(
                import_bundle, bundle, host.manager, name=name, force=force, progress=self._progress("importing")
            )
            host.status_start("bundle", "rebuilding its indexes from their manifests…")
            failed = await asyncio.to_thread(rebuild_indexes, host.manager, report)
        except AriesError as exc:
            host.report_error(exc.message, "Import")
            return
        finally:
            host.status_stop("bundle")
        how = "replaced" if report.replaced else "created"
        held = (
            f" Quarantined until you trust it (open it, then /trust): {'; '.join(report.quarantined)}."
            if report.quarantined
            else ""
        )
        broken = "".join(f" Index {index}: vectors not rebuilt ({why})." for index, why in sorted(failed.items()))
        broken += "".join(f" {line}" for line in report.unreadable)
        host.say(
            f"Workspace {report.name} {how} from {bundle.name} ({report.files} files).{held}{broken} "
            f"Open it with /workspace open {report.name}.",
            "workspace import",
        )

    async def _confirm(self, target: str, bundle: Path) -> bool:
        from screens.confirm import ConfirmScreen

        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        screen = ConfirmScreen(
            f"Replace workspace {target}?",
            f"{bundle} holds a workspace named {target}. Importing it replaces the existing workspace "
            "(its transcripts, artifacts and indexes) for good.\n\ny replaces it · n keeps it",
        )
        self.host.push_screen(screen, lambda yes: answer.set_result(bool(yes)))
        return await answer
