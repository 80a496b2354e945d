"""The slash-command grammar: one declarative spec per command (lowest UI layer, no heavy imports).

A :class:`CommandSpec` lists the ways to call its command (:class:`Form`: the sub-command words,
positionals with a completion kind, typed options, the typed object it makes). From that one
declaration come the usage line, Tab completion, the F1 help, the palette rows and the parsed object
handed to the handler; a misuse is one :class:`CommandError` line. A form may be *tool-backed*: its
options are the fields of the tool's pydantic argument model (``services.tools.args``), read on
first use, never at start-up; the model validates its fields once, in the gateway.

:class:`CommandRegistry` holds the commands of one App: the built-ins, and whatever registers at run
time (workspace commands) through ``register(spec, handler)``; a built-in's name cannot be taken.
"""

from __future__ import annotations

import difflib
import re
import shlex
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar

H = TypeVar("H")

Kind = str
"""A positional's completion kind: ``path``, ``index``, ``workspace``, ``profile``, ``handle``,
``conversation``, ``uri``, ``url``, ``tool``, ``call``, ``process``, ``model``, ``number``, ``text``."""


class CommandError(ValueError):
    """A slash command that cannot be run as typed; the message says what to do instead."""


@dataclass(frozen=True)
class ToolCall:
    """The typed object of a tool-backed form: the tool and its arguments, by the model's field names
    (validated once, by the model, when the gateway runs the call)."""

    tool_id: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Arg:
    """A positional. ``rest``: it takes every word left (joined with one space, or a list when
    ``words``); ``raw``: the rest of the line as typed (an apostrophe is a word, quotes are kept);
    ``greedy``: once it starts, option-like words are its words too (a command line's argv)."""

    name: str
    metavar: str
    kind: Kind = "text"
    optional: bool = False
    rest: bool = False
    words: bool = False
    raw: bool = False
    greedy: bool = False
    empty_ok: bool = False  # a raw rest that may be empty (its handler says what is missing)
    choices: tuple[str, ...] = ()  # literal values offered by completion (``last``, ``offline``…)
    default: Any = None
    convert: Callable[[str], Any] = str
    suffix: str = ""  # added to a raw value (``/fs write`` writes a final newline)

    def usage(self) -> str:
        return f"[{self.metavar}]" if self.optional else self.metavar

    def value(self, text: str) -> Any:
        if text in self.choices:
            return text
        try:
            return self.convert(text)
        except CommandError:  # a converter that says what is wrong itself
            raise
        except ValueError as exc:
            raise CommandError(f"{self.metavar} is a number, not '{text}'.") from exc


@dataclass(frozen=True)
class Opt:
    """An option: a flag (no ``metavar``: True when given) or one typed value."""

    flags: tuple[str, ...]
    name: str
    metavar: str = ""
    convert: Callable[[str], Any] = str
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    help: str = ""
    shown: bool = True  # in the usage line (every option completes; the usage shows the ones marked)
    wants: str = ""  # what its value is, for "--name takes an index name." (default: from its type)

    def usage(self) -> str:
        return f"[{self.flags[0]} {self.metavar}]" if self.metavar else f"[{self.flags[0]}]"

    def value(self, text: str) -> Any:
        flag = self.flags[0]
        if self.choices and text not in self.choices:
            raise CommandError(f"{flag} is one of {', '.join(self.choices)}.")
        try:
            value = self.convert(text)
        except ValueError as exc:
            raise CommandError(f"{flag} takes a number.") from exc
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            low, high = (int(b) if float(b).is_integer() else b for b in self.bounds)
            raise CommandError(f"{flag} is between {low} and {high}.")
        return value


@dataclass(frozen=True)
class Form:
    """One way to call a command: its sub-command ``words`` (``aliases``: other spellings), then
    positionals and options. ``into(**values)`` makes the typed object (``preset`` values added);
    ``tool``: a tool-backed form (a :class:`ToolCall`, its options from the tool's argument model,
    ``short`` giving a field a short flag shown in the usage)."""

    words: tuple[str, ...]
    args: tuple[Arg, ...] = ()
    opts: tuple[Opt, ...] = ()
    into: Callable[..., Any] | None = None
    preset: tuple[tuple[str, Any], ...] = ()
    aliases: tuple[tuple[str, ...], ...] = ()
    hidden: bool = False
    tool: str = ""
    short: tuple[tuple[str, str], ...] = ()
    summary: str = ""

    def usage(self) -> str:
        shown = [*self.words, *(a.usage() for a in self.args), *(o.usage() for o in self.opts if o.shown)]
        return " ".join(shown)

    def spellings(self) -> list[tuple[str, ...]]:
        return [self.words, *self.aliases]

    def option(self, flag: str) -> Opt | None:
        return next((o for o in self.opts if flag in o.flags), None)

    def make(self, values: dict[str, Any]) -> Any:
        values = {**dict(self.preset), **values}
        if self.tool:
            return ToolCall(self.tool, {k: v for k, v in values.items() if v is not None})
        if self.into is None:
            raise CommandError(f"the form '{' '.join(self.words)}' makes no object")  # a table defect
        return self.into(**values)


