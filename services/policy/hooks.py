"""Which of the policy's hooks a tool call runs: ``hooks.before`` / ``hooks.after`` matched by tool
id and argument patterns (the runner is ``services.tools.hooks``; the file format is
``services.policy.document.Hook``).

A hook matches a call when one of its ``tools`` patterns matches the tool id and every ``args``
pattern matches the argument it names (a dotted path: ``argv.0``, ``path``). Patterns are
``fnmatch``'s, case-sensitive, where ``*`` spans any characters (``/`` and spaces included): a
string is matched as it is, a list of strings as the words joined the way a shell would quote them
(``rm -rf '/tmp/a b'``), a number or a boolean as its JSON text. A named argument the call does not
have never matches.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from services.policy.document import Hook, Hooks

When = Literal["before", "after"]
_ABSENT = object()


def _value(args: Any, dotted: str) -> Any:
    node = args
    for part in dotted.split("."):
        if isinstance(node, dict):
            node = node.get(part, _ABSENT)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _ABSENT
        if node is _ABSENT:
            return _ABSENT
    return node


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return shlex.join(value)
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return None


def hook_matches(hook: Hook, tool_id: str, args: Any) -> bool:
    """Whether ``hook`` runs for a call of ``tool_id`` with ``args`` (the validated arguments)."""
    if not any(fnmatch.fnmatchcase(tool_id, pattern) for pattern in hook.tools):
        return False
    for dotted, pattern in hook.args.items():
        text = _text(_value(args, dotted))
        if text is None or not fnmatch.fnmatchcase(text, pattern):
            return False
    return True


def matching(hooks: Hooks, when: When, tool_id: str, args: Any) -> list[Hook]:
    """The hooks of ``when`` that run for this call, in the file's order."""
    listed: list[Hook] = list(hooks.before if when == "before" else hooks.after)
    return [hook for hook in listed if hook_matches(hook, tool_id, args)]


def duplicate_ids(hooks: Hooks) -> list[str]:
    """Hook ids used twice within ``before`` or within ``after`` (each names its audit rows)."""
    dupes: set[str] = set()
    for listed in (hooks.before, hooks.after):
        ids = [hook.id for hook in listed]
        dupes.update(i for i in ids if ids.count(i) > 1)
    return sorted(dupes)


__all__ = ["When", "duplicate_ids", "hook_matches", "matching"]
