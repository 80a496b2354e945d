"""``BoundPolicy``: a policy applied to one workspace (roots resolved) and its ``evaluate``.

``evaluate(tool, args)`` returns a ``PolicyDecision`` (``allow``, ``deny`` or ``confirm``)
that always names the rule that decided.  A shell command that can execute arbitrary code
(``facts["command"]["exec_capable"]``, see ``services.policy.commands``) is raised to
``EXEC_PRIVILEGED`` and needs approval in every mode (rule ``shell.exec_capable``): neither
``commander`` nor an ``auto_approve`` rule lets it through. Nor do they let through a call read from
the model's text (``from_text``): in commander mode it asks, like anything above read-only in guide.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from services.errors import ConfigError, InvalidInput
from services.policy.commands import check_env, classify
from services.policy.globs import AutoApproveRule, exec_name_matches
from services.policy.loader import Policy
from services.policy.model import (
    MODES,
    Action,
    CommandUse,
    PathUse,
    PolicyDecision,
    PolicyDenied,
    Resource,
    RiskTier,
    SearchEndpointUse,
    ToolDescriptor,
    UrlUse,
    jsonable,
)
from services.policy.model import deny as _deny
from services.policy.model import invalid as _invalid
from services.policy.network import IPAddress, domain_matches
from services.policy.paths import PathGuard, operator_store, path_candidates


def _subst(template: str, variables: dict[str, str | None]) -> str | None:
    missing = False

    def repl(match: re.Match[str]) -> str:
        nonlocal missing
        value = variables.get(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    out = re.sub(r"\$\{(\w+)\}", repl, template)
    return None if missing else os.path.expanduser(out)


class BoundPolicy:
    """A policy applied to one workspace: roots resolved, ready to evaluate calls."""

    def __init__(self, policy: Policy, workspace_root: Path | None, *, mode: str | None = None) -> None:
        """``policy`` applied to ``workspace_root`` (None: no workspace) in approval ``mode`` (None: the
        policy's own)."""
        mode = mode or policy.mode
        if mode not in MODES:
            raise ConfigError(f"approval mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.policy = policy
        self.mode = mode
        self.limits = policy.limits
        self.workspace_root = Path(os.path.realpath(workspace_root)) if workspace_root is not None else None
        self.warnings: list[str] = []
        variables = {
            "workspace": str(self.workspace_root) if self.workspace_root else None,
            "home": os.path.expanduser("~"),
            "cwd": os.getcwd(),
        }
        roots: list[Path] = []
        for template in policy.allowed_roots:
            value = _subst(template, variables)
            if value is None:
                self.warnings.append(f"allowed root {template!r} skipped: no value for its variable")
                continue
            real = Path(os.path.realpath(value))
            if not real.is_dir():
                self.warnings.append(f"allowed root {template!r} ({real}) is not an existing directory; skipped")
                continue
            if real not in roots:
                roots.append(real)
        self.roots = roots
        # ``shell.visible_paths`` with their variables substituted (for a hidden outside_root).
        self.sandbox_visible: list[str] = []
        for template in policy.sandbox.visible:
            value = _subst(template, variables)
            if value is not None:
                self.sandbox_visible.append(os.path.normpath(value))
        self.guard = PathGuard(policy, roots, self.workspace_root)

    # -- web ------------------------------------------------------------------------------
    def check_url(self, url: Any, *, arg: str = "url") -> dict[str, Any]:
        """Scheme, host and port of one URL (the web tool calls it for every redirect hop)."""
        return self.policy.network.check_url(url, arg=arg)

    def check_host(self, host: str, *, url: str = "", port: int | None = None) -> None:
        self.policy.network.check_host(host, url=url, port=port)

    def check_address(self, ip: IPAddress | str, *, host: str = "", url: str = "", port: int | None = None) -> None:
        """An address a host name resolved to (DNS-rebinding safe); see ``NetworkRules``."""
        self.policy.network.check_address(ip, host=host, url=url, port=port)

    # -- shell ----------------------------------------------------------------------------
    def resolve_executable(self, name: str) -> str | None:
        search = os.pathsep.join(self.policy.search_path) if self.policy.search_path else os.environ.get("PATH")
        found = shutil.which(name, path=search)
        return os.path.realpath(found) if found else None

    def check_command(self, use: CommandUse) -> dict[str, Any]:
        """The facts of one shell command: the allowlist rule, the working directory, the environment,
        the path arguments (each checked as a read) and whether it can run arbitrary code."""
        policy = self.policy
        argv = use.argv
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) for a in argv)
            or sum(len(a) for a in argv) > 256_000
        ):
            raise _invalid("shell.argv", "argv must be a non-empty list of strings (at most 256,000 characters)")
        if any("\x00" in a for a in argv):
            raise _invalid("shell.argv", "argv contains a NUL character")
        name = argv[0]
        rule_id = self._allowed_rule(name)
        privileged = exec_name_matches(name, policy.privileged)
        cwd = self.guard.resolve(
            use.cwd if use.cwd is not None else str(self.roots[0]) if self.roots else ".", "list", arg="cwd"
        )
        if cwd.kind != "dir":
            raise _invalid("shell.cwd", f"cwd {cwd.raw!r} is not a directory")
        check_env(use.env, policy.env_allow)
        checked: list[str] = []
        if policy.check_path_arguments:
            for arg in argv[1:]:
                for candidate in path_candidates(arg, cwd.path):
                    try:
                        named = self.guard.resolve(candidate, "read", arg="argument", base=cwd.path)
                        if operator_store(str(named.path)):  # lasting grants: never an argument of a command
                            raise _deny("fs.operator_store", "it is the operator's settings store (lasting grants)")
                    except (PolicyDenied, InvalidInput) as exc:
                        inner = exc.details.get("rule", "fs.path_syntax")
                        raise _deny(
                            "shell.path_argument",
                            f"argument {arg!r} names a path the policy refuses: {exc.message}",
                            argument=arg,
                            path_rule=inner,
                        ) from None
                    checked.append(candidate)

        def inner_allowed(inner: str) -> str | None:
            self._allowed_rule(inner, wrapped=True)
            return self.resolve_executable(inner)

        executable = self.resolve_executable(name)
        verdict = classify(argv, resolved=executable, inert=policy.inert_programs, inner_allowed=inner_allowed)
        exec_capable = verdict.exec_capable or privileged
        return {
            "executable_name": name,
            "executable": executable,
            "cwd": str(cwd.path),
            "cwd_rel": cwd.rel,
            "exec_rule": f"shell.executables.{rule_id}",
            "privileged": privileged,
            "argv": list(argv),
            "checked_path_arguments": checked,
            "exec_capable": exec_capable,
            "exec_reason": verdict.reason if verdict.exec_capable else ("privileged" if privileged else None),
            "exec_argv": list(argv) if exec_capable else None,
        }

    def _allowed_rule(self, name: str, *, wrapped: bool = False) -> str:
        what = "wrapped executable" if wrapped else "executable"
        if not name or "/" in name or "\\" in name:
            raise _deny("shell.executables", f"{what} {name!r} must be a bare name from the allowlist, not a path")
        rule = next((r for r in self.policy.exec_rules if r.matches(name)), None)
        if rule is None:
            raise _deny("shell.executables", f"{what} {name!r} is not on the shell allowlist", executable=name)
        return rule.id

    # -- evaluation -----------------------------------------------------------------------
    def evaluate(self, tool: ToolDescriptor, args: dict[str, Any], *, from_text: bool = False) -> PolicyDecision:
        """The decision for one call. ``from_text``: the call was read from the model's text rather than
        a native tool call; it is decided as in guide mode (read-only runs, the rest asks), so commander
        mode and its ``auto_approve`` rules never let it through."""
        refusal = self._switched_off(tool)
        if refusal is not None:
            return self._decide(tool, "deny", *refusal)
        facts: dict[str, Any] = {}
        try:
            facts = self.check_resources(tool.resources(args))
        except PolicyDenied as exc:
            details = {k: jsonable(v) for k, v in exc.details.items() if k != "rule"}
            return self._decide(tool, "deny", exc.rule, exc.message, facts=details)
        except InvalidInput as exc:
            rule = str(exc.details.get("rule", "input.resources"))
            return self._decide(tool, "deny", rule, exc.message, error_type="InvalidInput")
        tier = tool.effective_tier(args, facts)
        command = facts.get("command") or {}
        if command.get("privileged"):
            tier = RiskTier.EXEC_PRIVILEGED
        if command.get("exec_capable"):
            return self._decide(
                tool,
                "confirm",
                "shell.exec_capable",
                f"{command.get('exec_reason') or 'the command can run arbitrary code'}; "
                "it needs approval in every mode",
                tier=RiskTier.EXEC_PRIVILEGED,
                facts=facts,
            )
        if self.policy.requires_approval(tool.tool_id):
            return self._decide(
                tool,
                "confirm",
                f"tools.{tool.tool_id}.require_approval",
                f"the policy requires approval for {tool.tool_id}",
                tier=tier,
                facts=facts,
            )
        if from_text and self.mode == "commander" and tier is not RiskTier.READ_ONLY:
            return self._decide(
                tool,
                "confirm",
                "mode.commander.text_call",
                f"commander mode: {tier} read from the model's text (not a native tool call) needs approval",
                tier=tier,
                facts=facts,
            )
        return self._by_mode(tool, tier, facts)

    def _decide(
        self,
        tool: ToolDescriptor,
        action: Action,
        rule: str,
        reason: str,
        *,
        tier: RiskTier | None = None,
        error_type: str | None = None,
        facts: dict[str, Any] | None = None,
        approved_by: str | None = None,
    ) -> PolicyDecision:
        return PolicyDecision(
            action,
            rule,
            reason,
            tool.tool_id,
            tier or tool.tier,
            self.mode,
            error_type or ("PolicyDenied" if action == "deny" else None),
            facts or {},
            approved_by,
        )

    def _switched_off(self, tool: ToolDescriptor) -> tuple[str, str] | None:
        """``(rule, reason)`` when the profile, the providers, the tool classes or the tool's own switch
        leave ``tool`` off; None when it may run (subject to its resources and the mode)."""
        if self.policy.restriction is not None and tool.tool_id not in self.policy.restriction[1]:
            profile = self.policy.restriction[0]
            return (
                f"profile.{profile}",
                f"tool {tool.tool_id} is not enabled by the active profile {profile!r} (/profile use another one)",
            )
        if not self.policy.providers.get(tool.provider, False):
            return f"providers.{tool.provider}", f"provider {tool.provider!r} is not enabled"
        switch = self.policy.tool_switch(tool.tool_id)
        # An MCP tool (class ``mcp:<server>``) runs when its server's class is enabled, or when the
        # policy names the tool itself with ``enabled: true``; otherwise it is denied by default.
        named = tool.provider == "mcp" and switch is True
        if tool.tool_class not in self.policy.tool_classes and not named:
            return "default.deny", f"tool class {tool.tool_class!r} is not enabled by the policy (deny by default)"
        if tool.tool_class in self.policy.tool_classes and not self.policy.tool_classes[tool.tool_class]:
            return f"tool_classes.{tool.tool_class}", f"tool class {tool.tool_class!r} is disabled"
        if switch is False:
            return f"tools.{tool.tool_id}", f"tool {tool.tool_id} is disabled by the policy"
        return None

    def _by_mode(self, tool: ToolDescriptor, tier: RiskTier, facts: dict[str, Any]) -> PolicyDecision:
        """What the approval mode says of a call of ``tier`` that the rules let through."""
        mode = self.mode
        if tier is RiskTier.READ_ONLY:
            return self._decide(
                tool,
                "allow",
                f"mode.{mode}.read_only",
                "READ_ONLY tools run without approval",
                tier=tier,
                facts=facts,
                approved_by="mode",
            )
        if mode == "strict":
            return self._decide(
                tool,
                "confirm",
                "mode.strict.requires_approval",
                f"strict mode: {tier} needs approval",
                tier=tier,
                facts=facts,
            )
        if mode == "guide":
            return self._decide(
                tool,
                "confirm",
                "mode.guide.requires_approval",
                f"guide mode: {tier} needs approval",
                tier=tier,
                facts=facts,
            )
        # commander
        if tier is RiskTier.EXEC_USERSPACE:
            rule = facts.get("command", {}).get("exec_rule") or "shell.own_processes"
            return self._decide(
                tool,
                "allow",
                rule,
                "commander mode: allowlisted EXEC_USERSPACE runs without approval",
                tier=tier,
                facts=facts,
                approved_by="rule",
            )
        if tier is RiskTier.WRITE_SAFE:
            return self._decide(
                tool,
                "allow",
                "mode.commander.write_safe",
                "commander mode: WRITE_SAFE (create-only) runs without approval",
                tier=tier,
                facts=facts,
                approved_by="mode",
            )
        auto = self._auto_approve(tool.tool_id, facts)
        if auto is not None:
            return self._decide(
                tool,
                "allow",
                f"auto_approve.{auto.id}",
                f"commander mode: allowlisted by rule {auto.id!r}",
                tier=tier,
                facts=facts,
                approved_by="rule",
            )
        return self._decide(
            tool,
            "confirm",
            "mode.commander.requires_approval",
            f"commander mode: {tier} needs approval",
            tier=tier,
            facts=facts,
        )

    def _auto_approve(self, tool_id: str, facts: dict[str, Any]) -> AutoApproveRule | None:
        for rule in self.policy.auto_approve:
            if not any(fnmatch.fnmatchcase(tool_id, p) for p in rule.tools):
                continue
            if rule.domains is not None:
                hosts = facts.get("hosts") or []
                if not hosts or not all(any(domain_matches(h, d) for d in rule.domains) for h in hosts):
                    continue
            if rule.paths is not None:
                rels = [p["rel"] for p in facts.get("paths") or []]
                if not rels or not all(any(rx.match(r) for rx in rule.paths) for r in rels):
                    continue
            if rule.executables is not None:
                name = facts.get("command", {}).get("executable_name")
                if name is None or not exec_name_matches(name, rule.executables):
                    continue
            return rule
        return None

    def check_resources(self, resources: Iterable[Resource]) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        for use in resources:
            if isinstance(use, PathUse):
                base = None
                if use.base is not None:
                    base_resolved = self.guard.resolve(use.base, "list", arg="base")
                    if base_resolved.kind != "dir":
                        raise _invalid("fs.path_syntax", f"base {use.base!r} is not a directory")
                    base = base_resolved.path
                resolved = self.guard.resolve(use.raw, use.op, arg=use.arg, base=base)
                facts.setdefault("paths", []).append(resolved.to_fact(use.arg))
            elif isinstance(use, CommandUse):
                facts["command"] = self.check_command(use)
            elif isinstance(use, UrlUse):
                checked = self.check_url(use.url, arg=use.arg)
                facts.setdefault("urls", []).append(checked["url"])
                facts.setdefault("hosts", []).append(checked["host"])
            elif isinstance(use, SearchEndpointUse):
                if not self.policy.searxng_url:
                    raise _deny("web.searxng_url", "no SearXNG endpoint is configured (web.searxng_url)")
                checked = self.check_url(self.policy.searxng_url, arg="web.searxng_url")
                facts["endpoint"] = checked["url"]
                facts.setdefault("hosts", []).append(checked["host"])
        return facts
