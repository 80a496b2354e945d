"""``builtin:fs:add_artifact``: a file into the workspace's artifact registry, as a governed call.

Adding an artifact reads a file, so it is a tool call like any other: the path goes through the
policy's path rules (allowed roots, deny globs, no links out, no special files — ``/proc/self/environ``
through a symlink is refused), the decision and result are audited, and the call is recorded in
the transcript. Relative paths resolve against the workspace root, as for every fs tool.
Identical content is stored once; adding it under a second name keeps both names.
"""

from __future__ import annotations

import os
from pathlib import Path

from services.errors import InvalidInput
from services.policy import RiskTier
from services.tools.args import FsAddArtifactArgs, given
from services.tools.fs import path_resources
from services.tools.fsio import open_for_read
from services.tools.outputs import FsAddArtifactOutput
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput
from services.tools.schemas import FS_ADD_ARTIFACT_OUT

TOOLS: list[ToolSpec] = []


@tool(
    "builtin:fs:add_artifact",
    tier=RiskTier.READ_ONLY,
    description="Add a file to the workspace's artifact registry (content-addressed; identical content is "
    "stored once and keeps every name it was added under).",
    args=FsAddArtifactArgs,
    output_schema=FS_ADD_ARTIFACT_OUT,
    registry=TOOLS,
    resources=path_resources("read"),
)
def add_artifact(ctx: ToolContext, args: FsAddArtifactArgs) -> ToolOutput:
    if ctx.workspace is None:
        raise InvalidInput("artifacts belong to a workspace; this call has none")
    target = ctx.guard.resolve(args.path, "read")
    name = given(args.name, Path(target.path).name)
    fd = open_for_read(ctx, target)
    with os.fdopen(fd, "rb") as handle:
        artifact, created = ctx.workspace.artifacts.add_stream(
            handle,
            name,
            description=given(args.description, None),
            provenance={"kind": "tool", "tool": "builtin:fs:add_artifact", "call_id": ctx.call_id},
        )
    added = FsAddArtifactOutput(artifact=artifact.to_dict(), created=created)
    return ToolOutput.of(added, {"normalized_path": str(target.path)})
