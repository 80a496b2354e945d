"""One plain-text rendering of a tool result, for a terminal and for a model.

``result_text(result)`` (also ``ToolResult.display_text()``) is what the TUI, the CLI and the model
adapter show or send: the text a tool produced (file text, command output, a fetched page's preview,
extracted text), a listing or match list one entry per line, a patch summary, or the typed error with
its rule.  Everything goes through ``services.text.textsafe.neutralize``: an escape sequence, a bidi
control or a NUL byte in a file, in command output or on a web page is shown as a visible escape
(``\\x1b``, ``<U+202E>``) and never reaches the terminal or the model raw.  Names (paths, titles, URLs)
are neutralised as single lines, so a newline in a file name cannot forge a line of output.

``ToolResult.data`` is not changed: the audit store keeps it byte for byte, and ``to_dict()`` still
returns it as the tool produced it (for JSON consumers, which escape it themselves).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from services.text.textsafe import neutralize


class _Error(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def details(self) -> Mapping[str, Any]: ...


class Shown(Protocol):
    """What :func:`result_text` reads of a result (``services.tools.results.ToolResult`` is one)."""

    @property
    def data(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> _Error | None: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...


def _one(value: Any) -> str:
    return neutralize(str(value), single_line=True)


def _block(value: Any) -> str:
    return neutralize(str(value))


def _listing(data: dict[str, Any]) -> list[str]:
    count = data.get("count", len(data["entries"]))
    lines = [f"{_one(data.get('path', ''))}: {count} {'entry' if count == 1 else 'entries'}"]
    for entry in data["entries"]:
        kind = entry.get("type", "")
        suffix = "/" if kind == "dir" else " -> (symlink)" if kind == "symlink" else ""
        size = f"  {entry['size']} B" if kind == "file" else ""
        lines.append(f"  {_one(entry.get('path', ''))}{suffix}{size}")
    if data.get("hidden_by_policy"):
        lines.append(f"  ({data['hidden_by_policy']} hidden by the policy)")
    return lines


def _matches(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for match in data["matches"]:
        where = f"{_one(match.get('path', ''))}:{match.get('line')}:{match.get('column')}"
        lines.extend(f"{where}- {_one(text)}" for text in match.get("before", []))
        lines.append(f"{where}: {_one(match.get('text', ''))}")
        lines.extend(f"{where}+ {_one(text)}" for text in match.get("after", []))
    lines.append(f"({len(data['matches'])} matches in {data.get('files_scanned', 0)} files)")
    return lines


def _search_results(data: dict[str, Any]) -> list[str]:
    lines = [f"search: {_one(data.get('query', ''))}  [{_one(data.get('citation', ''))}]"]
    for number, item in enumerate(data["results"], start=1):
        lines.append(f"{number}. {_one(item.get('title', ''))}")
        lines.append(f"   {_one(item.get('url', ''))}")
        if item.get("snippet"):
            lines.append(f"   {_one(item['snippet'])}")
    return lines


def _patch(data: dict[str, Any]) -> list[str]:
    head = "applied" if data.get("applied") else "checked (not applied)"
    lines = [f"patch {head}:"]
    for item in data["files"]:
        lines.append(
            f"  {item.get('action')} {_one(item.get('path', ''))} "
            f"(+{item.get('added', 0)} -{item.get('removed', 0)}, {item.get('hunks', 0)} hunks)"
        )
    return lines


def _process(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if "exit_code" in data:
        lines.append(f"exit code {data['exit_code']}")
    elif "state" in data or "status" in data:
        lines.append(f"process {_one(data.get('process_id', ''))}: {_one(data.get('state', data.get('status')))}")
    for key in ("stdout", "stdout_tail", "stderr", "stderr_tail"):
        text = data.get(key)
        if isinstance(text, str) and text:
            lines.append(f"-- {key} --")
            lines.append(_block(text).rstrip("\n"))
    return lines


def _data_lines(data: dict[str, Any]) -> list[str]:
    if isinstance(data.get("entries"), list):
        return _listing(data)
    if isinstance(data.get("matches"), list):
        return _matches(data)
    if isinstance(data.get("results"), list):
        return _search_results(data)
    if isinstance(data.get("files"), list) and "applied" in data:
        return _patch(data)
    if any(key in data for key in ("stdout", "stderr", "stdout_tail", "stderr_tail", "exit_code")):
        return _process(data)
    if isinstance(data.get("text"), str):  # fs read_text, web extract
        head = data.get("title") or data.get("path") or data.get("citation")
        lines = [f"== {_one(head)} =="] if head else []
        return [*lines, _block(data["text"])]
    if isinstance(data.get("preview"), str):  # web fetch
        lines = [
            f"{data.get('status')} {_one(data.get('final_url', ''))} ({_one(data.get('content_type', ''))}, "
            f"{data.get('bytes')} bytes{', truncated' if data.get('truncated') else ''})",
            f"stored as {_one(data.get('citation', ''))}",
        ]
        return [*lines, _block(data["preview"])]
    if "bytes_written" in data:
        verb = "created" if data.get("created") else "wrote"
        return [f"{verb} {_one(data.get('path', ''))} ({data['bytes_written']} bytes)"]
    return [_block(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True, default=str))]


def result_text(result: Shown, *, max_chars: int | None = 20_000) -> str:
    """``result`` as neutralised plain text, at most ``max_chars`` characters (None: no cap)."""
    if result.error is not None:
        rule = result.error.details.get("rule")
        suffix = f" (rule {_one(rule)})" if rule else ""
        text = f"{result.error.type}: {_block(result.error.message)}{suffix}"
    elif result.data is None:
        text = "ok"
    else:
        try:
            text = "\n".join(_data_lines(result.data))
        except (KeyError, TypeError, AttributeError):  # an unexpected shape: show it as JSON
            text = _block(json.dumps(result.data, indent=2, ensure_ascii=False, sort_keys=True, default=str))
        if result.meta.get("truncated"):
            text += "\n(truncated)"
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + f"\n… ({len(text) - max_chars} more characters)"
    return text


__all__ = ["Shown", "result_text"]
