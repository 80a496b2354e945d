"""Tool argument models, the schemas generated from them, and what the registry publishes.

The table below was run against the hand-written schemas these models replaced (commit 7bb36c9)
and gave the same verdict for every row: it pins what each tool accepts and refuses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from enum import Enum
from typing import Any, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import MISSING, BaseModel, ConfigDict, ValidationError

from services.errors import InvalidInput, NotFound
from services.policy import RiskTier
from services.tools import schemas
from services.tools.args import ARGS_MODELS, FsReadTextArgs, ShellRunArgs, ToolArgs
from services.tools.builtin import BuiltinProvider, default_registry
from services.tools.gateway import ToolGateway
from services.tools.registry import (
    ToolRegistry,
    ToolSpec,
    tool,
    tool_schemas_for_model,
)
from services.tools.results import ErrorType, ToolResult
from services.tools.schemas import schema_of

pytestmark = pytest.mark.timeout(60)

LONG = "x" * 8193
_OK = True
_BAD = False

# (tool id, arguments, accepted?)
TABLE: list[tuple[str, Any, bool]] = [
    # fs:list_dir — everything optional
    ("builtin:fs:list_dir", {}, _OK),
    ("builtin:fs:list_dir", {"path": "sub", "recursive": True, "max_entries": 1, "include_hidden": False}, _OK),
    ("builtin:fs:list_dir", {"path": ""}, _BAD),
    ("builtin:fs:list_dir", {"path": LONG}, _BAD),
    ("builtin:fs:list_dir", {"path": None}, _BAD),
    ("builtin:fs:list_dir", {"max_entries": 0}, _BAD),
    ("builtin:fs:list_dir", {"recursive": "yes"}, _BAD),
    ("builtin:fs:list_dir", {"recursive": 1}, _BAD),
    ("builtin:fs:list_dir", {"depth": 2}, _BAD),
    # fs:add_artifact
    ("builtin:fs:restore", {"call_id": "call-20260101-000000-abcd1234", "paths": ["a.txt"]}, _OK),
    ("builtin:fs:restore", {"call_id": "call-1", "paths": []}, _BAD),
    ("builtin:fs:restore", {"call_id": "../x", "paths": ["a.txt"]}, _BAD),
    ("builtin:fs:add_artifact", {"path": "a.txt"}, _OK),
    ("builtin:fs:add_artifact", {"path": "a.txt", "name": "b.txt", "description": "notes"}, _OK),
    ("builtin:fs:add_artifact", {}, _BAD),
    ("builtin:fs:add_artifact", {"path": "a.txt", "name": ""}, _BAD),
    ("builtin:fs:add_artifact", {"path": "a.txt", "extra": 1}, _BAD),
    # fs:read_text
    ("builtin:fs:read_text", {"path": "a.txt"}, _OK),
    ("builtin:fs:read_text", {"path": "a.txt", "max_bytes": 10, "offset": 0, "encoding": "latin-1"}, _OK),
    ("builtin:fs:read_text", {"path": "x" * 8192}, _OK),
    ("builtin:fs:read_text", {}, _BAD),
    ("builtin:fs:read_text", {"path": 5}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "max_bytes": 0}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "max_bytes": "10"}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "max_bytes": True}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "offset": -1}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "encoding": "utf-16"}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "encoding": None}, _BAD),
    ("builtin:fs:read_text", {"path": "a.txt", "unexpected": True}, _BAD),
    # fs:write_text
    ("builtin:fs:write_text", {"path": "a.txt", "text": ""}, _OK),
    ("builtin:fs:write_text", {"path": "a", "text": "t", "if_exists": "error", "create_dirs": True}, _OK),
    ("builtin:fs:write_text", {"path": "a.txt"}, _BAD),
    ("builtin:fs:write_text", {"text": "t"}, _BAD),
    ("builtin:fs:write_text", {"path": "a.txt", "text": 1}, _BAD),
    ("builtin:fs:write_text", {"path": "a.txt", "text": "t", "if_exists": "append"}, _BAD),
    ("builtin:fs:write_text", {"path": "a.txt", "text": "t", "create_dirs": None}, _BAD),
    # fs:search_text
    ("builtin:fs:search_text", {"query": "q"}, _OK),
    (
        "builtin:fs:search_text",
        {
            "query": "q",
            "path": ".",
            "regex": True,
            "case_sensitive": False,
            "glob": "*.py",
            "max_matches": 3,
            "context_lines": 0,
        },
        _OK,
    ),
    ("builtin:fs:search_text", {"query": "q" * 1000}, _OK),
    ("builtin:fs:search_text", {}, _BAD),
    ("builtin:fs:search_text", {"query": ""}, _BAD),
    ("builtin:fs:search_text", {"query": "q" * 1001}, _BAD),
    ("builtin:fs:search_text", {"query": "q", "glob": ""}, _BAD),
    ("builtin:fs:search_text", {"query": "q", "glob": "g" * 201}, _BAD),
    ("builtin:fs:search_text", {"query": "q", "context_lines": -1}, _BAD),
    ("builtin:fs:search_text", {"query": "q", "max_matches": 0}, _BAD),
    # fs:apply_patch
    ("builtin:fs:apply_patch", {"patch": "--- a\n+++ b\n"}, _OK),
    ("builtin:fs:apply_patch", {"patch": "p", "base": "sub", "strip": 16, "dry_run": True}, _OK),
    ("builtin:fs:apply_patch", {"patch": "p", "strip": 0}, _OK),
    ("builtin:fs:apply_patch", {"patch_file": "fix.diff"}, _OK),
    ("builtin:fs:apply_patch", {"patch": "p", "patch_file": "fix.diff"}, _BAD),
    ("builtin:fs:apply_patch", {"patch_file": ""}, _BAD),
    ("builtin:fs:apply_patch", {"patch": ""}, _BAD),
    ("builtin:fs:apply_patch", {}, _BAD),
    ("builtin:fs:apply_patch", {"patch": "p", "strip": 17}, _BAD),
    ("builtin:fs:apply_patch", {"patch": "p", "strip": -1}, _BAD),
    ("builtin:fs:apply_patch", {"patch": "p", "base": ""}, _BAD),
    # shell:start
    ("builtin:shell:start", {"argv": ["echo", "hi"]}, _OK),
    ("builtin:shell:start", {"argv": ["x"], "cwd": "sub", "env": {"A": "1"}, "stall_after_s": 0}, _OK),
    ("builtin:shell:start", {"argv": [""]}, _OK),
    ("builtin:shell:start", {"argv": []}, _BAD),
    ("builtin:shell:start", {"argv": "echo hi"}, _BAD),
    ("builtin:shell:start", {"argv": [1]}, _BAD),
    ("builtin:shell:start", {"argv": ["x" * 131073]}, _BAD),
    ("builtin:shell:start", {"argv": ["x"] * 4097}, _BAD),
    ("builtin:shell:start", {"argv": ["x"], "env": {"A": 1}}, _BAD),
    ("builtin:shell:start", {"argv": ["x"], "env": {f"V{i}": "" for i in range(257)}}, _BAD),
    ("builtin:shell:start", {"argv": ["x"], "stall_after_s": -0.5}, _BAD),
    ("builtin:shell:start", {"argv": ["x"], "cwd": None}, _BAD),
    # shell:poll
    ("builtin:shell:poll", {"process_id": "p1"}, _OK),
    ("builtin:shell:poll", {"process_id": "p1", "wait_s": 60, "tail_bytes": 1}, _OK),
    ("builtin:shell:poll", {"process_id": "p1", "wait_s": 0.5}, _OK),
    ("builtin:shell:poll", {"process_id": ""}, _BAD),
    ("builtin:shell:poll", {"process_id": "p" * 65}, _BAD),
    ("builtin:shell:poll", {"process_id": "p1", "wait_s": 60.5}, _BAD),
    ("builtin:shell:poll", {"process_id": "p1", "tail_bytes": 0}, _BAD),
    # shell:kill
    ("builtin:shell:kill", {"process_id": "p1"}, _OK),
    ("builtin:shell:kill", {"process_id": "p1", "grace_s": 0}, _OK),
    ("builtin:shell:kill", {"process_id": "p1", "grace_s": 61}, _BAD),
    ("builtin:shell:kill", {}, _BAD),
    # shell:run
    ("builtin:shell:run", {"argv": ["true"]}, _OK),
    ("builtin:shell:run", {"argv": ["true"], "cwd": ".", "env": {}, "timeout_s": 0.01}, _OK),
    ("builtin:shell:run", {"argv": ["true"], "timeout_s": 0}, _BAD),
    ("builtin:shell:run", {"argv": ["true"], "timeout_s": "5"}, _BAD),
    ("builtin:shell:run", {"argv": ["true"], "stall_after_s": 5}, _BAD),
    # web:search
    ("builtin:web:search", {"query": "q"}, _OK),
    ("builtin:web:search", {"query": "q", "max_results": 5, "categories": "", "language": "en", "page": 2}, _OK),
    ("builtin:web:search", {"query": ""}, _BAD),
    ("builtin:web:search", {"query": "q" * 501}, _BAD),
    ("builtin:web:search", {"query": "q", "categories": "c" * 101}, _BAD),
    ("builtin:web:search", {"query": "q", "language": "l" * 21}, _BAD),
    ("builtin:web:search", {"query": "q", "page": 0}, _BAD),
    # web:fetch
    ("builtin:web:fetch", {"url": "http://127.0.0.1/"}, _OK),
    ("builtin:web:fetch", {"url": "u", "max_bytes": 1}, _OK),
    ("builtin:web:fetch", {"url": ""}, _BAD),
    ("builtin:web:fetch", {"url": "u" * 8193}, _BAD),
    ("builtin:web:fetch", {"url": "u", "max_bytes": 0}, _BAD),
    ("builtin:web:fetch", {"url": ["u"]}, _BAD),
    # web:extract
    ("builtin:web:extract", {"artifact_id": "a1"}, _OK),
    ("builtin:web:extract", {"artifact_id": "a" * 80, "max_chars": 1}, _OK),
    ("builtin:web:extract", {"artifact_id": "a" * 81}, _BAD),
    ("builtin:web:extract", {"artifact_id": "a1", "max_chars": 0}, _BAD),
    ("builtin:web:extract", {"url": "http://x"}, _BAD),
    ("builtin:context:find", {"query": "tantivy"}, _OK),
    (
        "builtin:context:find",
        {
            "query": "q",
            "target_uri": "axiom://resources/docs",
            "limit": 100,
            "score_threshold": 0.5,
            "filter": {"scope": "user", "prefix": "axiom://user/memories", "file_types": ["md"], "levels": ["L2"]},
            "budget": {"max_ms": 50.0, "max_nodes": 10, "max_depth": 0},
        },
        _OK,
    ),
    ("builtin:context:find", {"query": ""}, _BAD),
    ("builtin:context:find", {"query": "q", "target_uri": "/etc/passwd"}, _BAD),
    ("builtin:context:find", {"query": "q", "limit": 0}, _BAD),
    ("builtin:context:find", {"query": "q", "filter": {"scope": "temp"}}, _BAD),
    ("builtin:context:find", {"query": "q", "budget": {"max_ms": 0}}, _BAD),
    ("builtin:context:find", {"query": "q", "session": "s1"}, _BAD),
    ("builtin:context:search", {"query": "q", "session": "s1", "filter": {"levels": ["L0", "L1"]}}, _OK),
    ("builtin:context:search", {"query": "q", "filter": {"levels": ["L3"]}}, _BAD),
    ("builtin:context:search", {"query": "q", "budget": {"max_nodes": 1, "extra": 1}}, _BAD),
]


def _row_id(row: tuple[str, Any, bool]) -> str:
    tool_id, args, ok = row
    return f"{tool_id.split(':', 1)[1]}-{'ok' if ok else 'bad'}-{json.dumps(args)[:40]}"


# -- the table: published schema and model agree with the old verdicts --------------------------
@pytest.mark.parametrize("row", TABLE, ids=_row_id)
def test_published_schema_gives_the_table_verdict(row: tuple[str, Any, bool]) -> None:
    tool_id, args, ok = row
    assert default_registry().validator(tool_id).is_valid(args) is ok


@pytest.mark.parametrize("row", TABLE, ids=_row_id)
def test_model_gives_the_table_verdict(row: tuple[str, Any, bool]) -> None:
    tool_id, args, ok = row
    model = ARGS_MODELS[tool_id]
    if ok:
        model.model_validate(args)
    else:
        with pytest.raises(ValidationError):
            model.model_validate(args)


def test_table_covers_every_builtin_tool_both_ways() -> None:
    builtin = {spec.tool_id for spec in ToolRegistry([BuiltinProvider()]).list()}
    assert set(ARGS_MODELS) == builtin
    assert {t for t, _, ok in TABLE if ok} == builtin
    assert {t for t, _, ok in TABLE if not ok} == builtin


# -- what the registry publishes --------------------------------------------------------------------
def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema (not the property-name maps themselves)."""
    if isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key in ("properties", "patternProperties", "$defs"):
                for sub in value.values():
                    yield from _walk(sub)
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                for sub in value:
                    yield from _walk(sub)
            elif key in ("items", "additionalProperties", "not"):
                yield from _walk(value)


