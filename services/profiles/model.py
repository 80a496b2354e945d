"""The profile document: a pydantic model with ``extra="forbid"`` (an unknown field is an error).

A profile is a behaviour contract: which system prompt the model gets, which tools it may use (and
under which policy file or approval mode), how retrieval is done, which model answers by default,
and optionally the JSON Schema every answer must satisfy. Loading (file, line and field in every
error) is in :mod:`services.profiles.loader`; this module imports pydantic and is only loaded when a
profile is actually read (never before the TUI's first frame).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.approval_mode import ApprovalMode
from services.workspace.bridge_config import BridgeConfig


class ToolsSpec(BaseModel):
    """The tools a profile enables and the policy it binds."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enable: list[str] | None = None
    """Tool classes (``fs``), tool ids (``builtin:fs:read_text``) or glob patterns of ids
    (``builtin:fs:read_*``) the profile enables; omitted or null: every tool the policy enables.
    A call to any other tool is refused by the gateway, naming the profile."""
    policy: str | None = None
    """A policy file this profile binds (relative to the profile file); null: the workspace's."""
    mode: ApprovalMode | None = None
    """The approval mode under this profile (below the operator's choice and the workspace's
    ``approval_mode``, above the policy file's: ``services.session.inforce``); null: the policy file's."""


class RetrievalSpec(BaseModel):
    """How the turn loop retrieves under this profile."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    index: str | None = None
    """The index to query; null: the workspace's index in use."""
    k: int = Field(default=5, ge=1, le=50)
    """How many chunks to retrieve (before the relevance threshold)."""
    threshold: float | None = Field(default=None, ge=-1.0, le=1.0)
    """The minimum dense similarity a chunk needs to be injected; null: the workspace's setting
    (``AXIOMME_MIN_SCORE`` in the environment wins over both)."""


class ModelSpec(BaseModel):
    """The model a profile prefers and its options."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    default: str | None = None
    """``provider:model`` used when neither ``ARIES_MODEL`` nor the workspace's ``model`` setting
    names one (e.g. ``ollama:llama3.2``)."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Sampling temperature; null: the server's default."""

    @field_validator("default")
    @classmethod
    def _spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.strip() != "offline" and ":" not in value:
            raise ValueError("must be provider:model (e.g. ollama:llama3.2) or offline")
        return value.strip()


class Profile(BaseModel):
    """One profile file."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str
    """The profile's name; it must match the file name (``NAME.yaml``)."""
    description: str = ""
    """One line shown by ``/profile list``."""
    system_prompt: str | None = None
    """The system prompt; null (and no ``system_prompt_file``): Aries' built-in prompt."""
    system_prompt_file: str | None = None
    """A file holding the system prompt, relative to the profile file."""
    tools: ToolsSpec = Field(default_factory=ToolsSpec)
    retrieval: RetrievalSpec = Field(default_factory=RetrievalSpec)
    model: ModelSpec = Field(default_factory=ModelSpec)
    output_schema: dict[str, Any] | None = None
    """A JSON Schema every answer must satisfy; the model is asked for JSON."""
    cloud: BridgeConfig | None = None
    """The cloud bridge for this profile (``mode: off|ask|auto``, endpoint, model, key variable…);
    null: the workspace's ``settings.cloud`` (off by default)."""

    @model_validator(mode="after")
    def _one_prompt(self) -> Profile:
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise ValueError("give system_prompt or system_prompt_file, not both")
        return self


__all__ = ["ApprovalMode", "ModelSpec", "Profile", "RetrievalSpec", "ToolsSpec"]