@dataclass(frozen=True)
class CommandSpec:
    """A slash command: ``/name``, its forms and its help. ``bare``: the words of the form run when
    nothing follows the name (``("list",)`` shows as ``[list]``); ``bracket``: the usage puts every
    form in one optional bracket (``/serve [start | stop | status]``)."""

    name: str
    summary: str
    forms: tuple[Form, ...]
    handler: str = ""
    bare: tuple[str, ...] | None = None
    bracket: bool = False
    show_bare: bool = True  # False: the bare form is not bracketed in the usage (it is still run)

    @cached_property
    def resolved(self) -> tuple[Form, ...]:
        """The forms, tool-backed ones with their model's options (the models are read here, once)."""
        return tuple(tool_form(form) if form.tool else form for form in self.forms)

    @cached_property
    def usage(self) -> str:
        parts: list[str] = []
        for form in self.resolved:
            if form.hidden:
                continue
            text = form.usage()
            bare = self.show_bare and not self.bracket and not form.args
            if bare and form.words == self.bare:
                text = f"[{text}]"
            parts.append(text)
        body = " | ".join(parts)
        if self.bracket and body:
            body = f"[{body}]"
        return f"/{self.name} {body}".rstrip()


# -- tool-backed forms ---------------------------------------------------------------------------------
def _scalar(annotation: Any) -> tuple[type | None, tuple[str, ...]]:
    """The scalar type of a model field (``T | MISSING`` and ``Annotated`` unwrapped) and its
    ``Literal`` choices; ``None`` for a list or a mapping (not an option)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return str, tuple(str(choice) for choice in typing.get_args(annotation))
    if origin is not None and origin not in (list, dict):  # a union: the one member that is not MISSING/None
        members = [a for a in typing.get_args(annotation) if getattr(a, "__name__", "") not in ("MISSING", "NoneType")]
        return _scalar(members[0]) if len(members) == 1 else (None, ())
    return (annotation, ()) if annotation in (bool, int, float, str) else (None, ())


def tool_form(form: Form) -> Form:
    """``form`` with an option for every scalar field of its tool's argument model that is not a
    positional: ``--max-entries N``; a bool is a flag; a field in ``form.short`` also answers to (and
    shows in the usage as) its short flag."""
    from services.tools.args import ARGS_MODELS  # pydantic: on first use of a tool-backed command only

    model = ARGS_MODELS[form.tool]
    short = dict(form.short)
    taken = {arg.name for arg in form.args} | {name for name, _ in form.preset}
    opts: list[Opt] = []
    for name, info in model.model_fields.items():
        kind, choices = _scalar(info.annotation)
        if name in taken or kind is None:
            continue
        flags = (*((short[name],) if name in short else ()), "--" + name.replace("_", "-"))
        metavar = "" if kind is bool else (name.upper() if kind is str else "N")
        help_text = (info.description or "").split("\n")[0]
        converter: Callable[[str], Any] = kind if kind in (int, float) else str
        opts.append(Opt(flags, name, metavar, converter, None, choices, help_text, shown=name in short))
    return Form(
        form.words, form.args, (*form.opts, *opts), form.into, form.preset, form.aliases, form.hidden, form.tool,
        form.short, form.summary,
    )  # fmt: skip


# -- parsing -----------------------------------------------------------------------------------------------
_WORD = re.compile(r"\s*(\S+)")


def _after_words(text: str, count: int) -> str:
    """``text`` past its first ``count`` whitespace-separated words."""
    end = 0
    for _ in range(count):
        match = _WORD.match(text, end)
        end = match.end() if match else len(text)
    return text[end:]


class _Words:
    """The words of an argument text, read one at a time (shell-style), so that a raw argument can
    take the rest as typed: an apostrophe after the split point is never read as a quote."""

    def __init__(self, text: str) -> None:
        import io

        self.stream = io.StringIO(text)
        self.lexer = shlex.shlex(self.stream, posix=True)
        self.lexer.whitespace_split = True
        self.lexer.commenters = ""
        self.pending: list[str] = []

    def next(self) -> str | None:
        if self.pending:
            return self.pending.pop()
        try:
            token = self.lexer.get_token()
        except ValueError as exc:
            raise CommandError(f"cannot parse the command: {exc}") from exc
        return None if token == self.lexer.eof else token

    def push(self, word: str) -> None:
        self.pending.append(word)

    def rest(self) -> str:
        """What is left, as typed (a word pushed back is put in front)."""
        left = self.stream.read().strip()
        return " ".join([*reversed(self.pending), left]).strip() if self.pending else left


def _positional(arg: Arg, words: _Words, values: dict[str, Any]) -> bool:
    """Read ``arg``; False when nothing is left for it."""
    if arg.raw:
        text = words.rest()
        if text or arg.empty_ok:
            values[arg.name] = text + arg.suffix if text else text
        return bool(text) or arg.empty_ok
    word = words.next()
    if word is None:
        return False
    collected = [word]
    while arg.rest and (more := words.next()) is not None:
        collected.append(more)
    if arg.words:  # a list (``argv``): CMD then ARG… add to the same list
        values[arg.name] = [*values.get(arg.name, []), *collected]
    else:
        values[arg.name] = arg.value(" ".join(collected))
    return True


def _read_options(form: Form, words: _Words, values: dict[str, Any]) -> list[str]:
    """Take the options out of the non-raw words; the other words, in order."""
    plain: list[str] = []
    raw_at = next((i for i, a in enumerate(form.args) if a.raw or a.greedy), len(form.args))
    while len(plain) < raw_at or not any(a.raw or a.greedy for a in form.args):
        word = words.next()
        if word is None:
            break
        option = form.option(word) if word.startswith("-") else None
        if option is None and word.startswith("--"):
            raise CommandError(f"unknown option {word}.")
        if option is None:
            plain.append(word)
            continue
        if not option.metavar:
            values[option.name] = True
            continue
        given = words.next()
        if given is None:
            raise CommandError(f"{option.flags[0]} takes {_wants(option)}.")
        values[option.name] = option.value(given)
    return plain


def _wants(option: Opt) -> str:
    if option.wants:
        return option.wants
    return "a number" if option.convert in (int, float) else f"a value ({option.metavar})"


def parse_form(spec: CommandSpec, form: Form, text: str) -> Any:
    """The typed object of ``form`` from ``text`` (what follows its words); CommandError on a misuse."""
    words = _Words(text)
    values: dict[str, Any] = {}
    plain = _read_options(form, words, values)
    for word in reversed(plain):
        words.push(word)
    for arg in form.args:
        if not _positional(arg, words, values):
            if not arg.optional:
                raise CommandError(f"cannot read '/{spec.name} {' '.join(form.words)}': {arg.metavar} is missing.")
            if arg.default is not None:
                values.setdefault(arg.name, arg.default)
    values = {**{a.name: values.pop(a.name) for a in form.args if a.name in values}, **values}  # typed order
    extra = words.next()
    if extra is not None:
        raise CommandError(f"cannot read '/{spec.name} {(' '.join(form.words) + ' ' + text.strip()).strip()}'.")
    return form.make(values)


def match_form(spec: CommandSpec, text: str) -> tuple[Form, str]:
    """The form ``text`` (what follows ``/name``) calls and the text after its words."""
    typed = [w.lower() for w in text.split()]
    if not typed and spec.bare is not None:
        return next(f for f in spec.resolved if f.words == spec.bare), ""
    candidates = sorted(
        ((len(spelling), form) for form in spec.resolved for spelling in form.spellings()
         if [w.lower() for w in spelling] == typed[: len(spelling)]),
        key=lambda pair: -pair[0],
    )  # fmt: skip
    for count, form in candidates:
        return form, _after_words(text, count)
    raise CommandError(f"cannot read '{f'/{spec.name} {text.strip()}'.strip()}'.")


def split_name(line: str) -> tuple[str, str]:
    """``/name rest…`` → ``(name, rest)``, or CommandError when it is not a command line."""
    text = line.strip()
    if not text.startswith("/") or text == "/":
        raise CommandError("commands start with '/': type /help for the list")
    name, _, rest = text[1:].partition(" ")
    return name.lower(), rest


def unknown(name: str, known: Iterable[str]) -> CommandError:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" Did you mean /{close[0]}?" if close else ""
    return CommandError(f"Unknown command /{name}.{hint} Type /help for the list.")


def parse_line(spec: CommandSpec, rest: str) -> Any:
    """The typed object of ``/name rest`` for ``spec``. A word with an unclosed quote is refused
    before the form is chosen, unless the command reads its text as typed."""
    try:
        shlex.split(rest)
    except ValueError as exc:
        if not any(a.raw for f in spec.resolved for a in f.args):
            raise CommandError(f"cannot parse the command: {exc}") from exc
    form, after = match_form(spec, rest)
    return parse_form(spec, form, after)


# -- completion and the palette ------------------------------------------------------------------------
def complete_spec(
    spec: CommandSpec, done: Sequence[str], partial: str, values: Callable[[Kind, str], list[str]] | None = None
) -> list[str]:
    """Candidates for ``partial`` after ``/name done…``: sub-command words, then options and
    positionals (their literal choices, and what ``values(kind, partial)`` offers for their kind)."""
    lowered = [w.lower() for w in done]
    found: set[str] = set()
    for form in spec.resolved:
        if form.hidden:
            continue
        for spelling in form.spellings():
            head = [w.lower() for w in spelling]
            if lowered[: len(head)] != head[: len(lowered)]:
                continue
            if len(lowered) < len(head):
                found.add(head[len(lowered)])
                continue
            found.update(_after_form(form, lowered[len(head) :], partial, values))
    return sorted(c for c in found if c.lower().startswith(partial.lower()))


def _verbatim(form: Form, taken: int) -> bool:
    """True when the positional after ``taken`` words is text as typed (raw, or a greedy argv)."""
    return any((arg.raw or arg.greedy) and at <= taken for at, arg in enumerate(form.args))


def _after_form(
    form: Form, typed: list[str], partial: str, values: Callable[[Kind, str], list[str]] | None
) -> list[str]:
    """Options and the next positional's candidates once ``form``'s words are typed."""
    taken, expects = 0, None
    for word in typed:
        if expects is not None:
            expects = None
            continue
        option = form.option(word) if word.startswith("-") and not _verbatim(form, taken) else None
        if option is None:
            taken += 1
        elif option.metavar:
            expects = option
    if expects is not None:
        return list(expects.choices)
    if _verbatim(form, taken):
        return []
    if partial.startswith("-"):
        return [flag for option in form.opts for flag in option.flags]
    if taken < len(form.args):
        arg = form.args[taken]
    elif form.args and form.args[-1].rest:
        arg = form.args[-1]
    else:
        return []
    return [*arg.choices, *(values(arg.kind, partial) if values else [])]


def palette_paths(spec: CommandSpec) -> list[tuple[list[str], bool]]:
    """``(words, runnable)`` of every command and sub-command path of ``spec`` (a first positional's
    literal choices included): runnable when nothing more must be typed (what follows is optional)."""
    paths: dict[tuple[str, ...], bool] = {(): spec.bare is not None}

    def add(path: tuple[str, ...], args: tuple[Arg, ...]) -> None:
        whole = all(a.optional for a in args)
        for depth in range(1, len(path)):
            paths.setdefault(path[:depth], False)
        paths[path] = paths.get(path, False) or whole

    for form in spec.resolved:
        if form.hidden:
            continue
        add(form.words, form.args)
        if form.args:
            for choice in form.args[0].choices:
                add((*form.words, choice), form.args[1:])
    return [(list(path), runnable) for path, runnable in paths.items()]


# -- the registry ----------------------------------------------------------------------------------------
@dataclass
class CommandRegistry(Generic[H]):
    """The slash commands of one App: name → spec and handler. Built-ins always win: a later
    registration under a built-in's name is refused; a later one under another's name replaces it."""

    entries: dict[str, tuple[CommandSpec, H]] = field(default_factory=dict)
    builtins: set[str] = field(default_factory=set)

    def register(self, spec: CommandSpec, handler: H, *, builtin: bool = False) -> bool:
        """Add ``spec`` with its handler; False (and nothing changes) when a built-in holds the name."""
        if spec.name in self.builtins and not builtin:
            return False
        self.entries[spec.name] = (spec, handler)
        if builtin:
            self.builtins.add(spec.name)
        return True

    def specs(self) -> list[CommandSpec]:
        return [spec for spec, _ in self.entries.values()]

    def drop_runtime(self) -> None:
        """Forget every command registered at run time (the built-ins stay)."""
        self.entries = {name: entry for name, entry in self.entries.items() if name in self.builtins}

    def parse(self, line: str) -> tuple[CommandSpec, H, Any]:
        """``/name args…`` → its spec, its handler and the typed object; CommandError on a misuse
        (the caller adds the usage)."""
        name, rest = split_name(line)
        entry = self.entries.get(name)
        if entry is None:
            raise unknown(name, self.entries)
        spec, handler = entry
        return spec, handler, parse_line(spec, rest)