@pytest.mark.parametrize("tool_id", sorted(ARGS_MODELS))
def test_registry_publishes_the_self_contained_model_schema(tool_id: str) -> None:
    published = default_registry().get(tool_id).describe()["input_schema"]
    assert published == schema_of(ARGS_MODELS[tool_id])
    Draft202012Validator.check_schema(published)
    assert "description" not in published and "title" not in published
    for node in _walk(published):
        assert not {"$ref", "$defs", "title"} & set(node), node
        assert "null" not in json.dumps(node.get("type", "")), node  # optional means omitted, never null
        if node.get("type") == "object" and "properties" in node:
            assert node["additionalProperties"] is False and isinstance(node["required"], list)
    for name, prop in published["properties"].items():
        assert prop.get("description"), f"{tool_id}: {name} has no description"
        assert "\n" not in prop["description"] and "``" not in prop["description"]


def test_module_level_names_are_the_generated_schemas() -> None:
    assert schemas.FS_READ_TEXT_IN == schema_of(FsReadTextArgs)
    assert schemas.SHELL_RUN_IN["required"] == ["argv"]
    assert schemas.FS_READ_TEXT_OUT["required"] == ["path", "text", "encoding", "size", "offset"]


def test_describe_hands_out_copies_that_cannot_change_validation() -> None:
    registry = ToolRegistry([BuiltinProvider()])
    described = registry.get("builtin:fs:read_text").describe()
    described["input_schema"]["properties"]["path"]["maxLength"] = 1
    described["input_schema"]["required"].clear()
    described["output_schema"]["required"].clear()
    assert registry.validator("builtin:fs:read_text").is_valid({"path": "long-name.txt"})
    assert not registry.validator("builtin:fs:read_text").is_valid({})
    again = registry.get("builtin:fs:read_text").describe()
    assert again["input_schema"]["properties"]["path"]["maxLength"] == 8192
    assert again["output_schema"]["required"] == ["path", "text", "encoding", "size", "offset"]


