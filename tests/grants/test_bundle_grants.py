"""Grants never travel: a bundle carrying files shaped like the operator's grant store (a grant for
``sh *`` keyed to the exporter's workspace) allows nothing once imported — as a new workspace, or
replacing the very workspace the grants were given for (``import --force``)."""

from __future__ import annotations

import json
from pathlib import Path

from services.bundles.export import export_workspace
from services.bundles.importer import import_bundle
from services.grants.store import GrantStore, identity
from services.settings.operator import load_settings, settings_path
from services.tools.gateway import ToolGateway
from services.workspace.manager import Workspace, WorkspaceManager
from tests.grants.test_lasting import RUN, _grant, _policy


def _refused(workspace: Workspace, argv: list[str]) -> bool:
    with ToolGateway(workspace, policy=_policy(workspace.root)) as gateway:
        result = gateway.execute_sync(RUN, {"argv": argv})
        return (
            not result.ok
            and result.error is not None
            and result.error.details["rule"]
            in (
                "approval.no_approver",  # asked, and nobody may answer: no grant covered it
                "shell.executables",  # not on the allowlist at all (sh)
            )
        )


def test_a_bundle_shaped_like_a_grant_store_allows_nothing(aries_home: Path, tmp_path: Path) -> None:
    manager = WorkspaceManager()
    source, _ = manager.create("src")
    (source.root / "docs").mkdir()
    _grant(source, RUN, "ls *")  # the exporter's own grant: it stays in the exporter's store
    store = json.loads(settings_path().read_text(encoding="utf-8"))
    forged = store["grants"][0]
    forged["pattern"].update(argv=["sh"], rest=True, executable="/usr/bin/sh")  # 'sh *', impossible to add
    store["grants"].append({**forged, "id": "gforged"})
    for where in ("settings.json", ".aries/settings.json", "docs/settings.json"):
        (source.root / where).parent.mkdir(parents=True, exist_ok=True)
        (source.root / where).write_text(json.dumps(store), encoding="utf-8")
    bundle = tmp_path / "src.tar.zst"
    export_workspace(source, bundle, aries_version="test")

    import_bundle(bundle, manager, name="victim")
    victim, _ = manager.open("victim")
    assert GrantStore(identity(victim)).list() == []
    assert _refused(victim, ["ls", "docs"]) and _refused(victim, ["sh", "docs"])

    import_bundle(bundle, manager, name="src", force=True)  # replaces the workspace the grant was for
    replaced, _ = manager.open("src")
    assert GrantStore(identity(replaced)).list() == []
    assert _refused(replaced, ["ls", "docs"])
    assert [g.id for g in load_settings().grants] == [forged["id"]]  # the store itself is untouched
