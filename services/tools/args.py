"""The arguments of every builtin tool, as pydantic models.

These models are the single description of what a tool accepts: their JSON Schema (made
self-contained by :func:`services.tools.schemas.schema_of`) is what the registry publishes, what the
gateway validates a call against, and what a model is offered as the tool's ``parameters``.

Conventions, shared by every model through :class:`ToolArgs`:

- unknown fields are refused (``extra="forbid"`` → ``additionalProperties: false``);
- an optional field is *omitted* to get its default, never sent as ``null``: a fixed default is the
  field's own (and the schema's ``default``); a field whose default comes from the policy's limits,
  or that means "none" when omitted, is typed ``T | MISSING``, so the schema lists only ``T`` and a
  ``null`` is refused — the tool reads it with :func:`given` or :func:`capped`;
- types are strict (no ``"5"`` for 5, no ``true`` for 1), like JSON Schema;
- each field's docstring becomes its ``description``; defaults that come from the policy's limits
  are named there rather than fixed in the schema.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import MISSING, BaseModel, ConfigDict, Field, model_validator

T = TypeVar("T")
D = TypeVar("D")


def given(value: T | MISSING, default: D) -> T | D:
    """``value``, or ``default`` when the call left the field out."""
    return default if value is MISSING else value


def capped(value: int | MISSING, limit: int) -> int:
    """A count the call may ask for, at most ``limit`` (the policy's); ``limit`` when left out."""
    return limit if value is MISSING else max(1, min(value, limit))


# -- shared field types ---------------------------------------------------------------------------
PathStr = Annotated[str, Field(min_length=1, max_length=8192)]
"""A path, relative to the workspace root unless absolute."""
Count = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]
ProcessId = Annotated[str, Field(min_length=1, max_length=64)]
Argv = Annotated[list[Annotated[str, Field(max_length=131072)]], Field(min_length=1, max_length=4096)]
Env = Annotated[dict[str, str], Field(max_length=256)]


