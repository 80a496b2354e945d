"""``doctor()``: a self-check of the governed tool runtime (for ``/doctor`` and ``aries tool doctor``).

Checks that the builtin tools are registered with valid schemas, that the policy loads and
binds, and that the gateway works end to end: a harmless READ_ONLY call in a temporary
workspace, recorded in its audit store with the decision and rule; and which OS sandbox shell
commands run in (``shell.sandbox``), or which fallback applies when there is none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.policy import Policy

BUILTIN_TOOL_IDS = (
    "builtin:context:find",
    "builtin:context:search",
    "builtin:fs:add_artifact",
    "builtin:fs:apply_patch",
    "builtin:fs:list_dir",
    "builtin:fs:read_text",
    "builtin:fs:search_text",
    "builtin:fs:write_text",
    "builtin:shell:kill",
    "builtin:shell:poll",
    "builtin:shell:run",
    "builtin:shell:start",
    "builtin:web:extract",
    "builtin:web:fetch",
    "builtin:web:search",
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.__dict__ for c in self.checks]}


def doctor(
    policy: Policy | None = None, *, source: str | None = None, policy_error: str | None = None, mode: str | None = None
) -> DoctorReport:
    """Check the tool runtime. ``policy`` is the policy in force (``source`` names its file);
    ``policy_error`` says why the policy in force did not load — then that check fails."""
    report = DoctorReport()
    try:
        from jsonschema import Draft202012Validator

        from services.tools.builtin import default_registry

        registry = default_registry()
        ids = tuple(spec.tool_id for spec in registry.list())
        missing = [t for t in BUILTIN_TOOL_IDS if t not in ids]
        for spec in registry.list():
            Draft202012Validator.check_schema(spec.input_schema)
            Draft202012Validator.check_schema(spec.output_schema)
        report.checks.append(
            Check(
                "tools registered",
                not missing,
                f"{len(ids)} tools" if not missing else f"missing: {', '.join(missing)}",
            )
        )
    except Exception as exc:
        report.checks.append(Check("tools registered", False, f"{type(exc).__name__}: {exc}"))
    if policy_error is not None:
        report.checks.append(Check("policy in force", False, f"{source or 'the policy'}: {policy_error}"))
        return report
    try:
        from services.policy import default_policy

        chosen = policy or default_policy()
        where = source or chosen.source
        report.checks.append(
            Check("policy in force", True, f"{where} ({chosen.hash[:19]}, approval mode {mode or chosen.mode})")
        )
    except Exception as exc:
        report.checks.append(Check("policy in force", False, f"{type(exc).__name__}: {exc}"))
        return report
    try:
        report.checks.append(_end_to_end(chosen))
    except Exception as exc:
        report.checks.append(Check("gateway end to end", False, f"{type(exc).__name__}: {exc}"))
    report.checks.append(_shell_sandbox(chosen))
    from services.tools.hooks import describe_hooks

    hooks = describe_hooks(chosen)
    if hooks is not None:
        report.checks.append(Check("hooks", *hooks))
    return report


def _shell_sandbox(policy: Policy) -> Check:
    """Which OS sandbox shell commands get under ``policy`` (``shell.sandbox``), or which
    fallback applies; fails when the policy requires a sandbox this machine cannot provide."""
    try:
        from services.tools.sandbox import describe_choice

        ok, detail = describe_choice(policy.sandbox)
    except Exception as exc:
        return Check("shell sandbox", False, f"{type(exc).__name__}: {exc}")
    return Check("shell sandbox", ok, detail)


def mcp_checks(policy: Policy, gateway: Callable[[], Any]) -> list[Check]:
    """One check per configured MCP server (started if needed), or one saying MCP is off.

    ``gateway`` returns the session's gateway; it is only asked for when MCP is enabled.
    """
    from services.policy.mcp import mcp_settings
    from services.text.textsafe import neutralize

    settings = mcp_settings(policy.data)
    if not settings.enabled:
        return [Check("mcp provider", True, "disabled (providers.mcp.enabled: false): no MCP server is started")]
    if not settings.servers:
        return [Check("mcp provider", True, "enabled, but no servers are configured (providers.mcp.servers)")]
    live = gateway()
    failed = live.registry.load_all()
    checks = []
    for server in live.mcp_status():
        problem = failed.get(f"mcp:{server['name']}")
        where = f"{server['transport']} {server['target']}"
        if problem is None:
            detail = f"{where}: {server['state']}, {server['tools']} tools, pid {server['pid']}"
        else:
            detail = f"{where}: {problem}"
        checks.append(Check(f"mcp server {server['name']}", problem is None, neutralize(detail, single_line=True)))
    return checks


def _end_to_end(policy: Policy) -> Check:
    from services.policy import parse_policy
    from services.tools.gateway import ToolGateway
    from services.workspace.manager import ephemeral_workspace

    workspace = ephemeral_workspace()
    try:
        (workspace.root / "doctor.txt").write_text("aries doctor\n", encoding="utf-8")
        # The operator's policy may not enable fs; the check uses a minimal READ_ONLY policy.
        probe = parse_policy(
            "version: 1\nmode: strict\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
            "filesystem: {allowed_roots: ['${workspace}']}\n",
            source="<doctor>",
        )
        with ToolGateway(workspace, policy=probe, source="doctor") as gateway:
            result = gateway.execute_sync("builtin:fs:list_dir", {"path": "."})
            names = [e["name"] for e in (result.data or {}).get("entries", [])]
            last = gateway.last_decision()
        ok = result.ok and "doctor.txt" in names and last is not None and last["rule_id"] == "mode.strict.read_only"
        detail = "list_dir ran, recorded with rule mode.strict.read_only" if ok else f"unexpected: {result.to_dict()}"
        return Check("gateway end to end", ok, detail)
    finally:
        workspace.close()
