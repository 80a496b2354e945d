"""The policy file: parsing (bounded YAML, the pydantic models of :mod:`services.policy.document`,
file:line errors), ``Policy`` (a validated document, not yet bound to a workspace) and the shipped
default.

The file format is summarised in ``profiles/policy-default.yaml``; a policy may carry
``match:`` / ``not_match:`` examples on its rules, checked at load time.  Any problem is a
``ConfigError`` naming the file, the line and the reason, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import MISSING

from services.errors import ConfigError
from services.files.yamlio import line_at, plain
from services.hashing import content_hash
from services.policy.globs import AutoApproveRule, DenyRule, ExecRule, glob_to_regex
from services.policy.hooks import duplicate_ids
from services.policy.model import PATH_OPS, ShellSandbox
from services.policy.network import NetworkRules

if TYPE_CHECKING:
    from services.policy.document import DenyExtensions, DenyGlob, Executables, PolicyDocument, ToolOverride


def _name_matcher(rule: ExecRule) -> Callable[[str, str], bool]:
    return lambda name, _absolute: rule.matches(name)


def _extension(name: str) -> str:
    return name.lower() if name.startswith(".") else "." + name.lower()


def _validate(data: dict[str, Any], source: str, tree: Any) -> PolicyDocument:
    """``data`` as a :class:`PolicyDocument`; a ``ConfigError`` naming the file, the line and the
    setting when it is not one."""
    from pydantic import ValidationError

    from services.policy.document import PolicyDocument, problem

    try:
        return PolicyDocument.model_validate(data)
    except ValidationError as exc:
        path, reason = problem(exc, data)
        line = line_at(tree, path) if tree is not None else None
        where = f"{source}:{line}" if line else source
        raise ConfigError(f"{where}: {reason}", path=source, line=line, reason=reason) from None


class Policy:
    """A validated policy document (not yet bound to a workspace).

    ``data`` is the document as written (plain dicts, lists and scalars; what ``hash`` is taken of),
    ``doc`` its :class:`~services.policy.document.PolicyDocument`, and the other attributes the rules
    built from it.
    """

    def __init__(
        self,
        data: dict[str, Any],
        *,
        source: str,
        tree: Any = None,
        restriction: tuple[str, frozenset[str]] | None = None,
    ) -> None:
        self.data = data
        self.source = source
        self._tree = tree
        # A profile's tool list: (profile name, the tool ids it enables). Every other tool is denied
        # (rule ``profile.<name>``) before any other rule is looked at.
        self.restriction = restriction
        hashed: dict[str, Any] = data
        if restriction is not None:
            hashed = {"policy": data, "profile": restriction[0], "profile_tools": sorted(restriction[1])}
        self.hash = content_hash(hashed)
        doc = self.doc = _validate(data, source, tree)
        self.mode: str = doc.mode
        self.providers = doc.providers.enabled()
        self.tool_classes: dict[str, bool] = dict(doc.tool_classes)
        self.tools: dict[str, ToolOverride] = dict(doc.tools)
        self.limits = doc.limits
        fs = doc.filesystem
        self.allowed_roots: list[str] = list(fs.allowed_roots)
        self.allow_hardlinks = fs.allow_hardlinks
        self.deny_rules: list[DenyRule] = self._deny_rules(fs.deny, fs.deny_extensions)
        self.write_extensions: frozenset[str] | None = (
            None if fs.write_extensions is None else frozenset(_extension(e) for e in fs.write_extensions)
        )
        sh = doc.shell
        self.exec_rules: list[ExecRule] = self._exec_rules(sh.executables)
        self.privileged: tuple[str, ...] = tuple(sh.privileged)
        self.env_passthrough: tuple[str, ...] = tuple(sh.env_passthrough)
        self.env_allow: tuple[str, ...] = tuple(sh.env_allow)
        self.inert_programs: tuple[str, ...] = tuple(sh.inert_programs)
        self.check_path_arguments = sh.check_path_arguments
        self.search_path: list[str] | None = sh.search_path
        self.sandbox = ShellSandbox(
            mode=sh.sandbox, network=sh.network, outside_root=sh.outside_root, visible=tuple(sh.visible_paths)
        )
        for i, visible in enumerate(self.sandbox.visible):
            if not visible.startswith(("/", "${")):
                raise self._error(("shell", "visible_paths", i), f"visible path {visible!r} must be absolute")
        self.network = NetworkRules(doc.web, self._error)
        self.searxng_url = self.network.searxng_url
        self.schemes = self.network.schemes
        self.allow_domains = self.network.allow_domains
        self.deny_domains = self.network.deny_domains
        self.allow_private_hosts = self.network.allow_private_hosts
        self.allow_private_nets = self.network.allow_private_nets
        self.auto_approve: list[AutoApproveRule] = [
            AutoApproveRule(
                id=rule.id,
                tools=tuple(rule.tools),
                domains=None if rule.domains is MISSING else tuple(rule.domains),
                paths=None if rule.paths is MISSING else tuple(glob_to_regex(p) for p in rule.paths),
                executables=None if rule.executables is MISSING else tuple(rule.executables),
            )
            for rule in doc.auto_approve
        ]
        self.hooks = doc.hooks  # run around matching calls by services.tools.hooks
        hook_dupes = duplicate_ids(doc.hooks)
        if hook_dupes:
            raise self._error(("hooks",), f"hook ids must be unique; repeated: {', '.join(hook_dupes)}")
        ids = [r.id for r in self.deny_rules] + [r.id for r in self.exec_rules] + [r.id for r in self.auto_approve]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise self._error((), f"rule ids must be unique; repeated: {', '.join(dupes)}")

    # -- the rules, built from the document ----------------------------------------------------
    def _deny_rules(self, globs: Sequence[DenyGlob], extensions: Sequence[DenyExtensions]) -> list[DenyRule]:
        """``filesystem.deny`` then ``filesystem.deny_extensions``, each rule's examples checked."""
        rules: list[DenyRule] = []
        for i, glob_rule in enumerate(globs):
            deny = DenyRule(
                id=glob_rule.id,
                ops=frozenset(glob_rule.ops or PATH_OPS),
                glob=glob_rule.glob,
                regex=glob_to_regex(glob_rule.glob),
            )
            self._check_examples(deny.matches, glob_rule, ("filesystem", "deny", i), path_like=True)
            rules.append(deny)
        for i, ext_rule in enumerate(extensions):
            exts = frozenset(_extension(e) for e in ext_rule.extensions)
            deny = DenyRule(id=ext_rule.id, ops=frozenset(ext_rule.ops or PATH_OPS), extensions=exts)
            self._check_examples(deny.matches, ext_rule, ("filesystem", "deny_extensions", i), path_like=True)
            rules.append(deny)
        return rules

    def _exec_rules(self, executables: Sequence[Executables]) -> list[ExecRule]:
        """``shell.executables``, each rule's examples checked."""
        rules: list[ExecRule] = []
        for i, exec_rule in enumerate(executables):
            ex = ExecRule(id=exec_rule.id, names=tuple(exec_rule.names))
            self._check_examples(_name_matcher(ex), exec_rule, ("shell", "executables", i))
            rules.append(ex)
        return rules

    # -- load-time checks ----------------------------------------------------------------
    def _error(self, path: Sequence[Any], reason: str) -> ConfigError:
        line = line_at(self._tree, path) if self._tree is not None else None
        where = f"{self.source}:{line}" if line else self.source
        return ConfigError(f"{where}: {reason}", path=self.source, line=line, reason=reason)

    def _check_examples(
        self,
        matcher: Callable[[str, str], bool],
        rule: DenyGlob | DenyExtensions | Executables,
        path: tuple[Any, ...],
        *,
        path_like: bool = False,
    ) -> None:
        for key, examples, expected in (("match", rule.match, True), ("not_match", rule.not_match, False)):
            for j, example in enumerate(examples):
                absolute = example if example.startswith("/") else "/" + example
                if bool(matcher(example.lstrip("/") if path_like else example, absolute)) != expected:
                    verb = "should match but does not" if expected else "should not match but does"
                    raise self._error((*path, key, j), f"rule {rule.id!r}: example {example!r} {verb}")

    # -- variants ------------------------------------------------------------------------
    def restricted(self, profile: str, tools: frozenset[str] | None) -> Policy:
        """This policy under profile ``profile``: only ``tools`` may run (None: no restriction)."""
        if tools is None:
            return self if self.restriction is None else Policy(self.data, source=self.source, tree=self._tree)
        return Policy(self.data, source=self.source, tree=self._tree, restriction=(profile, frozenset(tools)))

    def tool_switch(self, tool_id: str) -> bool | None:
        """``tools.<id>.enabled`` as the file says it (None when it says nothing)."""
        override = self.tools.get(tool_id)
        return None if override is None or override.enabled is MISSING else override.enabled

    def requires_approval(self, tool_id: str) -> bool:
        """``tools.<id>.require_approval``."""
        override = self.tools.get(tool_id)
        return override is not None and override.require_approval is True

    def allows_tool(self, tool_id: str) -> bool:
        """False when a profile's tool list leaves ``tool_id`` out."""
        return self.restriction is None or tool_id in self.restriction[1]


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    from services.files.yamlio import parse_yaml_text

    tree = parse_yaml_text(text, source=source)
    if not isinstance(tree, dict):
        raise ConfigError(f"{source}:1: a policy is a mapping with at least 'version: 1'", path=source, line=1)
    data = plain(tree)
    from services.policy.capsule import capsule_to_policy, is_capsule

    if is_capsule(tree):  # the capsule format, translated onto the shipped default (see its module)
        from services.files.yamlio import line_of

        data = capsule_to_policy(tree, default_policy().data, source=source, line_of=line_of)
        tree = None
    return Policy(data, source=source, tree=tree)


def load_policy(path: Path | str | None = None) -> Policy:
    """Load a policy file; ``None`` loads the shipped safe default."""
    if path is None:
        return default_policy()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: file not found", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8", path=str(path)) from exc
    return parse_policy(text, source=str(path))


_DEFAULT: Policy | None = None


def default_policy_text() -> str:
    from importlib.resources import files

    return (files("profiles") / "policy-default.yaml").read_text(encoding="utf-8")


def default_policy() -> Policy:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = parse_policy(default_policy_text(), source="profiles/policy-default.yaml")
    return _DEFAULT
