"""The redacting cloud bridge: off by default; a question leaves the machine only sanitized,
allowlisted, approved (``ask``) or below the confidence threshold (``auto``), and logged by hash.

- :mod:`services.workspace.bridge_config` (beside this package, below the workspace configuration):
  :class:`BridgeConfig` (the ``settings.cloud`` block)
- :mod:`~services.bridge.sanitizer` + :mod:`~services.bridge.detectors`: redaction (detect-secrets)
- :mod:`~services.bridge.allowlist`: generic questions only
- :mod:`~services.bridge.client`: :func:`maybe_ask_cloud`
- :mod:`~services.bridge.audit`: the ``cloud_calls`` table
- :mod:`~services.bridge.merge`: transcript entry and the ``cloud`` index

Importing this package loads neither detect-secrets nor aiohttp (they load on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.lazy import lazy_names

if TYPE_CHECKING:
    from services.bridge.allowlist import check_outbound
    from services.bridge.audit import CloudAudit
    from services.bridge.client import (
        Approve,
        CloudReply,
        Outbound,
        headless_approver,
        maybe_ask_cloud,
        prepare,
    )
    from services.bridge.errors import BridgeError, CloudNotConfigured, QueryRefused
    from services.bridge.sanitizer import Sanitized, sanitize

# Loaded on first use (PEP 562): a caller that needs only the errors loads errors.py alone.
_HOME = {
    "check_outbound": "allowlist",
    "CloudAudit": "audit",
    "Approve": "client",
    "CloudReply": "client",
    "Outbound": "client",
    "headless_approver": "client",
    "maybe_ask_cloud": "client",
    "prepare": "client",
    "BridgeError": "errors",
    "CloudNotConfigured": "errors",
    "QueryRefused": "errors",
    "Sanitized": "sanitizer",
    "sanitize": "sanitizer",
}


__getattr__ = lazy_names(__name__, _HOME)


__all__ = [
    "Approve",
    "BridgeError",
    "CloudAudit",
    "CloudNotConfigured",
    "CloudReply",
    "Outbound",
    "QueryRefused",
    "Sanitized",
    "check_outbound",
    "headless_approver",
    "maybe_ask_cloud",
    "prepare",
    "sanitize",
]
