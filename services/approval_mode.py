"""The approval modes, declared once: what every policy file, profile, workspace setting, CLI flag and
``/policy mode`` accepts. A ``StrEnum``: a mode compares equal to its name (``ApprovalMode.GUIDE ==
"guide"``), so files and records keep their plain text.

No dependency (start-up reads the mode before the first frame; ``services.policy`` imports pydantic).
"""

from __future__ import annotations

from enum import StrEnum

from services.errors import ConfigError


class ApprovalMode(StrEnum):
    GUIDE = "guide"
    COMMANDER = "commander"
    STRICT = "strict"

    @property
    def help(self) -> str:
        """One line: what the mode asks the operator to approve."""
        return _HELP[self]


_HELP = {
    ApprovalMode.GUIDE: "read-only tools run; every other call asks for approval",
    ApprovalMode.COMMANDER: "read-only tools, allowlisted programs, create-only writes and auto_approve rules run",
    ApprovalMode.STRICT: "read-only tools run; every other call asks, and nothing is approved by the mode",
}

MODE_NAMES: tuple[str, ...] = tuple(mode.value for mode in ApprovalMode)
"""``("guide", "commander", "strict")``: for argparse ``choices=`` and error messages."""


SHIPPED_MODE = ApprovalMode.GUIDE
"""The mode of ``profiles/policy-default.yaml`` (``tests/test_inforce.py`` holds them equal), known
without loading the policy."""


def approval_mode(
    operator: ApprovalMode | None,
    workspace: ApprovalMode | None,
    profile: ApprovalMode | None,
    policy: ApprovalMode | None,
) -> tuple[ApprovalMode, str]:
    """The precedence table: ``(mode, which level set it)``, the first level that says anything."""
    for mode, level in (
        (operator, "operator"),
        (workspace, "workspace"),
        (profile, "profile"),
        (policy, "policy"),
    ):
        if mode is not None:
            return mode, level
    return SHIPPED_MODE, "shipped"


def parse_mode(value: object, where: str = "the approval mode") -> ApprovalMode:
    """``value`` as an :class:`ApprovalMode`; ConfigError (one line) for anything else."""
    try:
        return ApprovalMode(str(value)) if isinstance(value, str) else ApprovalMode(value)  # type: ignore[arg-type]
    except ValueError:
        raise ConfigError(f"{where} is one of {', '.join(MODE_NAMES)}, not {value!r}") from None


__all__ = ["MODE_NAMES", "SHIPPED_MODE", "ApprovalMode", "approval_mode", "parse_mode"]
