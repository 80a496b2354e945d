"""The JSON Schema of a policy file (validated after YAML parsing; errors carry file:line)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from services.policy.mcp import MCP_SCHEMA
from services.policy.model import MODES, OUTSIDE_ROOT, PATH_OPS, SANDBOX_MODES, Limits

_RULE_EXAMPLES = {
    "match": {"type": "array", "items": {"type": "string"}},
    "not_match": {"type": "array", "items": {"type": "string"}},
}
_ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"}
_OPS = {"type": "array", "items": {"enum": list(PATH_OPS)}, "minItems": 1, "uniqueItems": True}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
_LIMIT_TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": "integer", "minimum": 0},
    "float": {"type": "number", "minimum": 0},
    "bool": {"type": "boolean"},
}
_SWITCH = {"oneOf": [{"type": "boolean"}, {"enum": ["enabled", "disabled"]}]}

POLICY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version"],
    "properties": {
        "version": {"const": 1},
        "mode": {"enum": list(MODES)},
        "providers": {
            "type": "object",
            "properties": {"mcp": MCP_SCHEMA},
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"enabled": {"type": "boolean"}},
            },
        },
        "tool_classes": {"type": "object", "additionalProperties": _SWITCH},
        "tools": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"enabled": {"type": "boolean"}, "require_approval": {"type": "boolean"}},
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {f.name: _LIMIT_TYPES[str(f.type)] for f in fields(Limits)},
        },
        "filesystem": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "allowed_roots": _STRINGS,
                "allow_hardlinks": {"type": "boolean"},
                "deny": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "glob"],
                        "properties": {
                            "id": _ID,
                            "glob": {"type": "string", "minLength": 1},
                            "ops": _OPS,
                            **_RULE_EXAMPLES,
                        },
                    },
                },
                "deny_extensions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "extensions"],
                        "properties": {"id": _ID, "extensions": _STRINGS, "ops": _OPS, **_RULE_EXAMPLES},
                    },
                },
                "write_extensions": {"oneOf": [{"type": "null"}, _STRINGS]},
            },
        },
        "shell": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "executables": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "names"],
                        "properties": {"id": _ID, "names": _STRINGS, **_RULE_EXAMPLES},
                    },
                },
                "privileged": _STRINGS,
                "env_passthrough": _STRINGS,
                "env_allow": _STRINGS,
                "inert_programs": _STRINGS,
                "check_path_arguments": {"type": "boolean"},
                "search_path": {"oneOf": [{"type": "null"}, _STRINGS]},
                "sandbox": {"enum": list(SANDBOX_MODES)},
                "network": {"type": "boolean"},
                "outside_root": {"enum": list(OUTSIDE_ROOT)},
                "visible_paths": _STRINGS,
            },
        },
        "web": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "searxng_url": {"type": ["string", "null"]},
                "schemes": {"type": "array", "items": {"enum": ["http", "https"]}},
                "allow_domains": _STRINGS,
                "deny_domains": _STRINGS,
                "allow_private": {
                    "type": "array",
                    "items": {
                        "oneOf": [
                            {"type": "string", "minLength": 1},
                            {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["host", "ports"],
                                "properties": {
                                    "host": {"type": "string", "minLength": 1},
                                    "ports": {
                                        "type": "array",
                                        "items": {"type": "integer", "minimum": 1, "maximum": 65535},
                                    },
                                },
                            },
                        ]
                    },
                },
            },
        },
        "auto_approve": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "tools"],
                "properties": {
                    "id": _ID,
                    "tools": _STRINGS,
                    "domains": _STRINGS,
                    "paths": _STRINGS,
                    "executables": _STRINGS,
                },
            },
        },
    },
}
