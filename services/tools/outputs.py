"""The output of every builtin tool, as pydantic models.

These models are the single description of what a tool returns (the ``data`` of its result): their
JSON Schema (made self-contained by :func:`services.tools.schemas.output_schema_of`) is the tool's
published ``output_schema``, and the renderers of a recorded call parse the recorded ``data`` into
the model of its tool (:func:`parse_output`) instead of reading it key by key.

The tools build their outputs through these models (``ToolOutput.of(model)``): the fields in the
model's order, the values as given, so what a tool returns and what the audit store and the transcript
record is byte for byte what it was before the models existed (``tests/test_replay_outputs.py``
replays a run recorded before them). Two are still plain dicts checked against the schema in the
tests: ``shell:poll`` and ``shell:kill`` (the process manager's reports, whose numbers may be integers
where the model says ``float``: a model would write ``30`` as ``30.0``), and the context tools (the
context backend's answer). A recorded output that does not fit its model (an older version's, a
transcript entry cut for size) parses to ``None``: its reader shows the raw JSON.

Conventions, shared through :class:`ToolOutputModel`: unknown fields are refused (the published
schemas say ``additionalProperties: false``), the models are frozen, and a field that may be ``null``
says so in the schema as ``{"type": [..., "null"]}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

M = TypeVar("M", bound=BaseModel)

# -- shared field types ---------------------------------------------------------------------------
Size = Annotated[int, Field(ge=0)]
"""A count or a size in bytes."""
LineNo = Annotated[int, Field(ge=1)]
Duration = Annotated[float, Field(ge=0)]
"""Seconds."""
ExitCode = Annotated[int | None, WithJsonSchema({"type": ["integer", "null"]})]
"""A process's exit code; ``null`` while it runs (or when it could not be read)."""
OptionalStr = Annotated[str | None, WithJsonSchema({"type": ["string", "null"]})]
JsonObject = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]


class ToolOutputModel(BaseModel):
    """Base of every tool's output model."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# -- fs -------------------------------------------------------------------------------------------
class FsEntry(ToolOutputModel):
    """One entry of a directory listing."""

    path: str
    name: str
    type: Annotated[
        Literal["file", "dir", "symlink", "other"], WithJsonSchema({"enum": ["file", "dir", "symlink", "other"]})
    ]
    size: Size


class FsListDirOutput(ToolOutputModel):
    """Output of ``builtin:fs:list_dir``."""

    path: str
    root: str
    entries: list[FsEntry]
    count: Size
    hidden_by_policy: Size


class FsReadTextOutput(ToolOutputModel):
    """Output of ``builtin:fs:read_text``."""

    path: str
    text: str
    encoding: str
    size: Size
    offset: Size


class FsWriteTextOutput(ToolOutputModel):
    """Output of ``builtin:fs:write_text``."""

    path: str
    bytes_written: Size
    created: bool
    sha256: str


class FsMatch(ToolOutputModel):
    """One match of ``builtin:fs:search_text``, with its context lines."""

    path: str
    line: LineNo
    column: LineNo
    text: str
    before: list[str]
    after: list[str]


class FsSearchTextOutput(ToolOutputModel):
    """Output of ``builtin:fs:search_text``."""

    path: str
    matches: list[FsMatch]
    files_scanned: Size
    files_skipped: Size


class FsPatchedFile(ToolOutputModel):
    """One file a patch changes."""

    path: str
    action: Annotated[Literal["modify", "create", "delete"], WithJsonSchema({"enum": ["modify", "create", "delete"]})]
    hunks: Size
    added: Size
    removed: Size


class FsApplyPatchOutput(ToolOutputModel):
    """Output of ``builtin:fs:apply_patch`` (``applied`` is false for a dry run)."""

    files: list[FsPatchedFile]
    applied: bool


class FsRestoredFile(ToolOutputModel):
    """One file ``builtin:fs:restore`` put back."""

    path: str
    action: str
    existed: bool


class FsRestoreOutput(ToolOutputModel):
    """Output of ``builtin:fs:restore``: the call undone and the files put back."""

    call_id: str
    files: list[FsRestoredFile]


class FsAddArtifactOutput(ToolOutputModel):
    """Output of ``builtin:fs:add_artifact``: the artifact's record and whether it is new."""

    artifact: JsonObject
    created: bool


# -- shell ----------------------------------------------------------------------------------------
class ShellStartOutput(ToolOutputModel):
    """Output of ``builtin:shell:start``."""

    process_id: str
    pid: Size
    argv: list[str]
    cwd: str
    started_at: str


class ShellPollOutput(ToolOutputModel):
    """Output of ``builtin:shell:poll``."""

    process_id: str
    running: bool
    exit_code: ExitCode
    stdout_tail: str
    stderr_tail: str
    stdout_bytes: Size
    stderr_bytes: Size
    seconds_since_output: Duration
    stalled: bool
    stall_after_s: Duration
    runtime_s: Duration


