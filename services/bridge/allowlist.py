"""The outbound allowlist: only a generic question may leave the machine.

Checked on the text *after* redaction (:mod:`services.bridge.sanitizer`).  A question passes when
it is natural language of bounded length, and fails — :class:`~services.bridge.errors.QueryRefused`
naming the rule, never quoting the text — when it:

- ``too_long``: is longer than ``config.max_chars``;
- ``not_a_question``: has fewer than three words of prose (a bare token, a key, a log line);
- ``command``: *is* a command rather than a question about one — a shell prompt (``$ ``, ``# ``,
  ``PS>``) or ``sudo`` opening a line, a line that starts with a program and its options
  (``curl -X POST …``), command substitution (``$(…)``, backticks around a program with
  arguments), chaining into a shell (``| sh``, ``&& rm``), a here-document; mentioning a command
  mid-sentence ("how does ``git rebase -i`` work?") is fine;
- ``path``: still holds a file path after redaction (``src/app/main.py``, ``./run.sh``, ``..\\x``);
- ``user_id``: still names a user (``@handle``, ``uid=1000``, ``user: alice``, ``username=…``);
- ``mostly_redacted``: is more placeholder than prose (nothing generic is left to ask).
"""

from __future__ import annotations

import re

from services.bridge.errors import QueryRefused
from services.workspace.bridge_config import BridgeConfig

_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z_]+#\d+\]")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")

_PROGRAMS = (
    "sudo|su|rm|rmdir|mv|cp|chmod|chown|curl|wget|ssh|scp|rsync|nc|ncat|bash|sh|zsh|fish|powershell|pwsh|"
    "python|python3|perl|ruby|node|kubectl|docker|psql|mysql|git|make|dd|mkfs|systemctl|apt|apt-get|yum|dnf|"
    "brew|pip|pip3|npm|export|set|eval|exec|cat|echo|ls|cd|find|grep|sed|awk|tar|unzip|kill|killall|pkill"
)
_COMMAND_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?m)^\s*(?:\$|#|>|%|PS [^>]*>|PS>)\s+\S"), "starts with a shell prompt"),
    (re.compile(r"(?m)^\s*sudo\s+\S"), "starts with sudo"),
    (re.compile(rf"(?m)^\s*(?:{_PROGRAMS})(?:\s+-{{1,2}}[\w-]+|\s+[\w./~-]+\s+-{{1,2}}[\w-]+)"), "is a command line"),
    (re.compile(r"\$\([^)]*\)"), "has a command substitution"),
    (re.compile(rf"`\s*(?:{_PROGRAMS})\s[^`]*[|;&>][^`]*`"), "has a chained command in backticks"),
    (re.compile(r"\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b"), "pipes into a shell"),
    (
        re.compile(r"(?:&&|\|\||;)\s*(?:sudo\s+)?(?:rm|curl|wget|chmod|dd|mkfs|shutdown|reboot|kill)\b"),
        "chains commands",
    ),
    (re.compile(r"<<-?\s*['\"]?[A-Z]+['\"]?\s*$", re.M), "has a here-document"),
)
_PATH_RULES = (
    re.compile(r"(?<![\w/.:\]])\.{1,2}[/\\][\w.-]+"),  # ./run.sh, ..\\x
    re.compile(r"(?<![\w/:.\]-])[\w.-]+(?:/[\w.-]+){2,}/?(?![\w(])"),  # a/b/c
    re.compile(
        r"(?<![\w/:.\]-])[\w.-]+(?:/[\w.-]+)*/[\w-]+\."
        r"(?:py|js|ts|tsx|jsx|go|rs|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|ps1|bat|yaml|yml|toml|ini|cfg|conf|json|"
        r"env|pem|key|crt|sql|db|sqlite|log|txt|md|csv|xml|html|lock)\b"
    ),
)
_USER_RULES = (
    re.compile(r"(?<![\w.])@[A-Za-z0-9_][\w-]{1,38}\b"),  # @handle (not a decorator: see _decorator)
    re.compile(r"(?i)\b(?:uid|gid|user_?id|account_?id|employee_?id|customer_?id)\s*[:=#]\s*\w+"),
    re.compile(r"(?i)\b(?:user(?:name)?|login|owner)\s*[:=]\s*['\"]?[A-Za-z0-9_.-]+"),
)


def check_outbound(text: str, config: BridgeConfig | None = None) -> None:
    """Raise :class:`QueryRefused` unless the (already redacted) ``text`` is a generic question."""
    config = config or BridgeConfig()
    if len(text) > config.max_chars:
        raise QueryRefused("too_long", f"the question is {len(text)} characters, more than {config.max_chars}")
    prose = _PLACEHOLDER.sub(" ", text)
    words = _WORD.findall(prose)
    if len(words) < 3:
        raise QueryRefused("not_a_question", "it has fewer than three words of prose")
    for rule, why in _COMMAND_RULES:
        if rule.search(prose):
            raise QueryRefused("command", f"it is a command, not a question ({why})")
    for rule in _PATH_RULES:
        if rule.search(prose):
            raise QueryRefused("path", "it still names a file path")
    for rule in _USER_RULES:
        if any(not _decorator(match) for match in rule.finditer(prose)):
            raise QueryRefused("user_id", "it still names a user")
    placeholders = len(_PLACEHOLDER.findall(text))
    if placeholders > max(4, len(words) // 2):
        raise QueryRefused("mostly_redacted", f"{placeholders} redactions leave too little of a question")


_DECORATORS = frozenset(
    "property staticmethod classmethod dataclass cache cached_property lru_cache override overload abstractmethod "
    "wraps contextmanager asynccontextmanager fixture pytest app router route task total_ordering singledispatch "
    "validator field_validator model_validator computed_field on work receiver login_required api_view".split()
)


def _decorator(match: re.Match[str]) -> bool:
    """``@name`` that is a decorator (a known one, or followed by ``(`` or ``.attr``), not a handle."""
    text = match.group()
    if not text.startswith("@"):
        return False
    after = match.string[match.end() : match.end() + 1]
    return text[1:] in _DECORATORS or after in ("(", ".")


__all__ = ["check_outbound"]
