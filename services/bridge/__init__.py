"""The redacting cloud bridge: off by default; a question leaves the machine only sanitized,
allowlisted, approved (``ask``) or below the confidence threshold (``auto``), and logged by hash.

- :mod:`~services.bridge.config`: :class:`BridgeConfig` (the ``settings.cloud`` block)
- :mod:`~services.bridge.sanitizer` + :mod:`~services.bridge.detectors`: redaction (detect-secrets)
- :mod:`~services.bridge.allowlist`: generic questions only
- :mod:`~services.bridge.client`: :func:`maybe_ask_cloud`
- :mod:`~services.bridge.audit`: the ``cloud_calls`` table
- :mod:`~services.bridge.merge`: transcript entry and the ``cloud`` index

Importing this package loads neither detect-secrets nor aiohttp (they load on first use).
"""

from services.bridge.allowlist import check_outbound
from services.bridge.audit import CloudAudit, sha256_text
from services.bridge.client import (
    Approve,
    CloudReply,
    Outbound,
    headless_approver,
    maybe_ask_cloud,
    prepare,
)
from services.bridge.config import BridgeConfig, CloudMode, bridge_config
from services.bridge.errors import BridgeError, CloudNotConfigured, QueryRefused
from services.bridge.sanitizer import Sanitized, sanitize

__all__ = [
    "Approve",
    "BridgeConfig",
    "BridgeError",
    "CloudAudit",
    "CloudMode",
    "CloudNotConfigured",
    "CloudReply",
    "Outbound",
    "QueryRefused",
    "Sanitized",
    "bridge_config",
    "check_outbound",
    "headless_approver",
    "maybe_ask_cloud",
    "prepare",
    "sanitize",
    "sha256_text",
]