class ShellKillOutput(ToolOutputModel):
    """Output of ``builtin:shell:kill``: which processes of the group ended, and how."""

    process_id: str
    exit_code: ExitCode
    terminated: list[Size]
    forced: list[Size]
    survivors: list[Size]


class ShellRunOutput(ToolOutputModel):
    """Output of ``builtin:shell:run``."""

    exit_code: ExitCode
    stdout: str
    stderr: str
    stdout_bytes: Size
    stderr_bytes: Size
    process_id: str
    cleaned_up: list[Size]


# -- web ------------------------------------------------------------------------------------------
class WebSearchResult(ToolOutputModel):
    """One result of ``builtin:web:search``."""

    title: str
    url: str
    snippet: str
    engine: str


class WebSearchOutput(ToolOutputModel):
    """Output of ``builtin:web:search``."""

    query: str
    endpoint: str
    results: list[WebSearchResult]
    artifact_id: str
    citation: str


class WebRedirect(ToolOutputModel):
    """One redirect ``builtin:web:fetch`` followed."""

    status: Size
    url: str


class WebFetchOutput(ToolOutputModel):
    """Output of ``builtin:web:fetch``."""

    url: str
    final_url: str
    status: Size
    content_type: str
    bytes: Size
    truncated: bool
    redirects: list[WebRedirect]
    artifact_id: str
    citation: str
    preview: str


class WebExtractOutput(ToolOutputModel):
    """Output of ``builtin:web:extract``."""

    artifact_id: str
    citation: str
    title: str
    text: str
    chars: Size
    truncated: bool
    source_url: OptionalStr


# -- context --------------------------------------------------------------------------------------
class ContextHit(ToolOutputModel):
    """One hit of ``builtin:context:find`` or ``builtin:context:search``."""

    uri: str
    score: float
    level: Annotated[Literal["L0", "L1", "L2"], WithJsonSchema({"enum": ["L0", "L1", "L2"]})]
    snippet: str
    handle: str


class ContextOutput(ToolOutputModel):
    """Output of ``builtin:context:find`` and ``builtin:context:search``."""

    kind: Annotated[Literal["find", "search"], WithJsonSchema({"enum": ["find", "search"]})]
    query: str
    target_uri: OptionalStr
    hits: list[ContextHit]
    trace_id: str
    stop_reason: str
    budget_used: JsonObject


OUTPUT_MODELS: dict[str, type[ToolOutputModel]] = {
    "builtin:fs:list_dir": FsListDirOutput,
    "builtin:fs:read_text": FsReadTextOutput,
    "builtin:fs:write_text": FsWriteTextOutput,
    "builtin:fs:search_text": FsSearchTextOutput,
    "builtin:fs:apply_patch": FsApplyPatchOutput,
    "builtin:fs:restore": FsRestoreOutput,
    "builtin:fs:add_artifact": FsAddArtifactOutput,
    "builtin:shell:start": ShellStartOutput,
    "builtin:shell:poll": ShellPollOutput,
    "builtin:shell:kill": ShellKillOutput,
    "builtin:shell:run": ShellRunOutput,
    "builtin:web:search": WebSearchOutput,
    "builtin:web:fetch": WebFetchOutput,
    "builtin:web:extract": WebExtractOutput,
    "builtin:context:find": ContextOutput,
    "builtin:context:search": ContextOutput,
}
"""The output model of every builtin tool, by tool id."""


def parse_output(model: type[M], data: Any) -> M | None:
    """``data`` (a recorded output) as ``model``; ``None`` when it does not fit (an older version's
    output, an entry cut for size): the caller shows the raw JSON instead."""
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def output_of(tool_id: str, data: Any) -> ToolOutputModel | None:
    """A recorded output of ``tool_id`` as its model; ``None`` for a tool without one (an MCP tool) or
    an output that does not fit."""
    model = OUTPUT_MODELS.get(tool_id)
    return None if model is None else parse_output(model, data)


__all__ = [
    "OUTPUT_MODELS",
    "ContextHit",
    "ContextOutput",
    "FsAddArtifactOutput",
    "FsApplyPatchOutput",
    "FsEntry",
    "FsListDirOutput",
    "FsMatch",
    "FsPatchedFile",
    "FsReadTextOutput",
    "FsRestoreOutput",
    "FsRestoredFile",
    "FsSearchTextOutput",
    "FsWriteTextOutput",
    "ShellKillOutput",
    "ShellPollOutput",
    "ShellRunOutput",
    "ShellStartOutput",
    "ToolOutputModel",
    "WebExtractOutput",
    "WebFetchOutput",
    "WebRedirect",
    "WebSearchOutput",
    "WebSearchResult",
    "output_of",
    "parse_output",
]
