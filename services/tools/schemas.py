"""JSON schemas (draft 2020-12) of every builtin tool's input and output, and of the result."""

from __future__ import annotations

from typing import Any

_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}
_POS = {"type": "integer", "minimum": 1}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number", "minimum": 0}
_PATH = {"type": "string", "minLength": 1, "maxLength": 8192}


def _obj(props: dict[str, Any], required: tuple[str, ...] = (), *, closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return schema


RESULT_SCHEMA = _obj(
    {
        "status": {"enum": ["ok", "error"]},
        "data": {"type": ["object", "null"]},
        "error": {
            "oneOf": [
                {"type": "null"},
                _obj(
                    {
                        "type": {
                            "enum": [
                                "NotFound",
                                "PermissionDenied",
                                "InvalidInput",
                                "PolicyDenied",
                                "Timeout",
                                "TooLarge",
                                "InternalError",
                            ]
                        },
                        "message": _STR,
                        "retryable": _BOOL,
                        "details": {"type": "object"},
                    },
                    ("type", "message", "retryable", "details"),
                ),
            ]
        },
        "meta": _obj(
            {"call_id": _STR, "tool_id": _STR, "duration_ms": _NUM, "bytes": _INT, "truncated": _BOOL},
            ("call_id", "tool_id", "duration_ms", "bytes", "truncated"),
            closed=False,
        ),
    },
    ("status", "data", "error", "meta"),
)

# -- fs ---------------------------------------------------------------------------------------
FS_ENTRY = _obj(
    {"path": _STR, "name": _STR, "type": {"enum": ["file", "dir", "symlink", "other"]}, "size": _INT},
    ("path", "name", "type", "size"),
)
FS_LIST_DIR_IN = _obj(
    {"path": _PATH, "recursive": _BOOL, "max_entries": _POS, "include_hidden": _BOOL},
)
FS_LIST_DIR_OUT = _obj(
    {
        "path": _STR,
        "root": _STR,
        "entries": {"type": "array", "items": FS_ENTRY},
        "count": _INT,
        "hidden_by_policy": _INT,
    },
    ("path", "root", "entries", "count", "hidden_by_policy"),
)
FS_READ_TEXT_IN = _obj(
    {"path": _PATH, "max_bytes": _POS, "offset": _INT, "encoding": {"enum": ["utf-8", "latin-1", "ascii"]}},
    ("path",),
)
FS_READ_TEXT_OUT = _obj(
    {"path": _STR, "text": _STR, "encoding": _STR, "size": _INT, "offset": _INT},
    ("path", "text", "encoding", "size", "offset"),
)
FS_WRITE_TEXT_IN = _obj(
    {
        "path": _PATH,
        "text": {"type": "string", "maxLength": 64 << 20},
        "if_exists": {"enum": ["overwrite", "error"]},
        "create_dirs": _BOOL,
    },
    ("path", "text"),
)
FS_WRITE_TEXT_OUT = _obj(
    {"path": _STR, "bytes_written": _INT, "created": _BOOL, "sha256": _STR},
    ("path", "bytes_written", "created", "sha256"),
)
FS_MATCH = _obj(
    {
        "path": _STR,
        "line": _POS,
        "column": _POS,
        "text": _STR,
        "before": {"type": "array", "items": _STR},
        "after": {"type": "array", "items": _STR},
    },
    ("path", "line", "column", "text", "before", "after"),
)
FS_SEARCH_TEXT_IN = _obj(
    {
        "path": _PATH,
        "query": {"type": "string", "minLength": 1, "maxLength": 1000},
        "regex": _BOOL,
        "case_sensitive": _BOOL,
        "glob": {"type": "string", "minLength": 1, "maxLength": 200},
        "max_matches": _POS,
        "context_lines": _INT,
    },
    ("query",),
)
FS_SEARCH_TEXT_OUT = _obj(
    {"path": _STR, "matches": {"type": "array", "items": FS_MATCH}, "files_scanned": _INT, "files_skipped": _INT},
    ("path", "matches", "files_scanned", "files_skipped"),
)
FS_APPLY_PATCH_IN = _obj(
    {
        "patch": {"type": "string", "minLength": 1},
        "base": _PATH,
        "strip": {"type": "integer", "minimum": 0, "maximum": 16},
        "dry_run": _BOOL,
    },
    ("patch",),
)
FS_APPLY_PATCH_OUT = _obj(
    {
        "files": {
            "type": "array",
            "items": _obj(
                {
                    "path": _STR,
                    "action": {"enum": ["modify", "create", "delete"]},
                    "hunks": _INT,
                    "added": _INT,
                    "removed": _INT,
                },
                ("path", "action", "hunks", "added", "removed"),
            ),
        },
        "applied": _BOOL,
    },
    ("files", "applied"),
)

# -- shell ------------------------------------------------------------------------------------
_ARGV = {"type": "array", "items": {"type": "string", "maxLength": 131072}, "minItems": 1, "maxItems": 4096}
_ENV = {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 256}
SHELL_START_IN = _obj({"argv": _ARGV, "cwd": _PATH, "env": _ENV, "stall_after_s": _NUM}, ("argv",))
SHELL_START_OUT = _obj(
    {"process_id": _STR, "pid": _INT, "argv": {"type": "array", "items": _STR}, "cwd": _STR, "started_at": _STR},
    ("process_id", "pid", "argv", "cwd", "started_at"),
)
SHELL_POLL_IN = _obj(
    {
        "process_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "wait_s": {"type": "number", "minimum": 0, "maximum": 60},
        "tail_bytes": _POS,
    },
    ("process_id",),
)
SHELL_POLL_OUT = _obj(
    {
        "process_id": _STR,
        "running": _BOOL,
        "exit_code": {"type": ["integer", "null"]},
        "stdout_tail": _STR,
        "stderr_tail": _STR,
        "stdout_bytes": _INT,
        "stderr_bytes": _INT,
        "seconds_since_output": _NUM,
        "stalled": _BOOL,
        "stall_after_s": _NUM,
        "runtime_s": _NUM,
    },
    (
        "process_id",
        "running",
        "exit_code",
        "stdout_tail",
        "stderr_tail",
        "stdout_bytes",
        "stderr_bytes",
        "seconds_since_output",
        "stalled",
        "stall_after_s",
        "runtime_s",
    ),
)
SHELL_KILL_IN = _obj(
    {
        "process_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "grace_s": {"type": "number", "minimum": 0, "maximum": 60},
    },
    ("process_id",),
)
SHELL_KILL_OUT = _obj(
    {
        "process_id": _STR,
        "exit_code": {"type": ["integer", "null"]},
        "terminated": {"type": "array", "items": _INT},
        "forced": {"type": "array", "items": _INT},
        "survivors": {"type": "array", "items": _INT},
    },
    ("process_id", "exit_code", "terminated", "forced", "survivors"),
)
SHELL_RUN_IN = _obj(
    {"argv": _ARGV, "cwd": _PATH, "env": _ENV, "timeout_s": {"type": "number", "exclusiveMinimum": 0}}, ("argv",)
)
SHELL_RUN_OUT = _obj(
    {
        "exit_code": {"type": ["integer", "null"]},
        "stdout": _STR,
        "stderr": _STR,
        "stdout_bytes": _INT,
        "stderr_bytes": _INT,
        "process_id": _STR,
        "cleaned_up": {"type": "array", "items": _INT},
    },
    ("exit_code", "stdout", "stderr", "stdout_bytes", "stderr_bytes", "process_id", "cleaned_up"),
)

# -- web --------------------------------------------------------------------------------------
_URL = {"type": "string", "minLength": 1, "maxLength": 8192}
WEB_SEARCH_IN = _obj(
    {
        "query": {"type": "string", "minLength": 1, "maxLength": 500},
        "max_results": _POS,
        "categories": {"type": "string", "maxLength": 100},
        "language": {"type": "string", "maxLength": 20},
        "page": _POS,
    },
    ("query",),
)
WEB_SEARCH_OUT = _obj(
    {
        "query": _STR,
        "endpoint": _STR,
        "results": {
            "type": "array",
            "items": _obj(
                {"title": _STR, "url": _STR, "snippet": _STR, "engine": _STR}, ("title", "url", "snippet", "engine")
            ),
        },
        "artifact_id": _STR,
        "citation": _STR,
    },
    ("query", "endpoint", "results", "artifact_id", "citation"),
)
WEB_FETCH_IN = _obj({"url": _URL, "max_bytes": _POS}, ("url",))
WEB_FETCH_OUT = _obj(
    {
        "url": _STR,
        "final_url": _STR,
        "status": _INT,
        "content_type": _STR,
        "bytes": _INT,
        "truncated": _BOOL,
        "redirects": {"type": "array", "items": _obj({"status": _INT, "url": _STR}, ("status", "url"))},
        "artifact_id": _STR,
        "citation": _STR,
        "preview": _STR,
    },
    (
        "url",
        "final_url",
        "status",
        "content_type",
        "bytes",
        "truncated",
        "redirects",
        "artifact_id",
        "citation",
        "preview",
    ),
)
WEB_EXTRACT_IN = _obj(
    {"artifact_id": {"type": "string", "minLength": 1, "maxLength": 80}, "max_chars": _POS}, ("artifact_id",)
)
WEB_EXTRACT_OUT = _obj(
    {
        "artifact_id": _STR,
        "citation": _STR,
        "title": _STR,
        "text": _STR,
        "chars": _INT,
        "truncated": _BOOL,
        "source_url": {"type": ["string", "null"]},
    },
    ("artifact_id", "citation", "title", "text", "chars", "truncated", "source_url"),
)
