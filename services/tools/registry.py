"""Tool registry, providers, and the capability that makes the gateway the only way in.

A provider contributes ``ToolSpec``s: id, class, risk tier, input/output JSON schemas, what
the call touches (``resources`` for the policy) and a *guarded* handler.  A builtin tool declares
its pydantic argument model (``services.tools.args``): its input schema is the model's, and the
tool's handler, preview, ``resources`` and tier function receive the validated model
(``ToolSpec.parse``), never the plain dict.  A tool without a model (MCP) receives the dict.  The builtin
provider is always available; an MCP provider can implement the same ``ToolProvider``
protocol later and stays disabled by default (``providers.mcp.enabled: false``).

Tool implementations are wrapped by ``tool(...)`` when they are defined: the name a module
exports is the guarded wrapper, which refuses to run unless it is handed the live
``Capability`` that the gateway issues for exactly that call and tool (and revokes when the
call ends).  The raw function is kept only in the wrapper's closure.  This is a guard against
accidental bypass, not a sandbox: Python code in the same process can always get around it.
"""

from __future__ import annotations

import copy
import inspect
import secrets
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from services.errors import InvalidInput, NotFound
from services.policy import Resource, RiskTier
from services.policy.model import ToolPermissionDenied
from services.text.textsafe import neutralize

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from pydantic import BaseModel

    from services.policy import BoundPolicy, Limits, PathGuard
    from services.workspace.manager import Workspace

_T = TypeVar("_T")

# -- the capability -------------------------------------------------------------------------


class Capability:
    """Proof that the gateway authorised one call of one tool. Only live while that call runs."""

    __slots__ = ("tool_id", "call_id", "_nonce")

    def __init__(self, tool_id: str, call_id: str, nonce: str) -> None:
        self.tool_id = tool_id
        self.call_id = call_id
        self._nonce = nonce

    def __repr__(self) -> str:
        return f"Capability({self.tool_id!r}, {self.call_id!r})"


_LIVE: dict[str, Capability] = {}  # the live capabilities, by their nonce
_LIVE_LOCK = threading.Lock()


def issue_capability(tool_id: str, call_id: str) -> Capability:
    """A capability for one call, issued by the call pipeline alone (``services.tools.pipeline``) and
    revoked when the call ends; a tool refuses anything else."""
    cap = Capability(tool_id, call_id, secrets.token_hex(16))
    with _LIVE_LOCK:
        _LIVE[cap._nonce] = cap
    return cap


def revoke_capability(cap: Capability) -> None:
    with _LIVE_LOCK:
        if _LIVE.get(cap._nonce) is cap:
            del _LIVE[cap._nonce]


def _check(cap: Any, tool_id: str, ctx: Any) -> None:
    ok = isinstance(cap, Capability) and cap.tool_id == tool_id
    if ok:
        with _LIVE_LOCK:
            ok = _LIVE.get(cap._nonce) is cap  # this very object: a copy with the nonce is refused
    if ok and ctx is not None:
        ok = getattr(ctx, "call_id", None) == cap.call_id
    if not ok:
        raise ToolPermissionDenied(
            f"{tool_id} can only run through the policy gateway (execute_tool_call_with_policy)",
            rule="gateway.capability",
        )


# -- the call context -----------------------------------------------------------------------


@dataclass
class ToolContext:
    """What an implementation may use: built by the gateway for one call."""

    call_id: str
    tool_id: str
    policy: BoundPolicy
    workspace: Workspace | None
    processes: Any  # services.tools.shell.ProcessManager, created lazily by the gateway
    facts: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # time.monotonic() by which the call must end
    # Set by the gateway when the call is cancelled or its deadline passes. Long-running tools poll
    # it (``ctx.cancelled()``) and stop: shell kills the process tree, web aborts the request, fs
    # walks stop early. A thread cannot be killed, so honouring it is each tool's duty.
    cancel: threading.Event = field(default_factory=threading.Event)
    # Services the session lends its tools (``"context"``: the context backend of
    # ``services.context.tools``); given to the gateway, which passes them to every call.
    backends: Mapping[str, Any] = field(default_factory=dict)

    def cancelled(self) -> bool:
        """True once the call is cancelled or past its deadline."""
        if self.cancel.is_set():
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline

    @property
    def limits(self) -> Limits:
        return self.policy.limits

    @property
    def guard(self) -> PathGuard:
        return self.policy.guard


