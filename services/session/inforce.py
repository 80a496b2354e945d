"""What is in force in one session, as one immutable value: trust → profile → policy → mode → model.

``resolve(workspace, operator)`` makes an :class:`InForce`; :class:`~services.session.session.Session` holds
one and, on every change (``/policy mode``, ``/policy reload``, ``/profile use``, trusting the
workspace, ``/model use``), builds a new one and rebinds the gateway. Nothing is cached and reset by
hand: the value is replaced whole. ``old.replaces(new)`` says whether the change narrows or replaces
the policy, mode or profile (then the calls waiting for approval are denied: they were asked under the
old rules) or only adds (they are kept).

Each piece says where it came from (``mode_source``, ``profile_source``, ``policy_source``,
``model_source``).

**The approval mode**, highest first (``services.approval_mode.approval_mode`` is the table):

1. the operator's override in this session (``--mode``, ``/policy mode``);
2. the workspace's ``approval_mode`` setting;
3. the active profile's ``mode``;
4. the policy file's ``mode:``;
5. the shipped default, ``guide``.

A workspace whose settings are not in force contributes nothing (its ``approval_mode``, its
profiles, its ``policy.yaml``, its model): one *changed* since the operator trusted it, and one
imported but not yet trusted, whose authority waits in ``.quarantine/`` (``services.trust``) where
nothing reads it.

**The model**: ``ARIES_MODEL`` (the operator's environment), else the workspace's ``model`` setting,
else the profile's default model, else ``offline`` (``services.models.config.resolve_model``).

Start-up pays for nothing it does not need: the profile and the policy are loaded on first use (a
``cached_property`` of the frozen value: computed once from its fields, never reset), and the shipped
``default`` profile with no workspace copy, which sets nothing, is not loaded to know the mode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.approval_mode import ApprovalMode, approval_mode, parse_mode
from services.errors import ConfigError
from services.workspace.paths import POLICY_FILE

if TYPE_CHECKING:
    from services.policy import Policy
    from services.profiles import ActiveProfile
    from services.project.commands import Commands, WorkspaceCommand
    from services.project.files import CommandFile
    from services.project.instructions import Instructions
    from services.settings.operator import OperatorSettings
    from services.trust.records import TrustState
    from services.workspace.manager import Workspace

WORKSPACE_POLICY = POLICY_FILE  # a workspace's own tool policy, at its root
SHIPPED_POLICY = "shipped default (profiles/policy-default.yaml)"
ENV_MODEL = "ARIES_MODEL"  # as services.models.config names it (not imported: start-up)


@dataclass(frozen=True)
class Operator:
    """What the operator chose for this session, over whatever the workspace says."""

    mode: ApprovalMode | None = None
    """The approval mode override (``--mode`` or ``/policy mode``); None: none."""
    mode_from: str = "--mode"
    """Where the override was given: ``--mode`` (kept for the session) or ``/policy mode`` (given up
    when the profile changes or the workspace's settings are read again)."""
    policy_file: Path | None = None
    """``--policy FILE``: a policy file over the workspace's and the profile's."""
    profile: str | None = None
    """``--profile NAME`` or ``/profile use NAME``; None: the workspace's ``profile`` setting."""
    model: str | None = None
    """``ARIES_MODEL`` from the environment; None or empty: unset."""

    @classmethod
    def for_session(
        cls,
        *,
        mode: str | None = None,
        policy_file: Path | str | None = None,
        profile: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Operator:
        env = os.environ if env is None else env
        return cls(
            mode=parse_mode(mode) if mode is not None else None,
            policy_file=Path(policy_file).expanduser() if policy_file is not None else None,
            profile=profile,
            model=(env.get(ENV_MODEL) or "").strip() or None,
        )

    def model_env(self) -> dict[str, str]:
        """The environment ``services.models.config.resolve_model`` reads, with ``ARIES_MODEL`` as the
        operator's choice of this session (not read again from ``os.environ``)."""
        env = {key: value for key, value in os.environ.items() if key != ENV_MODEL}
        if self.model:
            env[ENV_MODEL] = self.model
        return env

    def choose_mode(self, mode: ApprovalMode) -> Operator:
        return replace(self, mode=mode, mode_from="/policy mode")

    def without_session_mode(self) -> Operator:
        """This operator without a ``/policy mode`` choice (a ``--mode`` flag stays)."""
        return replace(self, mode=None) if self.mode_from == "/policy mode" else self


@dataclass(frozen=True)
class InForce:
    """What is in force: made by :func:`resolve`, never changed (a change makes a new one)."""

    workspace: Workspace = field(compare=False, repr=False)
    operator: Operator
    trust: TrustState
    """The workspace's trust state; its settings contribute only while ``trust.in_force``."""
    profile_name: str
    profile_source: str
    """``operator`` (``--profile``, ``/profile use``), ``workspace profile setting`` or ``shipped
    default`` (the workspace names a profile of its own while its settings are not in force)."""
    workspace_mode: ApprovalMode | None
    """The workspace's ``approval_mode`` setting while in force; None: unset or not in force."""
    workspace_model: str | None
    """The workspace's ``model`` setting while in force (``offline`` included); None: not in force."""
    loaded_profile: ActiveProfile | None = field(default=None, compare=False, repr=False)
    """The profile, when the caller loaded it already (``--profile``, ``/profile use``)."""
    # Slots for what the next issues add, each with where it came from; empty until then.
    grants: tuple[Any, ...] = ()
    """Lasting grants of this workspace (from the operator's settings store)."""
    hooks: tuple[Any, ...] = ()
    """Hooks the workspace runs around tool calls and turns."""
    instructions: tuple[Instructions, ...] = ()
    """Project instructions sent with every turn: the workspace's ``AGENTS.md`` while its settings are
    in force (``Instructions.source`` says where it came from)."""
    command_files: tuple[CommandFile, ...] = ()
    """The workspace's ``commands/NAME.md`` files as read now, while its settings are in force (parsed
    on first use: ``commands``)."""

    # -- workspace commands ---------------------------------------------------------------------
    @cached_property
    def _commands(self) -> Commands:
        from services.project.commands import parse_commands

        return parse_commands(self.command_files)

    @property
    def commands(self) -> tuple[WorkspaceCommand, ...]:
        """Workspace slash commands (``commands/NAME.md``, each with its ``source``) while in force."""
        return tuple(self._commands.commands) if self.command_files else ()

    @property
    def command_problems(self) -> tuple[str, ...]:
        """One line per command file that is no usable command (bad front matter, bad or built-in name)."""
        return tuple(self._commands.problems) if self.command_files else ()

    # -- the operator's side --------------------------------------------------------------------
    @cached_property
    def operator_settings(self) -> OperatorSettings:
        """The operator's settings store, outside every workspace (``services.settings.operator``:
        theme, notifications, lasting grants), read on first use. OperatorSettingsError (one line)
        when the file does not read."""
        from services.settings.operator import load_settings

        return load_settings()

    # -- the profile --------------------------------------------------------------------
    @property
    def profiles_root(self) -> Path | None:
        """Where workspace profiles are read from: the workspace, or nowhere while not in force."""
        return self.workspace.root if self.trust.in_force else None

    @cached_property
    def _profile_load(self) -> tuple[ActiveProfile | None, str | None]:
        if self.loaded_profile is not None:
            return self.loaded_profile, None
        from services.profiles import load_profile

        try:
            return load_profile(self.profile_name, self.profiles_root), None
        except ConfigError as exc:
            return None, exc.message

    @property
    def profile(self) -> ActiveProfile | None:
        """The active profile, or None when it cannot be loaded (see ``profile_error``)."""
        return self._profile_load[0]

    @property
    def profile_error(self) -> str | None:
        return self._profile_load[1]

    @property
    def profile_loaded(self) -> bool:
        """Whether the profile was loaded (or found broken) already."""
        return "_profile_load" in self.__dict__ or self.loaded_profile is not None

    def profile_may_set(self) -> bool:
        """False for the shipped ``default`` profile with no workspace copy: it names no policy, mode or
        model (``tests/test_profiles.py`` holds it to that), so what is in force is known without
        loading it — and without its parser (pydantic, the YAML reader). True for any other profile."""
        if self.profile_loaded or self.profile_name != "default":
            return True
        from services.profiles.loader import SUFFIX, WORKSPACE_PROFILES

        own = self.profiles_root
        return own is not None and (own / WORKSPACE_PROFILES / f"default{SUFFIX}").exists()

    @property
    def settings_profile(self) -> ActiveProfile | None:
        """The profile, where it may set what is in force (``profile_may_set``)."""
        return self.profile if self.profile_may_set() else None

    # -- the policy ------------------------------------------------------------------------
    @cached_property
    def policy_path(self) -> Path | None:
        """The policy file in force (``--policy``, else the profile's, else the workspace's
        ``policy.yaml``), or None for the shipped default."""
        if self.operator.policy_file is not None:
            return self.operator.policy_file
        if not self.trust.in_force:
            return None
        profile = self.settings_profile
        if profile is not None and profile.policy_path is not None:
            return profile.policy_path
        custom = self.workspace.root / WORKSPACE_POLICY
        return custom if custom.is_file() else None

    @property
    def policy_source(self) -> str:
        path = self.policy_path
        return str(path) if path is not None else SHIPPED_POLICY

    @cached_property
    def policy(self) -> Policy:
        """The policy in force, restricted to the profile's tools (none while the profile is broken).
        Raises ConfigError (on every use) when the file does not load."""
        from services.policy import load_policy

        policy = load_policy(self.policy_path)
        profile = self.profile
        if profile is None:
            return policy.restricted(self.profile_name, frozenset())  # broken profile: fail closed
        return policy.restricted(profile.name, profile.tools)

    def policy_or_none(self) -> Policy | None:
        try:
            return self.policy
        except ConfigError:
            return None

    # -- the approval mode ----------------------------------------------------------------
    @cached_property
    def _mode(self) -> tuple[ApprovalMode, str]:
        profile = self.settings_profile
        profile_mode = parse_mode(profile.mode) if profile is not None and profile.mode is not None else None
        higher = self.operator.mode or self.workspace_mode or profile_mode
        policy_mode = None
        if higher is None and self.policy_path is not None:  # the shipped policy's mode is SHIPPED_MODE
            policy = self.policy_or_none()
            policy_mode = parse_mode(policy.mode) if policy is not None else None
        mode, level = approval_mode(self.operator.mode, self.workspace_mode, profile_mode, policy_mode)
        source = {
            "operator": f"operator override ({self.operator.mode_from})",
            "workspace": "workspace approval_mode",
            "profile": f"profile {self.profile_name}",
            "policy": f"policy file {self.policy_source}",
            "shipped": "shipped default",
        }[level]
        return mode, source

    @property
    def mode(self) -> ApprovalMode:
        return self._mode[0]

    @property
    def mode_source(self) -> str:
        return self._mode[1]

    # -- the model ----------------------------------------------------------------------------
    @property
    def model_setting(self) -> str | None:
        """The workspace's ``model`` setting, else (when it is unset or ``offline``) the profile's
        default model (``ARIES_MODEL`` wins over both: see ``model``)."""
        if self.workspace_model in (None, "", "offline"):
            profile = self.settings_profile
            if profile is not None and profile.model.default:
                return str(profile.model.default)
        return self.workspace_model

    @property
    def model(self) -> str | None:
        """The ``provider:model`` in force (``ARIES_MODEL``, else ``model_setting``); None or
        ``offline``: no model."""
        return self.operator.model or self.model_setting

    @property
    def model_source(self) -> str:
        if self.operator.model:
            return ENV_MODEL
        setting = self.model_setting
        if setting is not None and setting == self.workspace_model:
            return "workspace model"
        return f"profile {self.profile_name}" if setting is not None else "shipped default"

    def model_env(self) -> dict[str, str]:
        """The environment ``services.models.config.resolve_model`` reads (``Operator.model_env``)."""
        return self.operator.model_env()

    # -- changes ----------------------------------------------------------------------------
    def policy_hash(self) -> str | None:
        policy = self.policy_or_none()
        return policy.hash if policy is not None else None

    def replaces(self, old: InForce) -> bool:
        """Whether this value, made after ``old``, narrows or replaces its policy, mode or profile (the
        calls waiting under ``old`` are then denied); False when it only adds (a lasting grant)."""
        return (
            self.trust.status != old.trust.status
            or self.profile_name != old.profile_name
            or self.profile_error != old.profile_error
            or self.mode != old.mode
            or self.policy_path != old.policy_path
            or self.policy_hash() != old.policy_hash()
        )


def resolve(
    workspace: Workspace,
    operator: Operator,
    *,
    profile: ActiveProfile | None = None,
) -> InForce:
    """What is in force in ``workspace`` for ``operator`` (``profile``: the operator's profile, loaded
    already). Reads the trust state and the workspace's settings now; loads the profile and the policy
    on first use."""
    from services.trust.records import workspace_trust

    trust = workspace_trust(workspace.root, ephemeral=workspace.ephemeral)
    if operator.profile:
        name, source = operator.profile, "operator"
    elif trust.in_force:
        name, source = workspace.profile, "workspace profile setting"
    else:
        name, source = _shipped_or_default(workspace.profile), "shipped default"
    mode = workspace.setting("approval_mode") if trust.in_force else None
    model = workspace.setting("model") if trust.in_force else None
    commands, instructions = _project(workspace, trust)
    return InForce(
        workspace=workspace,
        operator=operator,
        trust=trust,
        profile_name=name,
        profile_source=source,
        workspace_mode=parse_mode(mode, "workspace setting approval_mode") if mode else None,
        workspace_model=str(model) if model is not None else None,
        loaded_profile=profile,
        instructions=instructions,
        command_files=commands,
    )


def _project(workspace: Workspace, trust: TrustState) -> tuple[tuple[CommandFile, ...], tuple[Instructions, ...]]:
    """The workspace's command files (read now, parsed on first use) and its instructions — none while
    its settings are not in force (a bundle's wait in quarantine, where nothing reads them). Costs a
    ``stat`` each when there are none; no parser is imported here."""
    if not trust.in_force or workspace.ephemeral:
        return (), ()
    from services.workspace.paths import AGENTS_FILE, COMMANDS_DIR

    root = workspace.root
    commands: tuple[CommandFile, ...] = ()
    if (root / COMMANDS_DIR).is_dir():
        from services.project.files import read_command_files

        commands = read_command_files(root)
    instructions: tuple[Instructions, ...] = ()
    if (root / AGENTS_FILE).exists():
        from services.project.instructions import read_instructions

        read = read_instructions(root)
        instructions = (read,) if read is not None else ()
    return commands, instructions


def _shipped_or_default(name: str) -> str:
    """A workspace whose settings are not in force keeps a shipped profile it names, else ``default``."""
    from services.profiles.loader import SUFFIX, shipped_dir

    return name if (shipped_dir() / f"{name}{SUFFIX}").is_file() else "default"


__all__ = ["SHIPPED_POLICY", "WORKSPACE_POLICY", "InForce", "Operator", "resolve"]
