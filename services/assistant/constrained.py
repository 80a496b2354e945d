"""Valid arguments by construction: a second pass for the arguments of a call the model started.

Constrained decoding (llama.cpp's ``response_format`` with a JSON Schema, Ollama's ``format``) makes
a server write only text that a schema accepts. Aries uses it **only once a call is started**: the
first pass of every step is free (the model may answer in prose, or call a tool); when its answer
starts a call to an offered tool whose arguments are not a JSON object — a native ``tool_calls``
entry with broken JSON, or a call written as text that names a known tool with malformed arguments —
a second request (no tools, the same messages, then the started call and one instruction) asks for
the arguments alone under that tool's argument schema. What comes back is handed to the gateway like
any arguments (checked against the schema, the policy, approval, audit); if the second pass fails too,
the call goes on with its broken arguments and the model gets the structured error, as before.

A prose answer is never turned into JSON: no first pass carries a constraint for tool arguments.
A profile's ``output_schema`` (structured output, :mod:`services.assistant.structured`) is the other
use: the answer itself must be JSON, so it is constrained from the first pass.

Whether a server constrains is a capability of the provider and model
(``settings.models.<name>.constrained``): on by default for Ollama and OpenAI-compatible servers
(llama.cpp's server, vLLM, LM Studio), off for the rest (the offline provider); false turns it off.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.models.base import ChatMessage, ModelOptions, ModelProvider, ToolCall

CONSTRAINING_PROVIDERS = frozenset({"ollama", "openai"})
MAX_ARGUMENT_TOKENS = 512  # the second pass writes one JSON object: arguments, not an essay


def constrains(provider: ModelProvider, setting: bool | None) -> bool:
    """Whether ``provider`` is asked to constrain its output (the model's ``constrained`` setting, else
    the provider's kind)."""
    if setting is not None:
        return setting
    return provider.name in CONSTRAINING_PROVIDERS


_NAMED = re.compile(r'"name"\s*:\s*"(?P<name>[A-Za-z0-9_.:-]{1,128})"')


def started_name(raw: str) -> str | None:
    """The tool a call written as text names when the rest of it cannot be read as JSON
    (``{"name": "read_text", "arguments": {"path": …`` cut short): the first ``"name": "…"``."""
    match = _NAMED.search(raw)
    return match.group("name") if match else None


def instruction(tool_name: str, error: str) -> str:
    return (
        f"Your call to the tool {tool_name} could not be read ({error}). Write its arguments again: only one "
        "JSON object that satisfies the tool's parameter schema, and nothing else."
    )


@dataclass(frozen=True)
class SecondPass:
    """What the second pass for one call came to."""

    arguments: dict[str, Any] | None  # None: it failed too (``error`` says why)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def second_pass(
    provider: ModelProvider,
    messages: list[ChatMessage],
    call: ToolCall,
    schema: dict[str, Any],
    options: ModelOptions,
    error: str,
) -> SecondPass:
    """Ask ``provider`` once more for the arguments of ``call`` (a provider-side tool name), constrained
    by ``schema``: the request is ``messages`` (what the step sent), the call as the model started it,
    and :func:`instruction`; no tools are offered."""
    from services.errors import AriesError
    from services.models.base import ChatMessage, ModelRequest, TextDelta, Usage, parse_arguments

    started = ChatMessage(role="assistant", content=f"I call the tool {call.name} with: {call.raw_arguments}")
    asked = ChatMessage(role="user", content=instruction(call.name, error))
    limit = MAX_ARGUMENT_TOKENS if options.max_tokens is None else min(options.max_tokens, MAX_ARGUMENT_TOKENS)
    request = ModelRequest(
        messages=[*messages, started, asked],
        options=dataclasses.replace(options, tool_choice=None, max_tokens=limit),
        output_schema=schema,
    )
    text, prompt, completion = "", 0, 0
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, Usage):
                prompt += event.prompt_tokens
                completion += event.completion_tokens
    except AriesError as exc:
        return SecondPass(None, f"the second pass failed: {exc.message}", prompt, completion)
    arguments, why = parse_arguments(text.strip())
    if why is not None:
        return SecondPass(None, f"the second pass did not give them either ({why})", prompt, completion)
    return SecondPass(arguments, None, prompt, completion)


def repaired(call: ToolCall, arguments: dict[str, Any]) -> ToolCall:
    """``call`` with the arguments the second pass wrote."""
    return dataclasses.replace(call, arguments=arguments, raw_arguments=json.dumps(arguments), arguments_error=None)


__all__ = [
    "CONSTRAINING_PROVIDERS",
    "SecondPass",
    "constrains",
    "instruction",
    "repaired",
    "second_pass",
    "started_name",
]