Guarded = Callable[[Capability, ToolContext, Any], Any]
"""A handler or preview as the gateway calls it: capability, context, the parsed arguments."""


def guard_impl(tool_id: str, impl: Callable[..., Any]) -> Guarded:
    """Wrap ``impl(ctx, args)`` so that it runs only with the live capability for ``tool_id``."""
    if inspect.iscoroutinefunction(impl):

        async def guarded_async(cap: Capability, ctx: ToolContext, args: Any) -> Any:
            _check(cap, tool_id, ctx)
            return await impl(ctx, args)

        guarded_async.__name__ = getattr(impl, "__name__", "tool")
        guarded_async.__doc__ = impl.__doc__
        return guarded_async

    def guarded(cap: Capability, ctx: ToolContext, args: Any) -> Any:
        _check(cap, tool_id, ctx)
        return impl(ctx, args)

    guarded.__name__ = getattr(impl, "__name__", "tool")
    guarded.__doc__ = impl.__doc__
    return guarded


def _no_resources(args: Any) -> list[Resource]:
    return []


@dataclass(frozen=True)
class ToolSpec:
    tool_id: str
    provider: str
    tool_class: str
    tier: RiskTier
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Guarded = field(repr=False)
    is_async: bool = False
    resources_fn: Callable[[Any], list[Resource]] = field(default=_no_resources, repr=False)
    tier_fn: Callable[[Any, dict[str, Any]], RiskTier] | None = field(default=None, repr=False)
    session_keys: tuple[str, ...] = ()
    preview: Guarded | None = field(default=None, repr=False)
    preview_is_async: bool = False
    args_model: type[BaseModel] | None = field(default=None, repr=False)

    def parse(self, args: Any) -> Any:
        """The arguments as the tool receives them: its validated model (the dict when it has none).

        The gateway has checked ``args`` against the published schema first (which names the failing
        field); what the model still refuses is ``InvalidInput`` (rule ``input.schema``). Arguments
        that are already this tool's model are returned as they are: a call validates them once
        (``services.tools.records.parse_arguments``), and the policy, the preview and the tool take
        that one model."""
        if self.args_model is None or isinstance(args, self.args_model):
            return args
        from pydantic import ValidationError

        try:
            return self.args_model.model_validate(args)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"]) or "(arguments)"
            message = neutralize(f"{where}: {first['msg']}", single_line=True)
            raise InvalidInput(message[:500], tool_id=self.tool_id, field=where, rule="input.schema") from None

    def resources(self, args: Any) -> list[Resource]:
        """What a call with ``args`` (its model, or a dict) touches, for the policy."""
        return self.resources_fn(self.parse(args))

    def effective_tier(self, args: Any, facts: dict[str, Any]) -> RiskTier:
        return self.tier_fn(self.parse(args), facts) if self.tier_fn is not None else self.tier

    def describe(self) -> dict[str, Any]:
        """The published description; the schemas are copies, so a caller cannot change validation."""
        return {
            "id": self.tool_id,
            "provider": self.provider,
            "class": self.tool_class,
            "tier": str(self.tier),
            "description": self.description,
            "input_schema": copy.deepcopy(self.input_schema),
            "output_schema": copy.deepcopy(self.output_schema),
        }


def tool(
    tool_id: str,
    *,
    tier: RiskTier,
    description: str,
    args: type[BaseModel],
    output_schema: dict[str, Any],
    registry: list[ToolSpec],
    resources: Callable[[Any], list[Resource]] = _no_resources,
    tier_fn: Callable[[Any, dict[str, Any]], RiskTier] | None = None,
    session_keys: tuple[str, ...] = (),
    preview: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Guarded]:
    """Decorator for builtin implementations: registers the spec (its input schema is ``args``'s),
    returns the guarded handler. ``impl``, ``preview``, ``resources`` and ``tier_fn`` receive an
    ``args`` instance."""
    from services.tools.schemas import schema_of

    provider, tool_class = tool_id.split(":")[0], tool_id.split(":")[1]
    input_schema = schema_of(args)

    def decorate(impl: Callable[..., Any]) -> Guarded:
        handler = guard_impl(tool_id, impl)
        registry.append(
            ToolSpec(
                tool_id=tool_id,
                provider=provider,
                tool_class=tool_class,
                tier=tier,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                handler=handler,
                is_async=inspect.iscoroutinefunction(impl),
                resources_fn=resources,
                tier_fn=tier_fn,
                session_keys=session_keys,
                preview=guard_impl(tool_id, preview) if preview is not None else None,
                preview_is_async=preview is not None and inspect.iscoroutinefunction(preview),
                args_model=args,
            )
        )
        return handler

    return decorate