class ToolArgs(BaseModel):
    """Base of every tool's argument model."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, allow_inf_nan=False, use_attribute_docstrings=True
    )


# -- fs -------------------------------------------------------------------------------------------
class FsListDirArgs(ToolArgs):
    """Arguments of ``builtin:fs:list_dir``."""

    path: PathStr = "."
    """Directory to list (default: the workspace root)."""
    recursive: bool = False
    """List the whole tree below ``path``."""
    max_entries: Count | MISSING = MISSING
    """Stop after this many entries (default and upper bound: the policy's list limit)."""
    include_hidden: bool = True
    """Include names starting with a dot."""


class FsReadTextArgs(ToolArgs):
    """Arguments of ``builtin:fs:read_text``."""

    path: PathStr
    """File to read."""
    max_bytes: Count | MISSING = MISSING
    """Read at most this many bytes (default and upper bound: the policy's read limit)."""
    offset: NonNegInt = 0
    """Byte offset to start reading at."""
    encoding: Literal["utf-8", "latin-1", "ascii"] = "utf-8"
    """Text encoding of the file."""


class FsWriteTextArgs(ToolArgs):
    """Arguments of ``builtin:fs:write_text``."""

    path: PathStr
    """File to write."""
    text: Annotated[str, Field(max_length=64 << 20)]
    """The whole new content of the file."""
    if_exists: Literal["overwrite", "error"] = "overwrite"
    """``overwrite`` replaces an existing file; ``error`` only creates a new one."""
    create_dirs: bool = False
    """Create missing parent directories."""


class FsSearchTextArgs(ToolArgs):
    """Arguments of ``builtin:fs:search_text``."""

    path: PathStr = "."
    """Directory (searched recursively) or file to search (default: the workspace root)."""
    query: Annotated[str, Field(min_length=1, max_length=1000)]
    """Text to find, or a Python regular expression with ``regex``."""
    regex: bool = False
    """Treat ``query`` as a regular expression."""
    case_sensitive: bool = True
    """Match case exactly."""
    glob: Annotated[str, Field(min_length=1, max_length=200)] | MISSING = MISSING
    """Only search files whose name matches this glob, e.g. ``*.py``."""
    max_matches: Count | MISSING = MISSING
    """Stop after this many matches (default and upper bound: the policy's match limit)."""
    context_lines: NonNegInt = 0
    """Lines of context before and after each match (capped by the policy)."""


class FsApplyPatchArgs(ToolArgs):
    """Arguments of ``builtin:fs:apply_patch``: exactly one of ``patch`` and ``patch_file``."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["patch"]}, {"required": ["patch_file"]}]})

    patch: Annotated[str, Field(min_length=1)] | MISSING = MISSING
    """A unified diff (``diff -u`` / ``git diff`` format)."""
    patch_file: Annotated[str, Field(min_length=1, max_length=4096)] | MISSING = MISSING
    """A file holding the diff, resolved like every fs path (relative: against the workspace); instead of
    ``patch``."""

    @model_validator(mode="after")
    def _one_source(self) -> FsApplyPatchArgs:
        if (self.patch is MISSING) == (self.patch_file is MISSING):
            raise ValueError("give exactly one of patch and patch_file")
        return self

    base: PathStr | MISSING = MISSING
    """Directory the patch's paths are relative to (default: the workspace root)."""
    strip: Annotated[int, Field(ge=0, le=16)] | MISSING = MISSING
    """Leading path components to strip from the patch's paths, like ``patch -p``
    (default: 1 when every path starts with ``a/`` or ``b/``, else 0)."""
    dry_run: bool = False
    """Check that every hunk applies without writing anything."""


# -- shell ----------------------------------------------------------------------------------------
class ShellStartArgs(ToolArgs):
    """Arguments of ``builtin:shell:start``."""

    argv: Argv
    """The program and its arguments, run directly (no shell)."""
    cwd: PathStr | MISSING = MISSING
    """Working directory (default: the workspace root)."""
    env: Env | MISSING = MISSING
    """Extra environment variables for the command (names the policy allows)."""
    stall_after_s: Seconds | MISSING = MISSING
    """Report the process as stalled after this many seconds without output (default: the policy's)."""


class ShellPollArgs(ToolArgs):
    """Arguments of ``builtin:shell:poll``."""

    process_id: ProcessId
    """The ``process_id`` returned by ``builtin:shell:start``."""
    wait_s: Annotated[float, Field(ge=0, le=60)] = 0.0
    """Wait up to this many seconds for the process to end before answering."""
    tail_bytes: Count | MISSING = MISSING
    """Bytes of stdout/stderr to return from the end of each stream (default: all that is kept)."""


class ShellKillArgs(ToolArgs):
    """Arguments of ``builtin:shell:kill``."""

    process_id: ProcessId
    """The ``process_id`` returned by ``builtin:shell:start``."""
    grace_s: Annotated[float, Field(ge=0, le=60)] | MISSING = MISSING
    """Seconds between SIGTERM and SIGKILL (default: the policy's)."""


class ShellRunArgs(ToolArgs):
    """Arguments of ``builtin:shell:run``."""

    argv: Argv
    """The program and its arguments, run directly (no shell)."""
    cwd: PathStr | MISSING = MISSING
    """Working directory (default: the workspace root)."""
    env: Env | MISSING = MISSING
    """Extra environment variables for the command (names the policy allows)."""
    timeout_s: Annotated[float, Field(gt=0)] | MISSING = MISSING
    """End the command's whole process tree after this many seconds (default: the policy's)."""


# -- web ------------------------------------------------------------------------------------------
class WebSearchArgs(ToolArgs):
    """Arguments of ``builtin:web:search``."""

    query: Annotated[str, Field(min_length=1, max_length=500)]
    """The search terms."""
    max_results: Count | MISSING = MISSING
    """Return at most this many results (default and upper bound: the policy's)."""
    categories: Annotated[str, Field(max_length=100)] | MISSING = MISSING
    """SearXNG categories, comma-separated (e.g. ``general,science``)."""
    language: Annotated[str, Field(max_length=20)] | MISSING = MISSING
    """Result language code (e.g. ``en``)."""
    page: Count | MISSING = MISSING
    """Result page, from 1 (default: 1)."""


class WebFetchArgs(ToolArgs):
    """Arguments of ``builtin:web:fetch``."""

    url: Annotated[str, Field(min_length=1, max_length=8192)]
    """The ``http`` or ``https`` URL to fetch."""
    max_bytes: Count | MISSING = MISSING
    """Keep at most this many bytes of the body (default and upper bound: the policy's)."""


class WebExtractArgs(ToolArgs):
    """Arguments of ``builtin:web:extract``."""

    artifact_id: Annotated[str, Field(min_length=1, max_length=80)]
    """Id (or content hash) of a stored artifact, such as a fetched page; never a URL."""
    max_chars: Count | MISSING = MISSING
    """Return at most this many characters of text (default: the policy's read limit)."""


class FsAddArtifactArgs(ToolArgs):
    """Arguments of ``builtin:fs:add_artifact``."""

    path: PathStr
    """The file to add (relative paths resolve against the workspace)."""
    name: Annotated[str, Field(min_length=1, max_length=255)] | MISSING = MISSING
    """The name to list it under (default: the file's name)."""
    description: Annotated[str, Field(max_length=2000)] | MISSING = MISSING
    """What it is, for the artifact browser."""


class FsRestoreArgs(ToolArgs):
    """Arguments of ``builtin:fs:restore``."""

    call_id: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
    """The write or patch call to undo (its id in the audit store)."""
    paths: Annotated[list[PathStr], Field(min_length=1, max_length=1024)]
    """Every file that call changed (what ``/undo`` and ``aries tool undo`` fill in); checked by the
    policy like any write."""


# -- context (the workspace's axiom:// context filesystem; read-only) -----------------------------
ContextUri = Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^axiom://")]
"""An ``axiom://`` URI (``axiom://resources/docs``)."""


class ContextFilterArgs(ToolArgs):
    """Which files may be hits."""

    scope: Literal["resources", "user", "agent", "session"] | MISSING = MISSING
    """Only this scope."""
    prefix: ContextUri | MISSING = MISSING
    """Only files at or below this URI."""
    file_types: Annotated[list[Annotated[str, Field(min_length=1, max_length=16)]], Field(max_length=32)] | MISSING = (
        MISSING
    )
    """Only files with these suffixes (``md``, ``txt``; no dot)."""
    levels: Annotated[list[Literal["L0", "L1", "L2"]], Field(max_length=3)] | MISSING = MISSING
    """Only these tiers: L0 abstracts, L1 overviews, L2 original files."""


class ContextBudgetArgs(ToolArgs):
    """Per-request limits; the stop reason says which one ended the walk."""

    max_ms: Annotated[float, Field(gt=0, le=60000)] | MISSING = MISSING
    """Wall time in milliseconds (also capped by the call's own deadline)."""
    max_nodes: Annotated[int, Field(ge=1, le=100000)] | MISSING = MISSING
    """Most directories visited (search) or files examined (find)."""
    max_depth: Annotated[int, Field(ge=0, le=256)] | MISSING = MISSING
    """Most folder levels below a start point (search) or the target (find)."""


class ContextFindArgs(ToolArgs):
    """Arguments of ``builtin:context:find``."""

    query: Annotated[str, Field(min_length=1, max_length=2000)]
    """What to look for."""
    target_uri: ContextUri | MISSING = MISSING
    """Only below this ``axiom://`` folder or file (default: every scope)."""
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    """Most hits."""
    score_threshold: Annotated[float, Field(ge=0, le=1)] | MISSING = MISSING
    """Drop hits scoring below this (scores are 0..1; 1 is a perfect match)."""
    filter: ContextFilterArgs | MISSING = MISSING
    """Scope, URI prefix, file types and tiers the hits must match."""
    budget: ContextBudgetArgs | MISSING = MISSING
    """Time, node and depth limits of this request."""


class ContextSearchArgs(ContextFindArgs):
    """Arguments of ``builtin:context:search``."""

    session: Annotated[str, Field(min_length=1, max_length=128)] | MISSING = MISSING
    """A context session id: its recent messages expand the query."""


ARGS_MODELS: dict[str, type[ToolArgs]] = {
    "builtin:fs:add_artifact": FsAddArtifactArgs,
    "builtin:fs:list_dir": FsListDirArgs,
    "builtin:fs:read_text": FsReadTextArgs,
    "builtin:fs:write_text": FsWriteTextArgs,
    "builtin:fs:search_text": FsSearchTextArgs,
    "builtin:fs:apply_patch": FsApplyPatchArgs,
    "builtin:fs:restore": FsRestoreArgs,
    "builtin:shell:start": ShellStartArgs,
    "builtin:shell:poll": ShellPollArgs,
    "builtin:shell:kill": ShellKillArgs,
    "builtin:shell:run": ShellRunArgs,
    "builtin:web:search": WebSearchArgs,
    "builtin:web:fetch": WebFetchArgs,
    "builtin:web:extract": WebExtractArgs,
    "builtin:context:find": ContextFindArgs,
    "builtin:context:search": ContextSearchArgs,
}
"""Each builtin tool id → its argument model."""