# -- schema_of on its own ---------------------------------------------------------------------------
class Colour(Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    title: str
    """A property that happens to be called title."""
    colour: Colour = Colour.RED


class Outer(BaseModel):
    """Docstring that stays out of the schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    inner: Inner
    """The nested one."""
    many: list[Inner] = []
    mode: Literal["a", "b"] = "a"


class Node(BaseModel):
    children: list[Node] = []


def test_schema_of_inlines_references_and_keeps_a_property_called_title() -> None:
    raw = Outer.model_json_schema()
    assert "$defs" in raw  # the case schema_of has to handle
    schema = schema_of(Outer)
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    inner = schema["properties"]["inner"]
    assert inner["type"] == "object" and inner["description"] == "The nested one."
    assert set(inner["properties"]) == {"title", "colour"} and inner["required"] == ["title"]
    assert inner["properties"]["colour"]["enum"] == ["red", "blue"]
    assert inner["properties"]["title"] == {
        "description": "A property that happens to be called title.",
        "type": "string",
    }
    assert schema["properties"]["many"]["items"]["properties"]["colour"]["enum"] == ["red", "blue"]
    assert inner["additionalProperties"] is False
    assert "description" not in schema
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"inner": {"title": "t", "colour": "blue"}})
    assert not validator.is_valid({"inner": {"title": "t", "colour": "green"}})
    assert not validator.is_valid({"inner": {"title": "t", "other": 1}})


def test_schema_of_refuses_a_recursive_model() -> None:
    with pytest.raises(ValueError, match="cannot inline"):
        schema_of(Node)


def test_schema_of_is_deterministic() -> None:
    first = json.dumps(schema_of(ShellRunArgs))
    assert all(json.dumps(schema_of(ShellRunArgs)) == first for _ in range(3))


def test_tool_args_are_frozen_and_strict() -> None:
    args = FsReadTextArgs.model_validate({"path": "a"})
    assert isinstance(args, ToolArgs) and args.model_dump(exclude_unset=True) == {"path": "a"}
    # A fixed default is the model's own; a default that comes from the policy's limits stays omitted.
    assert args.model_dump() == {"path": "a", "offset": 0, "encoding": "utf-8"} and args.max_bytes is MISSING
    with pytest.raises(ValidationError):
        args.path = "b"  # type: ignore[misc]


# -- the result schema ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(ErrorType))
def test_result_schema_accepts_every_error_type(kind: ErrorType) -> None:
    meta = {"call_id": "c", "tool_id": "t", "duration_ms": 1.0, "bytes": 0, "truncated": False}
    result = ToolResult.failure(kind, "m", meta=meta).to_dict()
    Draft202012Validator(schemas.RESULT_SCHEMA).validate(result)
    result["error"]["type"] = "NoSuchError"
    assert not Draft202012Validator(schemas.RESULT_SCHEMA).is_valid(result)


# -- validation errors name the field -------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool_id", "args", "expected"),
    [
        ("builtin:fs:read_text", {"path": LONG}, "path: '" + "x" * 20),
        ("builtin:fs:read_text", {"path": LONG}, "is too long"),
        ("builtin:shell:run", {"argv": ["ok", "x" * 131073]}, "argv/1: "),
        ("builtin:shell:run", {"argv": ["ok", "x" * 131073]}, "…' is too long"),
        ("builtin:shell:run", {"argv": ["x"] * 4097}, "…] is too long"),
        ("builtin:shell:run", {"argv": ["x"], "env": {f"V{i}": "" for i in range(300)}}, "…} has too many properties"),
        ("builtin:shell:run", {"argv": ["ok"], "env": {"A": 1}}, "env/A: 1 is not of type 'string'"),
        ("builtin:fs:read_text", {}, "(arguments): 'path' is a required property"),
        ("builtin:fs:read_text", {"path": "a", "encoding": "utf-16"}, "encoding: 'utf-16' is not one of"),
    ],
)
def test_validation_errors_name_the_failing_field(tool_id: str, args: Any, expected: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        default_registry().validate(tool_id, args)
    assert expected in caught.value.message and "\n" not in caught.value.message
    assert caught.value.details["tool_id"] == tool_id


def test_validation_error_reaches_the_caller_through_the_gateway(gateway: ToolGateway) -> None:
    result = gateway.execute_sync("builtin:fs:read_text", {"path": LONG})
    assert result.error is not None and result.error.type == "InvalidInput"
    assert result.error.message.startswith("path: 'xxx") and "is too long" in result.error.message


def test_validate_accepts_good_arguments_and_refuses_non_objects() -> None:
    default_registry().validate("builtin:fs:read_text", {"path": "a"})
    with pytest.raises(InvalidInput, match="arguments must be a JSON object"):
        default_registry().validate("builtin:fs:read_text", ["a"])
    with pytest.raises(NotFound):
        default_registry().validate("builtin:fs:nope", {})


@pytest.mark.parametrize(
    ("tool_id", "args"),
    [
        ("builtin:shell:run", {"argv": ["true"], "timeout_s": math.inf}),
        ("builtin:shell:poll", {"process_id": "p1", "wait_s": math.nan}),
        ("builtin:shell:kill", {"process_id": "p1", "grace_s": math.nan}),
        ("builtin:shell:start", {"argv": ["true"], "stall_after_s": math.inf}),
    ],
)
def test_non_finite_numbers_are_refused(tool_id: str, args: dict[str, Any], gateway: ToolGateway) -> None:
    """NaN and Infinity are not JSON (Python's json module reads them anyway): refused, with the field."""
    field = next(k for k, v in args.items() if isinstance(v, float))
    with pytest.raises(InvalidInput, match=f"^{field}: "):
        default_registry().validate(tool_id, args)
    with pytest.raises(ValidationError):
        ARGS_MODELS[tool_id].model_validate(args)
    result = gateway.execute_sync(tool_id, args)
    assert result.error is not None and result.error.type == "InvalidInput"
    assert result.error.message.startswith(f"{field}: ")


# -- tools offered to a model -----------------------------------------------------------------------
def test_tool_schemas_for_model() -> None:
    registry = default_registry()
    offered = tool_schemas_for_model(registry, ["builtin:shell:run", "builtin:fs:read_text", "builtin:fs:read_text"])
    assert [t["name"] for t in offered] == ["builtin:fs:read_text", "builtin:shell:run"]
    read = offered[0]
    assert set(read) == {"name", "description", "parameters"}
    assert read["description"] == registry.get("builtin:fs:read_text").description
    assert read["parameters"] == registry.get("builtin:fs:read_text").input_schema
    read["parameters"]["required"].clear()  # a copy: the registry is not changed
    assert registry.get("builtin:fs:read_text").input_schema["required"] == ["path"]
    assert tool_schemas_for_model(registry, []) == []
    json.dumps(tool_schemas_for_model(registry, ARGS_MODELS))  # plain JSON
    with pytest.raises(NotFound):
        tool_schemas_for_model(registry, ["builtin:fs:format_disk"])


class AnyArgs(BaseModel):
    """Any object: a test tool that takes what it is given."""

    model_config = ConfigDict(extra="allow")


def _noop(ctx: Any, args: dict[str, Any]) -> Any:
    raise AssertionError("never called")


def test_tool_schemas_for_model_neutralise_provider_descriptions() -> None:
    specs: list[ToolSpec] = []
    tool(
        "hostile:misc:x",
        tier=RiskTier.READ_ONLY,
        description="List files.\x1b]0;pwned\x07\u202eexe.txt",
        args=AnyArgs,
        output_schema={"type": "object"},
        registry=specs,
    )(_noop)

    class Hostile:
        name = "hostile"

        def tools(self) -> list[ToolSpec]:
            return specs

    [offered] = tool_schemas_for_model(ToolRegistry([Hostile()]), ["hostile:misc:x"])
    assert "\x1b" not in offered["description"] and "\u202e" not in offered["description"]
    assert offered["description"].startswith("List files.\\x1b]0;pwned")
