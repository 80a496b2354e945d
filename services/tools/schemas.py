"""JSON schemas (draft 2020-12) of every builtin tool's input and output, and of the result.

The *input* schemas are generated from the pydantic models in :mod:`services.tools.args` by
:func:`schema_of`, which turns pydantic's output into a self-contained, model-friendly schema: no
``$ref``/``$defs`` (inlined), no ``title``s, ``additionalProperties: false`` and a ``required`` list on
every object with properties.  The same schema is published by the registry, validated by the
gateway and offered to a model as the tool's ``parameters``, so the three cannot drift apart.

The output schemas and :data:`RESULT_SCHEMA` are hand-written; the error ``type`` enum of the result is
generated from :class:`services.tools.results.ErrorType`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from services.tools.args import (
    FsApplyPatchArgs,
    FsListDirArgs,
    FsReadTextArgs,
    FsSearchTextArgs,
    FsWriteTextArgs,
    ShellKillArgs,
    ShellPollArgs,
    ShellRunArgs,
    ShellStartArgs,
    WebExtractArgs,
    WebFetchArgs,
    WebSearchArgs,
)
from services.tools.results import ErrorType

__all__ = [
    "FS_APPLY_PATCH_IN",
    "FS_APPLY_PATCH_OUT",
    "FS_ENTRY",
    "FS_LIST_DIR_IN",
    "FS_LIST_DIR_OUT",
    "FS_MATCH",
    "FS_READ_TEXT_IN",
    "FS_READ_TEXT_OUT",
    "FS_SEARCH_TEXT_IN",
    "FS_SEARCH_TEXT_OUT",
    "FS_WRITE_TEXT_IN",
    "FS_WRITE_TEXT_OUT",
    "RESULT_SCHEMA",
    "SHELL_KILL_IN",
    "SHELL_KILL_OUT",
    "SHELL_POLL_IN",
    "SHELL_POLL_OUT",
    "SHELL_RUN_IN",
    "SHELL_RUN_OUT",
    "SHELL_START_IN",
    "SHELL_START_OUT",
    "WEB_EXTRACT_IN",
    "WEB_EXTRACT_OUT",
    "WEB_FETCH_IN",
    "WEB_FETCH_OUT",
    "WEB_SEARCH_IN",
    "WEB_SEARCH_OUT",
    "schema_of",
]

# -- pydantic model → self-contained JSON Schema ---------------------------------------------------
# Keywords whose value is a map of name → subschema, a list of subschemas, or one subschema. Keys of
# the maps are property names, not keywords (a property may well be called "title").
_SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
_SUBSCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SUBSCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames"}
    | {"unevaluatedProperties", "unevaluatedItems"}
)
_DROPPED = frozenset({"title"})


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of ``model``'s input, self-contained and ready to offer to a model.

    ``$ref``s are inlined (a recursive model cannot be, and raises ``ValueError``), a lone
    ``allOf`` wrapper is merged into its parent, ``title``s are dropped everywhere, and every object
    with ``properties`` gets ``additionalProperties: false`` (unless it says otherwise) and a
    ``required`` list.  The model's own docstring is not included: the tool's description is.
    """
    raw = model.model_json_schema(mode="validation")
    defs: dict[str, Any] = raw.pop("$defs", {})
    schema = _clean(raw, defs, ())
    schema.pop("description", None)
    return schema


def _clean(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            raise ValueError(f"cannot inline schema reference {ref!r}")
        target = _clean(defs[name], defs, (*seen, name))
        siblings = _clean({k: v for k, v in node.items() if k != "$ref"}, defs, seen)
        return {**target, **siblings}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _clean(sub, defs, seen) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_clean(sub, defs, seen) if isinstance(sub, dict) else sub for sub in value]
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict):
            out[key] = _clean(value, defs, seen)
        elif key == "description" and isinstance(value, str):
            out[key] = " ".join(value.replace("``", "`").split())  # docstring layout and rST quoting
        else:
            out[key] = _copy(value)
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and not set(all_of[0]) & (set(out) - {"allOf"}):
        del out["allOf"]
        out = {**all_of[0], **out}
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
        out.setdefault("required", [])
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# -- tool inputs ----------------------------------------------------------------------------------
FS_LIST_DIR_IN = schema_of(FsListDirArgs)
FS_READ_TEXT_IN = schema_of(FsReadTextArgs)
FS_WRITE_TEXT_IN = schema_of(FsWriteTextArgs)
FS_SEARCH_TEXT_IN = schema_of(FsSearchTextArgs)
FS_APPLY_PATCH_IN = schema_of(FsApplyPatchArgs)
SHELL_START_IN = schema_of(ShellStartArgs)
SHELL_POLL_IN = schema_of(ShellPollArgs)
SHELL_KILL_IN = schema_of(ShellKillArgs)
SHELL_RUN_IN = schema_of(ShellRunArgs)
WEB_SEARCH_IN = schema_of(WebSearchArgs)
WEB_FETCH_IN = schema_of(WebFetchArgs)
WEB_EXTRACT_IN = schema_of(WebExtractArgs)

# -- tool outputs and the result (hand-written) ---------------------------------------------------
_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}
_POS = {"type": "integer", "minimum": 1}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number", "minimum": 0}


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
                        "type": {"enum": [str(kind) for kind in ErrorType]},
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
FS_READ_TEXT_OUT = _obj(
    {"path": _STR, "text": _STR, "encoding": _STR, "size": _INT, "offset": _INT},
    ("path", "text", "encoding", "size", "offset"),
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
FS_SEARCH_TEXT_OUT = _obj(
    {"path": _STR, "matches": {"type": "array", "items": FS_MATCH}, "files_scanned": _INT, "files_skipped": _INT},
    ("path", "matches", "files_scanned", "files_skipped"),
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
SHELL_START_OUT = _obj(
    {"process_id": _STR, "pid": _INT, "argv": {"type": "array", "items": _STR}, "cwd": _STR, "started_at": _STR},
    ("process_id", "pid", "argv", "cwd", "started_at"),
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
