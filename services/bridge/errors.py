"""The bridge's typed errors: one line each, never the text that was refused."""

from __future__ import annotations

from services.errors import AriesError


class BridgeError(AriesError):
    """The cloud bridge cannot do what was asked."""

    code = "cloud_bridge_error"
    exit_code = 4


class CloudNotConfigured(BridgeError):
    """The bridge is on but lacks an endpoint, a model or its API key variable."""

    code = "cloud_not_configured"
    exit_code = 2


class QueryRefused(BridgeError):
    """A question that fails the outbound allowlist after redaction: it is not sent.

    ``reason`` names the rule (``command``, ``path``, ``user_id``, ``too_long``, ``not_a_question``,
    ``mostly_redacted``); the message never quotes the refused text.
    """

    code = "cloud_query_refused"
    exit_code = 3

    def __init__(self, reason: str, explanation: str) -> None:
        super().__init__(f"not sent to the cloud: {explanation}", reason=reason)
        self.reason = reason


__all__ = ["BridgeError", "CloudNotConfigured", "QueryRefused"]
