"""Asking the cloud: :func:`maybe_ask_cloud`, the one entry point the turn loop and ``aries ask`` call.

    reply = await maybe_ask_cloud(question, local_confidence, config, approve, audit=audit)

What happens, in order:

1. ``config.mode == "off"`` → ``None``: nothing is prepared, sent or logged.
2. ``auto`` and ``local_confidence >= config.threshold`` → ``None`` (the local answer is good enough).
3. The endpoint, model and API-key variable must be set → else :class:`CloudNotConfigured`.
4. :func:`prepare`: the question is sanitized (:mod:`~services.bridge.sanitizer`) and checked
   against the outbound allowlist (:mod:`~services.bridge.allowlist`); a refusal is logged
   (``refused``) and raised as :class:`QueryRefused` — nothing is sent.
5. ``ask`` → ``await approve(text)`` with exactly the text that would leave the machine; ``False``
   is logged (``declined``) and gives ``None``.  ``auto`` does not ask.
6. One chat-completions request (:class:`~services.models.openai_compat.OpenAICompatProvider`):
   a fixed system message and the redacted question — no history, no retrieved text, no tools.
7. The call is logged (``sent``: hashes of the prompt and of the reply, redaction counts, model,
   time; ``error``: the error code) and the reply comes back as a :class:`CloudReply` tagged
   ``provenance="cloud"``.  A provider failure is raised as the provider's typed error.

``approve`` is an async callable: the TUI's modal (``screens.cloud_send``), or for headless runs
:func:`headless_approver` (``--cloud`` given: yes; not given: no).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.bridge.allowlist import check_outbound
from services.bridge.audit import CloudAudit
from services.bridge.errors import CloudNotConfigured, QueryRefused
from services.bridge.sanitizer import Sanitized, sanitize
from services.errors import AriesError
from services.hashing import sha256_tagged
from services.workspace.bridge_config import BridgeConfig

Approve = Callable[[str], Awaitable[bool]]

SYSTEM_PROMPT = (
    "You answer one general technical question. Parts of it were replaced by placeholders such as "
    "[REDACTED:path#1]; keep those placeholders as they are and do not guess what they stand for."
)


@dataclass(frozen=True)
class Outbound:
    """What would leave the machine: the redacted text and the redactions made."""

    text: str
    counts: dict[str, int]
    prompt_sha256: str


@dataclass(frozen=True)
class CloudReply:
    """A cloud answer and its provenance (never the original question)."""

    request_id: str
    text: str
    model: str
    sent: str
    prompt_sha256: str
    reply_sha256: str
    redactions: dict[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    provenance: str = "cloud"

    def provenance_entry(self) -> dict[str, Any]:
        """The ``provenance.cloud`` item of ``aries ask --json`` and the transcript's ``cloud`` field."""
        return {
            "request_id": self.request_id,
            "model": self.model,
            "prompt_sha256": self.prompt_sha256,
            "reply_sha256": self.reply_sha256,
            "redactions": dict(self.redactions),
        }


def new_request_id() -> str:
    return "cloud-" + uuid.uuid4().hex[:16]


def prepare(question: str, config: BridgeConfig) -> Outbound:
    """The redacted question, or :class:`QueryRefused` when it fails the allowlist."""
    cleaned: Sanitized = sanitize(question, config)
    check_outbound(cleaned.text, config)
    return Outbound(cleaned.text, cleaned.counts, sha256_tagged(cleaned.text))


def headless_approver(cloud_flag: bool) -> Approve:
    """The approver of a run without a screen: yes when ``--cloud`` was given, else no."""

    async def approve(text: str) -> bool:
        return cloud_flag

    return approve


def _check_configured(config: BridgeConfig, environ: Mapping[str, str]) -> str:
    missing = [name for name, value in (("base_url", config.base_url), ("model", config.model)) if not value]
    if missing:
        raise CloudNotConfigured(f"cloud mode is {config.mode} but cloud.{missing[0]} is not set")
    key = environ.get(config.api_key_env, "").strip()
    if not key:
        raise CloudNotConfigured(f"cloud mode is {config.mode} but ${config.api_key_env} (the API key) is not set")
    return key


async def maybe_ask_cloud(
    question: str,
    local_confidence: float | None,
    config: BridgeConfig,
    approve: Approve,
    *,
    audit: CloudAudit | None = None,
    environ: Mapping[str, str] | None = None,
    request_id: str | None = None,
) -> CloudReply | None:
    """Ask the cloud when ``config`` and ``local_confidence`` say so (see the module docstring).

    ``local_confidence`` is in [0, 1] (``None`` counts as 0: nothing local to trust).
    Returns ``None`` when nothing was sent; raises :class:`QueryRefused`, :class:`CloudNotConfigured`
    or a :class:`~services.models.base.ProviderError`.
    """
    if config.mode == "off":
        return None
    confidence = 0.0 if local_confidence is None else float(local_confidence)
    if config.mode == "auto" and confidence >= config.threshold:
        return None
    key = _check_configured(config, os.environ if environ is None else environ)
    request_id = request_id or new_request_id()

    def log(status: str, prompt_sha: str, counts: dict[str, int], **extra: Any) -> None:
        if audit is not None:
            audit.record(
                request_id=request_id,
                mode=config.mode,
                status=status,
                prompt_sha256=prompt_sha,
                redactions=counts,
                base_url=config.base_url,
                model=config.model,
                local_confidence=local_confidence,
                **extra,
            )

    try:
        outbound = prepare(question, config)
    except QueryRefused as refused:
        cleaned = sanitize(question, config)
        log("refused", sha256_tagged(cleaned.text), cleaned.counts, error=refused.reason)
        raise
    if config.mode == "ask" and not await approve(outbound.text):
        log("declined", outbound.prompt_sha256, outbound.counts)
        return None
    started = time.monotonic()
    try:
        text, usage = await _send(outbound.text, config, key)
    except AriesError as exc:
        log("error", outbound.prompt_sha256, outbound.counts, error=exc.code, duration_ms=_ms(started))
        raise
    reply = CloudReply(
        request_id=request_id,
        text=text,
        model=str(config.model),
        sent=outbound.text,
        prompt_sha256=outbound.prompt_sha256,
        reply_sha256=sha256_tagged(text),
        redactions=outbound.counts,
        duration_ms=_ms(started),
        usage=usage,
    )
    log("sent", reply.prompt_sha256, reply.redactions, reply_sha256=reply.reply_sha256, duration_ms=reply.duration_ms)
    return reply


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


async def _send(text: str, config: BridgeConfig, key: str) -> tuple[str, dict[str, int]]:
    from services.models.base import ChatMessage, ModelRequest, TextDelta, Usage
    from services.models.http import Timeouts
    from services.models.openai_compat import OpenAICompatProvider

    provider = OpenAICompatProvider(
        str(config.model), str(config.base_url), api_key=key, timeouts=Timeouts(first_byte=config.timeout_s)
    )
    request = ModelRequest(messages=[ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", text)])
    pieces: list[str] = []
    usage: dict[str, int] = {}
    try:
        async with contextlib.aclosing(provider.stream(request)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                elif isinstance(event, Usage):
                    usage = {"prompt_tokens": event.prompt_tokens, "completion_tokens": event.completion_tokens}
    finally:
        await provider.aclose()
    return "".join(pieces), usage


__all__ = [
    "SYSTEM_PROMPT",
    "Approve",
    "CloudReply",
    "Outbound",
    "headless_approver",
    "maybe_ask_cloud",
    "new_request_id",
    "prepare",
]
