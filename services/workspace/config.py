"""``workspace.yaml`` as a typed model.

The file is read with ruamel.yaml (round trip: comments and unknown keys survive every
write) and *validated* with :class:`WorkspaceConfig`.  A wrong value is one
:class:`~services.errors.ConfigError` naming the file, the line and the field::

    /…/workspace.yaml:4: approval_mode: must be one of guide, commander, strict

Unknown keys are allowed and kept (a newer Aries may have written them).
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.approval_mode import MODE_NAMES, ApprovalMode
from services.errors import ConfigError, InvalidName
from services.files.yamlio import line_of
from services.text.names import validate_name
from services.workspace.bridge_config import MODES as CLOUD_MODES
from services.workspace.bridge_config import BridgeConfig


class RetrievalConfig(BaseModel):
    """``settings.retrieval``: how this workspace retrieves."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    """Minimum dense similarity of a relevant passage (see :mod:`services.retrieval.relevance`); None: the default."""
    min_keyword: float | None = Field(default=None, ge=0.0, le=1.0)
    """Minimum keyword share (0…1) of a keyword match that counts on its own; None: the default."""
    min_bm25: float | None = Field(default=None, ge=0.0)
    """For hits recorded without a keyword share: the minimum BM25 score; None: the default."""


class ModelSettings(BaseModel):
    """``settings.models.<name>``: what Aries should know about one model (``<name>`` is its
    ``provider:model`` label, e.g. ``openai:gemma``, or the bare model name)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    context_window: int | None = Field(default=None, ge=128, le=10_000_000)
    """Tokens the model can see (prompt and answer together); None: ask the server, else learn it
    from its first overflow error."""
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    """The longest answer asked for (sent as ``max_tokens`` / ``num_predict``; kept free in the
    window); None: the server's default, and an eighth of the window kept free."""
    text_tool_calls: bool | None = None
    """Read tool calls the model writes as text (``<tool_call>…``, ``tool_code`` fences, …) and run them
    through the gateway (never approved by a grant or by commander mode); None: on until the model
    returns a native tool call in the conversation, then off; false: never; true: always."""
    tool_budget: int | None = Field(default=None, ge=0, le=1_000_000)
    """Tokens the tool definitions may take in one request: the enabled tools most relevant to the
    request are offered within it (``services.assistant.tool_offer``), up to what the window leaves; None:
    1,200, and at most half of what the window leaves."""
    constrained: bool | None = None
    """The server constrains output to a JSON Schema (llama.cpp's ``json_schema``, Ollama's ``format``):
    a tool call whose arguments are not valid JSON gets a second pass for them under the tool's schema,
    and a profile's ``output_schema`` answer is constrained; None: on for Ollama and llama.cpp servers
    (``openai`` provider), false: never."""
    schema_format: Literal["json_schema", "json_object"] | None = None
    """How an OpenAI-compatible server is asked for JSON that satisfies a schema: ``json_schema``
    (OpenAI, llama.cpp's ``llama-server``, vLLM) or ``json_object`` with a ``schema``
    (llama-cpp-python's server, which refuses ``json_schema``); None: ``json_schema``."""


class WorkspaceSettings(BaseModel):
    """``settings``: what the session in this workspace uses."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    model: str = "offline"
    """``provider:model`` used for answers; ``offline`` answers with the retrieved passages."""
    approval_mode: ApprovalMode | None = None
    """How tool calls are approved (guide, commander, strict); unset: the profile's, else the policy
    file's (``services.session.inforce``)."""
    active_index: str | None = None
    """The retrieval index in use (a name under ``indexes/``), or none."""
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    """Retrieval options (``min_score``)."""
    cloud: BridgeConfig = Field(default_factory=BridgeConfig)
    """The cloud bridge (``mode: off | ask | auto``, endpoint, model, key variable); off by default."""
    models: dict[str, ModelSettings] = Field(default_factory=dict)
    """Per-model settings (``context_window``, ``max_tokens``, ``text_tool_calls``), by ``provider:model``
    or model name."""

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty (use offline for no model)")
        return value

    @field_validator("active_index")
    @classmethod
    def _index_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate_name(value, "index")
        except InvalidName as exc:
            raise ValueError(exc.message) from None


class WorkspaceConfig(BaseModel):
    """The whole of ``workspace.yaml``."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    format_version: int = 1
    """Layout version of the workspace folder."""
    name: str | None = None
    """The workspace's name (informative; the folder name is what counts)."""
    created_at: str | None = None
    """When the workspace was created (ISO 8601, UTC)."""
    profile: str = "default"
    """The prompt profile in use (``profiles/<name>.yaml``)."""
    settings: WorkspaceSettings = Field(default_factory=WorkspaceSettings)

    @field_validator("created_at", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> Any:
        if isinstance(value, datetime | date):  # an unquoted YAML timestamp
            return value.isoformat()
        return value

    @field_validator("profile", mode="before")
    @classmethod
    def _profile(cls, value: Any) -> Any:
        if value is None:
            return "default"
        if isinstance(value, str):
            try:
                return validate_name(value, "profile")
            except InvalidName as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("settings", mode="before")
    @classmethod
    def _settings(cls, value: Any) -> Any:
        return {} if value is None else value


def _reason(error: dict[str, Any]) -> str:
    kind = str(error.get("type", ""))
    if kind in ("literal_error", "enum"):
        cloud = error.get("loc", ())[:2] == ("settings", "cloud")
        return "must be one of " + ", ".join(CLOUD_MODES if cloud else MODE_NAMES)
    if kind == "extra_forbidden":
        return "unknown setting"
    if kind in ("string_type",):
        return "must be text"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_type", "float_parsing"):
        return "must be a number"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a mapping of keys to values"
    if kind in ("greater_than_equal", "less_than_equal"):
        return str(error.get("msg", "out of range")).replace("Input should be", "must be")
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def _line(data: Any, loc: tuple[Any, ...]) -> int | None:
    """The line of the deepest key of ``loc`` found in the ruamel tree."""
    node, line = data, None
    for key in loc:
        if not hasattr(node, "get") or not isinstance(key, str):
            break
        found = line_of(node, key)
        line = found or line
        node = node.get(key)
    return line


def validate_config(data: Any, path: Path) -> WorkspaceConfig:
    """``data`` (the parsed file) as a :class:`WorkspaceConfig`, or a ConfigError with file:line."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of keys to values at the top level", path=str(path), line=1)
    try:
        return WorkspaceConfig.model_validate(dict(data))
    except ValidationError as exc:
        error = dict(exc.errors()[0])
        loc: tuple[Any, ...] = tuple(exc.errors()[0].get("loc", ()))
        line = _line(data, loc)
        keys = [str(k) for k in loc]
        field = ".".join(keys[1:] if keys[:1] == ["settings"] and len(keys) > 1 else keys) or "workspace"
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: {field}: {_reason(error)}", path=str(path), line=line, field=field) from None
