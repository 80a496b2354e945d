"""The one result shape every tool call returns, and the typed errors behind it.

A result is ``{status: ok|error, data, error: {type, message, retryable, details}, meta}``.
``meta`` always carries ``call_id``, ``tool_id``, ``duration_ms``, ``bytes`` and ``truncated``
plus the policy ``decision`` (action, rule, who approved); tools add their own keys
(``bytes_read``, ``normalized_path``, ...).  A denial is an ordinary error result of type
``PolicyDenied`` whose details name the matching rule: callers never get an exception for it.

Network failures are typed: ``NetworkError`` (refused, reset, DNS, TLS: the other end could not be
reached or spoke no HTTP; retryable) and ``Timeout`` (a deadline passed; the message names the
deadline, e.g. ``limits.tool_timeout_s``, never a measured wall-clock time).

``data`` stays byte-faithful (it is what the audit store keeps); what a terminal shows or a model
is sent is ``ToolResult.display_text()``: one plain-text rendering, passed through
``services.text.textsafe.neutralize``, that the TUI, the CLI and the model adapter all use.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from services.errors import AriesError, InvalidInput, NotFound, TooLarge
from services.policy.model import (
    PolicyDenied,  # defined with the policy, re-exported
    ToolPermissionDenied,
)
from services.tools.display import result_text

if TYPE_CHECKING:
    from pydantic import BaseModel


class ErrorType(StrEnum):
    NOT_FOUND = "NotFound"
    PERMISSION_DENIED = "PermissionDenied"
    INVALID_INPUT = "InvalidInput"
    POLICY_DENIED = "PolicyDenied"
    TIMEOUT = "Timeout"
    TOO_LARGE = "TooLarge"
    NETWORK_ERROR = "NetworkError"
    CANCELLED = "Cancelled"  # the caller cancelled the call (the operator's Ctrl+X, a closing session)
    INTERNAL_ERROR = "InternalError"


class ToolTimeout(AriesError):
    """A deadline passed or the call was cancelled; the message names the deadline."""

    code = "timeout"


class ToolNetworkError(AriesError):
    """The network failed: connection refused or reset, DNS failure, TLS error, not HTTP.

    Retryable unless ``retryable=False`` is given in the details.
    """

    code = "network_error"


class ToolInternalError(AriesError):
    code = "internal_error"


@dataclass(frozen=True)
class ToolError:
    type: ErrorType
    message: str
    retryable: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": str(self.type), "message": self.message, "retryable": self.retryable, "details": self.details}


@dataclass
class ToolOutput:
    """What a tool implementation returns: its payload and the meta keys it wants to add."""

    data: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, output: BaseModel, meta: dict[str, Any] | None = None) -> ToolOutput:
        """The payload as the tool's output model (``services.tools.outputs``) built and checked it:
        its fields in the model's order, the values as given (the same JSON as the plain dict)."""
        return cls(output.model_dump(), meta if meta is not None else {})


@dataclass
class ToolResult:
    status: str  # "ok" | "error"
    data: dict[str, Any] | None = None
    error: ToolError | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def denied(self) -> bool:
        return self.error is not None and self.error.type is ErrorType.POLICY_DENIED

    def display_text(self, *, max_chars: int | None = 20_000) -> str:
        """The result as plain text for a terminal or a model, control bytes neutralised.

        One rendering for the TUI, the CLI and the model adapter (see ``services.tools.display``):
        file text, command output, listings, matches, fetched previews, or the typed error. ``data``
        itself is untouched (the audit store keeps it byte for byte).
        """
        return result_text(self, max_chars=max_chars)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "data": self.data,
            "error": self.error.to_dict() if self.error is not None else None,
            "meta": self.meta,
        }

    @classmethod
    def success(cls, data: dict[str, Any], meta: dict[str, Any] | None = None) -> ToolResult:
        return cls(status="ok", data=data, meta=dict(meta or {}))

    @classmethod
    def failure(
        cls,
        type_: ErrorType,
        message: str,
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> ToolResult:
        return cls(
            status="error",
            error=ToolError(type_, message, retryable, dict(details or {})),
            meta=dict(meta or {}),
        )


_TRANSIENT_ERRNOS = {errno.EAGAIN, errno.EBUSY, errno.EINTR, errno.ETIMEDOUT}


def error_from_exception(exc: BaseException) -> ToolError:
    """Map any exception to a typed error; unknown ones become InternalError (no traceback leaks)."""
    if isinstance(exc, PolicyDenied):
        return ToolError(ErrorType.POLICY_DENIED, exc.message, False, dict(exc.details))
    if isinstance(exc, NotFound):
        return ToolError(ErrorType.NOT_FOUND, exc.message, False, dict(exc.details))
    if isinstance(exc, InvalidInput):
        return ToolError(ErrorType.INVALID_INPUT, exc.message, False, dict(exc.details))
    if isinstance(exc, TooLarge):
        return ToolError(ErrorType.TOO_LARGE, exc.message, False, dict(exc.details))
    if isinstance(exc, ToolPermissionDenied):
        return ToolError(ErrorType.PERMISSION_DENIED, exc.message, False, dict(exc.details))
    if isinstance(exc, ToolTimeout):
        return ToolError(ErrorType.TIMEOUT, exc.message, True, dict(exc.details))
    if isinstance(exc, ToolNetworkError):
        details = dict(exc.details)
        retryable = bool(details.pop("retryable", True))
        return ToolError(ErrorType.NETWORK_ERROR, exc.message, retryable, details)
    if isinstance(exc, ToolInternalError):
        return ToolError(ErrorType.INTERNAL_ERROR, exc.message, bool(exc.details.get("retryable")), dict(exc.details))
    if isinstance(exc, AriesError):
        return ToolError(ErrorType.INTERNAL_ERROR, exc.message, False, {"code": exc.code, **exc.details})
    if isinstance(exc, TimeoutError):
        return ToolError(ErrorType.TIMEOUT, str(exc) or "the operation timed out", True, {})
    if isinstance(exc, FileNotFoundError):
        return ToolError(ErrorType.NOT_FOUND, f"no such file or directory: {exc.filename}", False, {})
    if isinstance(exc, IsADirectoryError):
        return ToolError(ErrorType.INVALID_INPUT, f"is a directory: {exc.filename}", False, {})
    if isinstance(exc, NotADirectoryError):
        return ToolError(ErrorType.INVALID_INPUT, f"not a directory: {exc.filename}", False, {})
    if isinstance(exc, PermissionError):
        return ToolError(ErrorType.PERMISSION_DENIED, f"permission denied: {exc.filename}", False, {})
    if isinstance(exc, OSError):
        retryable = exc.errno in _TRANSIENT_ERRNOS
        return ToolError(
            ErrorType.INTERNAL_ERROR,
            f"{type(exc).__name__}: {exc.strerror or exc}",
            retryable,
            {"errno": exc.errno},
        )
    return ToolError(ErrorType.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:500], False, {})
