"""Tool calls written as text, within one turn: whether they are read, what the turn's untrusted input
holds, and the calls handed to the gateway (the turn loop's side of :mod:`services.assistant.text_calls`).

Reading is decided per model by ``settings.models.<name>.text_tool_calls`` (``true`` / ``false``);
unset, it is on until the model returns a native tool call in the conversation (an earlier turn's
answer records how many it made, ``usage.native_tool_calls``), and off from then on — a model that
speaks the API's ``tool_calls`` has no need of the text path, and a text call from it is more likely a
quotation. Only providers that take tools (not ``offline``) ever have calls read.

The untrusted input of a turn is what the model was given as data: the retrieved passages, the text of
attached files, and every tool result of the turn so far. A call the model writes that appears there is
refused (:class:`~services.assistant.text_calls.Untrusted`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.assistant.text_calls import MAX_TEXT_RETRIES, TextCallError, TextCalls, read_text_calls

if TYPE_CHECKING:
    from services.models.base import ToolCall
    from services.models.toolnames import ToolNameMap
    from services.session.session import Session


def text_calls_setting(session: Session, label: str) -> bool | None:
    """``settings.models.<label or model name>.text_tool_calls`` of the workspace (None: unset)."""
    from services.assistant.turn_window import model_settings

    value = getattr(model_settings(session.workspace, label), "text_tool_calls", None)
    return value if isinstance(value, bool) else None


def native_calls_seen(dialogue: Iterable[dict[str, Any]], label: str) -> bool:
    """Whether an earlier answer of model ``label`` in this conversation came with native tool calls."""
    for entry in dialogue:
        usage = entry.get("usage") if entry.get("role") == "assistant" and entry.get("model") == label else None
        if isinstance(usage, dict) and usage.get("native_tool_calls"):
            return True
    return False


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value (a tool result's data and error)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


@dataclass
class TextCallState:
    """One turn's text-call reading: on or off, the untrusted input so far, the retries used."""

    setting: bool | None  # the model's setting (None: automatic)
    on: bool
    untrusted: list[str] = field(default_factory=list)
    retries: int = 0  # steps whose errors were sent back to the model

    @classmethod
    def open(
        cls, session: Session, label: str, *, takes_tools: bool, hits: Iterable[dict[str, Any]], message: str
    ) -> TextCallState:
        """The state at the start of a turn for model ``label`` (``message``: what was sent, with any
        attached files)."""
        from services.text.attached import attached_files

        setting = text_calls_setting(session, label)
        on = takes_tools and (
            setting if setting is not None else not native_calls_seen(session.conversation.dialogue(), label)
        )
        untrusted = [str(hit.get("text") or "") for hit in hits]
        untrusted.extend(file.text for file in attached_files(message))
        return cls(setting, on, untrusted)

    def saw_native(self) -> None:
        """The model returned native tool calls: an automatic setting stops reading text for the turn."""
        if self.setting is None:
            self.on = False

    def add_result(self, result: dict[str, Any]) -> None:
        """A tool result the model is sent becomes untrusted input of the turn."""
        hooked = (result.get("meta") or {}).get("hook_context")  # an after hook's output (services.tools.hooks)
        shown = {"data": result.get("data"), "error": result.get("error"), "hooks": hooked}
        self.untrusted.extend(s for s in _strings(shown) if s)

    def read(self, text: str, names: ToolNameMap | None, tool_ids: Callable[[], Iterable[str]]) -> TextCalls | None:
        """The trailing call block of ``text`` (None: reading is off, or the text ends in no call);
        ``tool_ids`` lists the registered tools (asked only when reading is on)."""
        if not self.on:
            return None
        read = read_text_calls(text, known_names(names, tool_ids()), self.untrusted)
        return read if read.found else None

    def errors_sent(self, read: TextCalls) -> bool:
        """Whether this block's errors go back to the model (a retry is left), counting the retry."""
        if not read.errors or self.retries >= MAX_TEXT_RETRIES:
            return False
        self.retries += 1
        return True


def known_names(names: ToolNameMap | None, tool_ids: Iterable[str]) -> set[str]:
    """The names a text call may use: those offered, the provider names of every registered tool (a
    tool not offered is decided by the gateway like any call) and the tool ids themselves."""
    from services.models.toolnames import ToolNameMap

    ids = list(tool_ids)
    known = {name for _, name in ToolNameMap(ids).items()} | set(ids)
    if names is not None:
        known |= {name for _, name in names.items()}
    return known


def text_call_id(step: int, position: int) -> str:
    """The id a text call is given, unique in its turn (nine letters and digits in all but very long
    turns: what the strictest chat templates accept)."""
    return f"text{step:03d}{position:02d}"


def as_tool_calls(
    read: TextCalls, step: int, *, with_errors: bool
) -> tuple[tuple[ToolCall, ...], dict[str, TextCallError]]:
    """The block's calls as ``ToolCall``s, in the order written; with ``with_errors``, its errors too
    (each answered with its structured error instead of running), returned by id."""
    from services.models.base import ToolCall

    calls: list[tuple[int, ToolCall]] = [
        (c.position, ToolCall(text_call_id(step, c.position), c.name, dict(c.arguments), json.dumps(c.arguments)))
        for c in read.calls
    ]
    refused: dict[str, TextCallError] = {}
    if with_errors:
        for error in read.errors:
            call_id = text_call_id(step, error.position)
            refused[call_id] = error
            calls.append((error.position, ToolCall(call_id, error.name or "invalid_call", {}, error.raw)))
    return tuple(call for _, call in sorted(calls, key=lambda pair: pair[0])), refused


def refused_notice(read: TextCalls, sent: bool) -> tuple[str, str]:
    """``(text, level)`` of the notice for a block's errors: what was refused and what happens next."""
    lines = [f"{error.name or '(no tool name)'}: {error.message}" for error in read.errors]
    then = (
        "the model was sent the error to correct it"
        if sent
        else f"not run, and no retry left ({MAX_TEXT_RETRIES} per turn): the text stays part of the answer"
    )
    count = len(read.errors)
    head = f"{count} tool call{'s' if count != 1 else ''} written as text ({read.format}) not run; {then}:"
    level = "warning" if any(error.kind == "quoted" for error in read.errors) else "info"
    return "\n".join([head, *lines]), level


__all__ = [
    "TextCallState",
    "as_tool_calls",
    "known_names",
    "native_calls_seen",
    "refused_notice",
    "text_call_id",
    "text_calls_setting",
]
