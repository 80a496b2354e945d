"""Operator tool commands (``/fs``, ``/shell``, ``/web``, ``/tool``) → a tool id and its arguments.

Pure parsing: the App sends the result through the one policy gateway, exactly like a call
from the model. Nothing here touches a file, a process or the network.
"""

from __future__ import annotations

import json
from typing import Any

from widgets.commands import CommandError

FS_USAGE = "/fs ls [PATH] [-r] | read PATH | write PATH TEXT… | search QUERY [PATH] | patch DIFF_FILE"
SHELL_USAGE = "/shell run CMD [ARG…] | start CMD [ARG…] | poll ID | kill ID"
WEB_USAGE = "/web search QUERY… | fetch URL | extract ARTIFACT_ID"
TOOL_USAGE = "/tool TOOL_ID [JSON]"


def fs_call(args: list[str]) -> tuple[str, dict[str, Any]]:
    """Paths go to the tool as typed: relative ones resolve against the workspace, by the tool."""
    if not args:
        raise CommandError("say what to do.")
    action, rest = args[0], args[1:]
    if action in {"ls", "list"}:
        recursive = "-r" in rest
        paths = [a for a in rest if a != "-r"]
        if len(paths) > 1:
            raise CommandError("ls takes one path.")
        call: dict[str, Any] = {"path": paths[0] if paths else "."}
        if recursive:
            call["recursive"] = True
        return "builtin:fs:list_dir", call
    if action == "read" and len(rest) == 1:
        return "builtin:fs:read_text", {"path": rest[0]}
    if action == "write" and len(rest) >= 2:
        return "builtin:fs:write_text", {"path": rest[0], "text": " ".join(rest[1:]) + "\n"}
    if action == "search" and 1 <= len(rest) <= 2:
        call = {"query": rest[0]}
        if len(rest) == 2:
            call["path"] = rest[1]
        return "builtin:fs:search_text", call
    if action == "patch" and len(rest) == 1:
        # The diff file is resolved by the tool like every /fs path (relative: against the workspace's
        # first allowed root, not the process's working directory) and read under the policy.
        return "builtin:fs:apply_patch", {"patch_file": rest[0]}
    raise CommandError(f"cannot read '/fs {' '.join(args)}'.")


def shell_call(args: list[str]) -> tuple[str, dict[str, Any]]:
    if len(args) < 2:
        raise CommandError("say what to run.")
    action, rest = args[0], args[1:]
    if action in {"run", "start"}:
        return f"builtin:shell:{action}", {"argv": rest}
    if action in {"poll", "kill"} and len(rest) == 1:
        return f"builtin:shell:{action}", {"process_id": rest[0]}
    raise CommandError(f"cannot read '/shell {' '.join(args)}'.")


def web_call(args: list[str]) -> tuple[str, dict[str, Any]]:
    if len(args) < 2:
        raise CommandError("say what to look up.")
    action, rest = args[0], args[1:]
    if action == "search":
        return "builtin:web:search", {"query": " ".join(rest)}
    if action == "fetch" and len(rest) == 1:
        return "builtin:web:fetch", {"url": rest[0]}
    if action == "extract" and len(rest) == 1:
        return "builtin:web:extract", {"artifact_id": rest[0]}
    raise CommandError(f"cannot read '/web {' '.join(args)}'.")


def generic_call(args: list[str], raw_line: str) -> tuple[str, dict[str, Any]]:
    if not args:
        raise CommandError('name a tool, e.g. /tool builtin:fs:list_dir {"path": "."}')
    tool_id = args[0]
    # JSON is taken from the raw line so that quotes inside it survive shell-style splitting.
    payload = raw_line.split(tool_id, 1)[1].strip() if tool_id in raw_line else ""
    if not payload:
        return tool_id, {}
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise CommandError(f"the arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CommandError("the arguments must be a JSON object.")
    return tool_id, value
