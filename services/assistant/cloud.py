"""The turn's cloud step: after the local answer, the redacting bridge may ask a cloud model.

One place for every surface (the TUI, ``aries ask``, later plan runs); they differ only in the
``approve`` callable they hand the :class:`~services.assistant.TurnLoop` (the TUI's modal, or
:func:`services.bridge.headless_approver` — yes with ``--cloud``, no without).

    config  = bridge_for(session)            profile ``cloud:`` block, else workspace ``settings.cloud``
    off     → nothing: no preparation, no request, no audit row
    auto    → only when confidence.local < threshold; never asks the operator
    ask     → the operator sees exactly the redacted text and says send / don't send

A reply is recorded in the transcript as a ``cloud``-tagged assistant answer (same turn id), kept
under ``<workspace>/cloud/`` and merged into the ``cloud`` index (removable as a set:
``aries cloud forget``).  A refusal (the sanitizer/allowlist), a decline, a missing configuration or
a provider failure becomes one notice in the transcript; the local answer always stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.errors import AriesError

if TYPE_CHECKING:
    from services.bridge import Approve, CloudReply
    from services.session.session import Session
    from services.workspace.bridge_config import BridgeConfig


@dataclass
class CloudStep:
    """What the cloud step did: ``status`` is ``off``, ``confident`` (auto, not needed), ``sent``,
    ``declined``, ``refused``, ``not_configured`` or ``error``."""

    mode: str
    status: str
    reply: CloudReply | None = None
    reason: str | None = None
    error_code: str | None = None
    exit_code: int = 0
    merged: str | None = None  # the kept reply file, once indexed
    extra: dict[str, Any] = field(default_factory=dict)

    def provenance(self) -> list[dict[str, Any]]:
        """``provenance.cloud`` of ``aries ask --json``: the reply's entry (hashes, counts, the text
        that left the machine and the answer) or nothing."""
        if self.reply is None:
            return []
        entry = self.reply.provenance_entry()
        entry.update(sent=self.reply.sent, answer=self.reply.text, merged_into="cloud" if self.merged else None)
        return [entry]


CLOUD_CONFIDENCE = 0.5
"""``confidence.cloud`` of an answer the cloud gave: it is not grounded in the operator's documents,
so it never counts as more than an even chance; 0 when the cloud did not answer."""


def bridge_for(session: Session) -> BridgeConfig:
    """The bridge configuration in force: the active profile's ``cloud`` block when it has one, else
    the workspace setting ``cloud`` (a mode name, or a mapping), else off."""
    from services.workspace.bridge_config import BridgeConfig, bridge_config

    profile = session.profile()
    if profile is not None and profile.cloud is not None:
        return profile.cloud
    value = session.authority_setting("cloud")
    if value is None:
        return BridgeConfig()
    if isinstance(value, str):
        value = {"mode": value}
    if isinstance(value, Mapping):
        value = dict(value)
    return bridge_config(value, source="settings.cloud")


async def cloud_step(
    session: Session,
    question: str,
    confidence: float,
    approve: Approve,
    *,
    turn_id: str,
    environ: Mapping[str, str] | None = None,
) -> CloudStep:
    """Run the bridge for one turn (see the module docstring); never raises an :class:`AriesError`."""
    from services.bridge import CloudAudit, CloudNotConfigured, QueryRefused, maybe_ask_cloud
    from services.bridge.merge import merge_reply, record_reply
    from services.conversation import Notice

    try:
        config = bridge_for(session)
    except AriesError as exc:
        session.conversation.record(Notice(text=exc.message, level="error", title="cloud", turn_id=turn_id))
        return CloudStep("off", "not_configured", reason=exc.message, error_code=exc.code, exit_code=exc.exit_code)
    if not config.enabled:
        return CloudStep("off", "off")
    if config.mode == "auto" and confidence >= config.threshold:
        return CloudStep(config.mode, "confident", reason=f"local confidence {confidence:g} >= {config.threshold:g}")
    workspace = session.workspace
    audit = CloudAudit.for_workspace(workspace.root, None if workspace.ephemeral else workspace.name)
    declined: list[bool] = []

    async def asked(text: str) -> bool:
        answer = await approve(text)
        declined.append(not answer)
        return answer

    def notice(text: str, level: str) -> None:
        session.conversation.record(Notice(text=text, level=level, title="cloud", turn_id=turn_id))

    try:
        try:
            reply = await maybe_ask_cloud(question, confidence, config, asked, audit=audit, environ=environ)
        finally:
            audit.close()
    except QueryRefused as exc:
        notice(exc.message[:1].upper() + exc.message[1:], "warning")
        return CloudStep(config.mode, "refused", reason=exc.reason, error_code=exc.code, exit_code=exc.exit_code)
    except CloudNotConfigured as exc:
        notice(exc.message, "error")
        return CloudStep(config.mode, "not_configured", reason=exc.message, error_code=exc.code, exit_code=2)
    except AriesError as exc:
        notice(f"The cloud did not answer: {exc.message}", "error")
        return CloudStep(config.mode, "error", reason=exc.message, error_code=exc.code, exit_code=exc.exit_code)
    if reply is None:
        if declined and declined[-1]:
            notice("Not sent to the cloud: the operator declined (the local answer stands).", "info")
            return CloudStep(config.mode, "declined", reason="not approved")
        return CloudStep(config.mode, "confident")
    record_reply(session.conversation, reply, turn_id=turn_id)
    step = CloudStep(config.mode, "sent", reply=reply)
    try:
        kept = await asyncio.to_thread(merge_reply, session.engine(), workspace.root, reply)
        step.merged = str(kept)
    except AriesError as exc:
        notice(f"The cloud reply is in the transcript but could not be indexed: {exc.message}", "warning")
    return step


__all__ = ["CLOUD_CONFIDENCE", "CloudStep", "bridge_for", "cloud_step"]
