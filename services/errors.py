"""Typed errors shared by every service.

Each error carries a stable ``code`` (used by the CLI for exit codes and by JSON
output) and a one-line human message.  The CLI prints ``aries: <message>`` and exits
non-zero; the TUI shows the same message in a notification.
"""

from __future__ import annotations

from typing import Any


class AriesError(Exception):
    """Base class of every error Aries reports to an operator."""

    code: str = "aries_error"
    exit_code: int = 1

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, "code": self.code, "message": self.message, "details": self.details}


class InvalidName(AriesError):
    """A workspace, index or profile name that cannot be used."""

    code = "invalid_name"
    exit_code = 2


class NotFound(AriesError):
    code = "not_found"


class AlreadyExists(AriesError):
    code = "already_exists"


class ConfigError(AriesError):
    """Bad configuration: an unknown setting value, a malformed YAML file."""

    code = "config_error"
    exit_code = 2


class CorruptFile(AriesError):
    """A file on disk that does not parse (with the file and line where possible)."""

    code = "corrupt_file"


class TooLarge(AriesError):
    code = "too_large"


class InvalidInput(AriesError):
    code = "invalid_input"
    exit_code = 2
