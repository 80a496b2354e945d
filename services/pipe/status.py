"""``aries status``: what a headless caller needs to know before asking.

* ``indexes`` — the retrieval engine's listing (name, active, files, chunks, embedding model);
* ``model`` — the configured model (``ARIES_MODEL``, else the workspace's, else ``offline``) and
  whether its provider answers now (Ollama: ``probe_ollama``; an OpenAI-compatible server: its model
  list; ``offline`` always does), with the models it serves;
* ``cloud`` — the cloud bridge in force (the profile's ``cloud`` block, else the workspace setting
  ``cloud``; off by default): mode, one-line description (never the key), where it comes from, and
  the last cloud calls from the audit store (hashes and counts only);
* ``last_calls`` — the audit store's last N tool calls (tool, source, decision, rule, status, time).

The exit code: 0; 4 when the configured provider does not answer; 2 when the configured model
itself is invalid (the report is complete either way).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from services.errors import AriesError

if TYPE_CHECKING:
    from services.session.session import Session

PROBE_SECONDS = 2.0
LAST_CALLS = 10


async def model_status(setting: Any, env: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """The configured model and whether it answers; ``(report, exit code)``."""
    from services.models.base import ProviderError
    from services.models.config import ENV_OLLAMA_HOST, make_provider, probe_ollama, resolve_model
    from services.models.http import Timeouts

    try:
        config = resolve_model(setting, env, timeouts=Timeouts(connect=PROBE_SECONDS, listing=PROBE_SECONDS))
    except AriesError as exc:
        return {"label": None, "reachable": False, "error": exc.message}, exc.exit_code
    report: dict[str, Any] = {
        "label": config.label,
        "provider": config.provider,
        "source": config.source,
        "url": config.base_url,
        "reachable": True,
        "models": [],
        "error": None,
    }
    if config.provider == "offline":
        report["models"] = ["offline"]
        return report, 0
    if config.provider == "ollama":
        models = await probe_ollama(env.get(ENV_OLLAMA_HOST), timeout=PROBE_SECONDS)
        if models is None:
            report.update(reachable=False, error=f"Ollama at {config.base_url} does not answer")
        else:
            report["models"] = models
    else:
        provider = make_provider(config)
        try:
            report["models"] = await provider.list_models()
        except ProviderError as exc:
            report.update(reachable=False, error=exc.message)
        finally:
            await provider.aclose()
    if report["reachable"] and config.model not in report["models"]:
        report["error"] = f"{config.provider} does not list {config.model}"
    return report, 0 if report["reachable"] else 4


def last_calls(session: Session, limit: int = LAST_CALLS) -> list[dict[str, Any]]:
    """The audit store's last ``limit`` tool calls, oldest first (none when it does not exist yet)."""
    from services.audit.db import AUDIT_FILE
    from services.audit.log import AuditStore

    if not (session.workspace.root / AUDIT_FILE).is_file():
        return []
    with AuditStore.for_workspace(session.workspace.root) as audit:
        rows = audit.calls(limit=limit)
    keys = ("call_id", "tool_name", "source", "decision", "rule_id", "status", "created_at", "duration_ms")
    return [{key: row.get(key) for key in keys} for row in rows]


def cloud_status(session: Session, limit: int = 5) -> dict[str, Any]:
    """The bridge in force and its last ``limit`` calls (newest first)."""
    from services.assistant.cloud import bridge_for
    from services.audit.db import AUDIT_FILE
    from services.bridge import CloudAudit

    workspace = session.workspace
    profile = session.profile()
    source = "default"
    if profile is not None and profile.cloud is not None:
        source = f"profile {profile.name}"
    elif session.authority_setting("cloud") is not None:
        source = "workspace"
    report: dict[str, Any] = {"mode": "off", "source": source, "describe": "cloud: off", "error": None}
    try:
        config = bridge_for(session)
        report.update(mode=config.mode, describe=config.describe())
    except AriesError as exc:
        report.update(error=exc.message, describe=f"cloud: invalid configuration: {exc.message}")
    recent: list[dict[str, Any]] = []
    if (workspace.root / AUDIT_FILE).is_file():
        audit = CloudAudit.for_workspace(workspace.root)
        try:
            keys = ("request_id", "ts", "mode", "status", "model", "redactions", "duration_ms", "error")
            recent = [{key: row.get(key) for key in keys} for row in audit.recent(limit)]
        finally:
            audit.close()
    report["recent"] = recent
    return report


def status(session: Session, env: Mapping[str, str], *, calls: int = LAST_CALLS) -> tuple[dict[str, Any], int]:
    """The whole report for the session's workspace; ``(report, exit code)``."""
    workspace = session.workspace
    indexes = [info.to_dict() for info in session.engine().index_list()]
    model, code = asyncio.run(model_status(session.authority_setting("model"), env))
    report = {
        "workspace": {"name": workspace.name, "ephemeral": workspace.ephemeral, "path": str(workspace.root)},
        "profile": session.profile_name,
        "indexes": indexes,
        "active_index": next((i["name"] for i in indexes if i.get("active")), None),
        "model": model,
        "cloud": cloud_status(session),
        "last_calls": last_calls(session, calls),
    }
    return report, code


__all__ = ["LAST_CALLS", "cloud_status", "last_calls", "model_status", "status"]
