"""``builtin:context:find`` and ``builtin:context:search``: the assistant reads the ``axiom://`` tree.

Both are READ_ONLY calls of the tool class ``context``: they look things up in the workspace's
context index and change nothing but the record of the call (a retrieval trace and a request-log
row). The policy, the profile and the approval step decide them like any fs read.

Only the *specs* live here (id, class, tier, schemas). The work is done by the session's context
backend, which the gateway hands to the call in ``ToolContext.backends["context"]``: it lives in
:mod:`services.context.tools` and needs the retrieval engine, and ``services.tools`` must never
import ``services.retrieval`` (import-linter: "Retrieval and tools are independent"). A gateway
built without one (the doctor's probe, a bare ``ToolGateway``) answers with a typed
``InvalidInput`` saying so, and nothing runs.

The backend protocol (:class:`ContextBackend`): ``find(args, *, deadline_ms)`` and ``search(args, *,
deadline_ms)`` take the validated argument models and return the output object (hits and trace id).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from services.errors import InvalidInput
from services.policy import RiskTier
from services.tools.args import ContextFindArgs, ContextSearchArgs
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolOutput
from services.tools.schemas import CONTEXT_OUT

TOOLS: list[ToolSpec] = []
BACKEND = "context"
"""The key of the context backend in ``ToolContext.backends``."""


class ContextBackend(Protocol):
    """What the session gives the gateway for the context tools (see :mod:`services.context.tools`)."""

    def find(self, args: ContextFindArgs, *, deadline_ms: float | None) -> dict[str, Any]: ...

    def search(self, args: ContextSearchArgs, *, deadline_ms: float | None) -> dict[str, Any]: ...


def _backend(ctx: ToolContext) -> ContextBackend:
    backend: ContextBackend | None = ctx.backends.get(BACKEND)
    if backend is None:
        raise InvalidInput(
            f"{ctx.tool_id} needs the workspace's context service, and this tool runtime has none",
            rule="context.unavailable",
        )
    return backend


def _deadline_ms(ctx: ToolContext) -> float | None:
    if ctx.deadline is None:
        return None
    return max(1.0, (ctx.deadline - time.monotonic()) * 1000.0)


@tool(
    "builtin:context:find",
    tier=RiskTier.READ_ONLY,
    description="Look up the workspace's axiom:// context tree (resources, memories, sessions): the best "
    "matching files, flat and ranked, with their URI, score (higher is better), tier level and a snippet, and the id "
    "of the retrieval trace. Read-only.",
    args=ContextFindArgs,
    output_schema=CONTEXT_OUT,
    registry=TOOLS,
)
def context_find(ctx: ToolContext, args: ContextFindArgs) -> ToolOutput:
    data = _backend(ctx).find(args, deadline_ms=_deadline_ms(ctx))
    return ToolOutput(data, {"trace_id": data["trace_id"], "hits": len(data["hits"])})


@tool(
    "builtin:context:search",
    tier=RiskTier.READ_ONLY,
    description="Search the workspace's axiom:// context tree directory by directory, from the best "
    "folder abstracts down (optionally expanded by a context session's recent messages): ranked hits "
    "with URI, score (higher is better), tier level and snippet, and the id of the retrieval trace. Read-only.",
    args=ContextSearchArgs,
    output_schema=CONTEXT_OUT,
    registry=TOOLS,
)
def context_search(ctx: ToolContext, args: ContextSearchArgs) -> ToolOutput:
    data = _backend(ctx).search(args, deadline_ms=_deadline_ms(ctx))
    return ToolOutput(data, {"trace_id": data["trace_id"], "hits": len(data["hits"])})


__all__ = ["BACKEND", "CONTEXT_OUT", "TOOLS", "ContextBackend", "context_find", "context_search"]
