"""JSON schemas (draft 2020-12) of every builtin tool's input and output, and of the result.

The *input* schemas are generated from the pydantic models in :mod:`services.tools.args` by
:func:`schema_of`, which turns pydantic's output into a self-contained, model-friendly schema: no
``$ref``/``$defs`` (inlined), no ``title``s, ``additionalProperties: false`` and a ``required`` list on
every object with properties.  The same schema is published by the registry, validated by the
gateway and offered to a model as the tool's ``parameters``, so the three cannot drift apart.

The *output* schemas are generated the same way from the models in :mod:`services.tools.outputs`, by
:func:`output_schema_of` (without descriptions: an output schema says what a result holds, the tool's
description says what it means). :data:`RESULT_SCHEMA` is hand-written; the error ``type`` enum of
the result is generated from :class:`services.tools.results.ErrorType`.
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
from services.tools.outputs import (
    ContextOutput,
    FsAddArtifactOutput,
    FsApplyPatchOutput,
    FsListDirOutput,
    FsReadTextOutput,
    FsRestoreOutput,
    FsSearchTextOutput,
    FsWriteTextOutput,
    ShellKillOutput,
    ShellPollOutput,
    ShellRunOutput,
    ShellStartOutput,
    WebExtractOutput,
    WebFetchOutput,
    WebSearchOutput,
)
from services.tools.results import ErrorType

__all__ = [
    "FS_APPLY_PATCH_IN",
    "CONTEXT_OUT",
    "FS_ADD_ARTIFACT_OUT",
    "FS_APPLY_PATCH_OUT",
    "FS_LIST_DIR_IN",
    "FS_LIST_DIR_OUT",
    "FS_READ_TEXT_IN",
    "FS_READ_TEXT_OUT",
    "FS_RESTORE_OUT",
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
    "output_schema_of",
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


def output_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a tool's output ``model``: :func:`schema_of` without any ``description``."""
    return _without_descriptions(schema_of(model))


def _without_descriptions(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description" and isinstance(value, str):
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _without_descriptions(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_without_descriptions(sub) if isinstance(sub, dict) else sub for sub in value]
        elif key in _SUBSCHEMA_ONE and isinstance(value, dict):
            out[key] = _without_descriptions(value)
        else:
            out[key] = value
    return out


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

# -- the result (hand-written) ------------------------------------------------------------------
_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}
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

# -- tool outputs (generated from the models in services.tools.outputs) ----------------------------
FS_LIST_DIR_OUT = output_schema_of(FsListDirOutput)
FS_READ_TEXT_OUT = output_schema_of(FsReadTextOutput)
FS_WRITE_TEXT_OUT = output_schema_of(FsWriteTextOutput)
FS_SEARCH_TEXT_OUT = output_schema_of(FsSearchTextOutput)
FS_APPLY_PATCH_OUT = output_schema_of(FsApplyPatchOutput)
FS_RESTORE_OUT = output_schema_of(FsRestoreOutput)
FS_ADD_ARTIFACT_OUT = output_schema_of(FsAddArtifactOutput)
SHELL_START_OUT = output_schema_of(ShellStartOutput)
SHELL_POLL_OUT = output_schema_of(ShellPollOutput)
SHELL_KILL_OUT = output_schema_of(ShellKillOutput)
SHELL_RUN_OUT = output_schema_of(ShellRunOutput)
WEB_SEARCH_OUT = output_schema_of(WebSearchOutput)
WEB_FETCH_OUT = output_schema_of(WebFetchOutput)
WEB_EXTRACT_OUT = output_schema_of(WebExtractOutput)
CONTEXT_OUT = output_schema_of(ContextOutput)
