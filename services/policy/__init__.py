"""The tool policy: a deny-by-default YAML document and its evaluation.

A policy says which providers and tool classes are enabled, which approval mode applies
(guide / commander / strict, as the builtin-tools spec defines them), where files may be
touched, which executables may run (and which of their argument forms can run arbitrary
code), which hosts and ports may be reached, and the size, time and resource limits.
``BoundPolicy(policy, workspace_root)`` applies it to a workspace; its ``evaluate(tool, args)``
returns a ``PolicyDecision``: ``allow``, ``deny`` or ``confirm`` (ask the operator), always
with the id of the rule that decided it.

Modules: ``model`` (tiers, resource uses, decisions, limits, typed refusals), ``globs``
(rule matching), ``document`` and ``loader`` (the file's pydantic models, ``Policy``, the default), ``paths``
(``PathGuard``), ``network`` (hosts, domains, addresses, ports), ``exec_table`` and
``commands`` (executables, environment, code-execution classification) and ``bound``
(``BoundPolicy``).  The package never imports ``services.tools``.
"""

from __future__ import annotations

from services.policy.bound import BoundPolicy
from services.policy.commands import Verdict, classify, env_refusal
from services.policy.globs import AutoApproveRule, DenyRule, ExecRule, exec_name_matches, glob_to_regex
from services.policy.loader import Policy, default_policy, default_policy_text, load_policy, parse_policy
from services.policy.model import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_CHARS,
    MODES,
    PATH_OPS,
    WORKSPACE_INTERNAL,
    Action,
    CommandUse,
    Limits,
    PathOp,
    PathUse,
    PolicyDecision,
    PolicyDenied,
    Resource,
    RiskTier,
    SearchEndpointUse,
    ShellSandbox,
    ToolDescriptor,
    ToolPermissionDenied,
    UrlUse,
)
from services.policy.network import NetworkRules, domain_denied_by, domain_matches, normalize_host
from services.policy.paths import PathGuard, ResolvedPath

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_CHARS",
    "MODES",
    "PATH_OPS",
    "WORKSPACE_INTERNAL",
    "Action",
    "AutoApproveRule",
    "BoundPolicy",
    "CommandUse",
    "DenyRule",
    "ExecRule",
    "Limits",
    "NetworkRules",
    "PathGuard",
    "PathOp",
    "PathUse",
    "Policy",
    "PolicyDecision",
    "PolicyDenied",
    "Resource",
    "ResolvedPath",
    "RiskTier",
    "SearchEndpointUse",
    "ShellSandbox",
    "ToolDescriptor",
    "ToolPermissionDenied",
    "UrlUse",
    "Verdict",
    "classify",
    "default_policy",
    "default_policy_text",
    "domain_denied_by",
    "domain_matches",
    "env_refusal",
    "exec_name_matches",
    "glob_to_regex",
    "load_policy",
    "normalize_host",
    "parse_policy",
]