# -- providers and the registry -------------------------------------------------------------


class ToolProvider(Protocol):
    """A source of tools. ``builtin`` ships here; an MCP provider would implement the same."""

    name: str

    def tools(self) -> list[ToolSpec]: ...


class LazyToolProvider(ToolProvider, Protocol):
    """A provider whose tools come in groups loaded on demand (the MCP provider: one per server)."""

    def groups(self) -> list[str]: ...
    def group_for(self, tool_id: str) -> str | None: ...
    def load(self, group: str) -> list[ToolSpec]: ...


class ToolRegistry:
    def __init__(self, providers: list[ToolProvider] | None = None) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._validators: dict[str, Validator] = {}
        self.providers: list[ToolProvider] = []
        self._lazy: list[LazyToolProvider] = []
        self._loaded: dict[tuple[str, str], str | None] = {}  # None: loaded; else why it failed
        self._load_lock = threading.Lock()
        self._memo: dict[Hashable, Any] = {}  # see memo()
        self._memo_generation = 0  # counts the changes of the tools listed
        self._memo_lock = threading.Lock()
        for provider in providers or []:
            self.add_provider(provider)

    def add_provider(self, provider: ToolProvider) -> None:
        self._register(provider.name, provider.tools())
        self.providers.append(provider)
        if all(callable(getattr(provider, name, None)) for name in ("groups", "group_for", "load")):
            self._lazy.append(provider)  # type: ignore[arg-type]

    def _register(self, provider: str, specs: list[ToolSpec]) -> None:
        for spec in specs:
            if spec.provider != provider:
                raise ValueError(f"{spec.tool_id}: provider {provider!r} may only register its own ids")
            if spec.tool_id in self._tools:
                raise ValueError(f"tool {spec.tool_id} is registered twice")
            self._tools[spec.tool_id] = spec
        self.forget()

    # -- what is derived from the tools listed -----------------------------------------------
    def memo(self, key: Hashable, build: Callable[[], _T]) -> _T:
        """A value derived from the tools listed here (e.g. the tools a model is offered under a
        policy, with their cost in tokens), built once per ``key``. Forgotten when tools are
        registered (an MCP server's, loaded on demand) and when the gateway rebinds (``forget``)."""
        with self._memo_lock:
            if key in self._memo:
                return cast(_T, self._memo[key])
            generation = self._memo_generation
        value = build()  # outside the lock: it may list the tools, which may load a group
        with self._memo_lock:
            if generation == self._memo_generation:  # the tools did not change while it was built
                self._memo[key] = value
        return value

    def forget(self) -> None:
        """Drop every value :meth:`memo` kept."""
        with self._memo_lock:
            self._memo.clear()
            self._memo_generation += 1

    # -- lazily loaded groups (MCP servers) ------------------------------------------------
    @property
    def lazy(self) -> bool:
        return bool(self._lazy)

    def load_for(self, tool_id: Any) -> None:
        """Load the group ``tool_id`` belongs to, if a lazy provider claims it (may start a server)."""
        if not isinstance(tool_id, str) or tool_id in self._tools:
            return
        for provider in self._lazy:
            group = provider.group_for(tool_id)
            if group is not None:
                self._load(provider, group)

    def load_all(self, *, retry: bool = True) -> dict[str, str]:
        """Load every lazy group; returns ``{"provider:group": why}`` for those that failed. Without
        ``retry`` a group that already failed is not tried again (a model turn never waits twice for a
        server that does not start; ``/doctor``, ``tool list`` and a call naming its tool do retry)."""
        failed: dict[str, str] = {}
        for provider in self._lazy:
            for group in provider.groups():
                earlier = self._loaded.get((provider.name, group))
                problem = earlier if earlier is not None and not retry else self._load(provider, group)
                if problem is not None:
                    failed[f"{provider.name}:{group}"] = problem
        return failed

    @property
    def loading(self) -> bool:
        """Whether a group is being loaded now (a server starting, in another thread)."""
        return self._load_lock.locked()

    def unloaded(self) -> list[str]:
        """The lazy groups never tried yet (``provider:group``)."""
        return [
            f"{provider.name}:{group}"
            for provider in self._lazy
            for group in provider.groups()
            if (provider.name, group) not in self._loaded
        ]

    def missing_reason(self, tool_id: Any) -> str | None:
        """Why ``tool_id`` is not registered when its group failed to load, else None."""
        for provider in self._lazy:
            group = provider.group_for(tool_id) if isinstance(tool_id, str) else None
            if group is not None and self._loaded.get((provider.name, group)):
                return self._loaded[(provider.name, group)]
        return None

    def _load(self, provider: LazyToolProvider, group: str) -> str | None:
        from services.errors import AriesError

        key = (provider.name, group)
        with self._load_lock:
            if key in self._loaded and self._loaded[key] is None:
                return None
            try:
                specs = provider.load(group)
            except AriesError as exc:  # tried again on the next look-up
                self._loaded[key] = exc.message
                return exc.message
            self._register(provider.name, [s for s in specs if s.tool_id not in self._tools])
            self._loaded[key] = None
            return None

    def get(self, tool_id: str) -> ToolSpec:
        try:
            return self._tools[tool_id]
        except KeyError:
            raise NotFound(f"no tool {tool_id!r} is registered", tool_id=tool_id) from None

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._tools

    def list(self) -> list[ToolSpec]:
        return [self._tools[k] for k in sorted(self._tools)]

    def validator(self, tool_id: str) -> Validator:
        """A draft 2020-12 validator of the tool's published input schema (compiled once).

        It is stricter than the schema in one way only: ``NaN`` and ``Infinity``, which are not JSON
        but which Python's ``json`` module reads, are not numbers.
        """
        validator = self._validators.get(tool_id)
        if validator is None:
            schema = copy.deepcopy(self.get(tool_id).input_schema)
            from services.tools.validation import validator_class

            cls = validator_class()
            cls.check_schema(schema)
            validator = cls(schema)
            self._validators[tool_id] = validator
        return validator

    def validate(self, tool_id: str, args: Any) -> None:
        """Check ``args`` against the tool's input schema; ``InvalidInput`` names the failing field.

        The message is one line, ``<field path>: <what is wrong>`` (``path: 'x…' is too long``,
        ``argv/1: …``, ``(arguments): 'path' is a required property``); of several problems, the
        one at the first path in sorted order is reported, so the same input gives the same message.
        """
        if not isinstance(args, dict):
            raise InvalidInput("arguments must be a JSON object", tool_id=tool_id)
        errors = self.validator(tool_id).iter_errors(args)
        error = min(errors, key=lambda e: [str(p) for p in e.absolute_path], default=None)
        if error is None:
            return
        where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
        message = neutralize(f"{where}: {error.message}", single_line=True)
        raise InvalidInput(message[:500], tool_id=tool_id, field=where, rule="input.schema")


def tool_schemas_for_model(registry: ToolRegistry, enabled: Iterable[str]) -> list[dict[str, Any]]:
    """The tools to offer a model: ``{name, description, parameters}`` for each enabled tool id.

    ``name`` is the tool id, ``parameters`` its published (self-contained) input schema, a copy.
    Sorted by id and without duplicates, so the same tools give the same request; an id that is
    not registered is ``NotFound``.  Descriptions can come from third-party providers: they are
    neutralised like any other text that reaches a model.  Some OpenAI-compatible servers allow only
    ``[A-Za-z0-9_-]`` in function names: mapping ids to such names is the provider adapter's job.
    """
    offered: list[dict[str, Any]] = []
    for tool_id in sorted(set(enabled)):
        spec = registry.get(tool_id)
        offered.append(
            {
                "name": spec.tool_id,
                "description": neutralize(spec.description, single_line=True),
                "parameters": copy.deepcopy(spec.input_schema),
            }
        )
    return offered
