"""Counting tokens without the model's tokenizer: a documented estimate, corrected by the server.

The estimate is per word and character class, from what BPE / SentencePiece vocabularies of today's
local models (Gemma 3, Llama 3, Qwen 2.5: 128k–262k entries) do with text:

* a run of ASCII letters (a word, with the space before it): 1 token, plus 1/4 for each letter past
  the sixth (long and rare words are cut into pieces), plus 1 at each lower-to-upper case switch
  (``camelCase``, base64);
* a digit: 1 token (Gemma and Llama 3 split numbers into digits or short groups);
* other ASCII (punctuation, brackets, tabs): 0.7 of a token;
* a run of newlines, or of two or more spaces (indentation): 1 token; a single space: none;
* any other character: 0.8 of a token (CJK runs at about one token per character, accented Latin
  text much better).

Checked against Gemma 3's own tokenizer (``/extras/tokenize/count`` of the real server in
``tests/real_model``; ``bench/meter_accuracy.py`` measures the whole request): within 5 % on
English prose and Aries' own conversations, 0–10 % over on Python, 0–8 % under on JSON, 5–7 %
under on hex and UUIDs, 20 % under on base64, German from 7 % under (long compounds) to 25 %
over, Chinese 30 % over. (The earlier
per-letter estimate over-counted plain conversation by 15–25 % and the chat template's markers by
half.) Each message adds :data:`MESSAGE_OVERHEAD` tokens for its chat-template markers (Gemma's
``<start_of_turn>user\n … <end_of_turn>\n``: 5; ChatML and Llama 3 the same), each request
:data:`REQUEST_OVERHEAD`.

The estimate is then *checked against the server*: whenever a reply reports the real prompt size
(``usage.prompt_tokens``, Ollama's ``prompt_eval_count``, or the numbers in a context-overflow
error), :class:`Calibration` compares it with the estimate of that same request and scales later
estimates by the ratio (up at once, down slowly). llama-cpp-python's stream reports no usage: a
local server whose stream counted nothing is asked to count the request afterwards (the same body,
one token out, answered from its prompt cache: ``TurnLoop._count_request``), which calibrates the
same way. Counting is pure string work, about 0.1 ms per thousand characters, memoized per text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.models.base import ChatMessage, ToolSchema

MESSAGE_OVERHEAD = 5
REQUEST_OVERHEAD = 8


def _shape_table() -> bytes:
    """Every byte of UTF-8 text to its class: ASCII lower-case letters ``l``, upper-case ``U``, digits
    ``0``, space `` ``, newline ``n``, other ASCII ``.``, the first byte of any other character ``f``,
    continuation bytes ``c``."""
    table = bytearray(256)
    for code in range(256):
        char = chr(code)
        if code >= 0xC0:
            table[code] = ord("f")
        elif code >= 0x80:
            table[code] = ord("c")
        elif char.isalpha():
            table[code] = ord("U" if char.isupper() else "l")
        else:
            table[code] = ord("0" if char.isdigit() else " " if char == " " else "n" if char == "\n" else ".")
    return bytes(table)


_SHAPE = _shape_table()
_FLAT = bytes(ord("a") if code in b"lU" else ord("-") for code in range(256))  # letters, and the rest
_LONG_WORD = re.compile(rb"[lU]{7,}")
_BREAKS = re.compile(rb"  +|n+")  # indentation and line breaks: a token a run


@lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (see the module docstring); at least 1 for any text."""
    if not text:
        return 0
    shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE)  # bytes: C speed throughout
    words = (b"-" + shape.translate(_FLAT)).count(b"-a")
    longer = sum(len(run) - 6 for run in _LONG_WORD.findall(shape))
    switches = shape.count(b"lU")
    digits, punctuation, foreign = (shape.count(c) for c in (b"0", b".", b"f"))
    breaks = len(_BREAKS.findall(shape))
    total = words + longer / 4 + switches + digits + punctuation * 0.7 + foreign * 0.8 + breaks
    return max(1, int(total + 0.5))


def message_tokens(message: ChatMessage) -> int:
    """One message: its content (trimmed, as Gemma's and Llama 3's templates trim it), its tool calls
    (name and arguments) and the template's markers."""
    total = MESSAGE_OVERHEAD + estimate_tokens(message.content.strip())
    for call in message.tool_calls:
        total += MESSAGE_OVERHEAD + estimate_tokens(call.name) + estimate_tokens(call.raw_arguments)
    return total


def tools_tokens(tools: list[ToolSchema]) -> int:
    """The tool schemas as the server receives them (their JSON)."""
    if not tools:
        return 0
    return estimate_tokens(json.dumps([_tool(schema) for schema in tools], ensure_ascii=False, sort_keys=True))


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {"name": schema.name, "description": schema.description, "parameters": schema.parameters}


@dataclass
class Calibration:
    """``factor`` × estimate ≈ the server's count. Starts at 1; bounded to [0.8, 4]: the estimate
    is within a few per cent on ordinary text, and a server that counts far less (a template that leaves
    the tool schemas out, a server that reports nonsense) must not make Aries send more than that."""

    factor: float = 1.0
    samples: int = 0

    def scale(self, estimate: int) -> int:
        return int(estimate * self.factor + 0.999)

    def observe(self, estimated: int, actual: int) -> None:
        """The server counted ``actual`` tokens for a request estimated at ``estimated`` (unscaled)."""
        if estimated <= 0 or actual <= 0:
            return
        ratio = actual / estimated
        self.samples += 1
        if ratio > self.factor:
            self.factor = ratio  # an under-estimate risks an overflow: follow it at once
        else:
            self.factor = self.factor * 0.8 + ratio * 0.2  # an over-estimate only wastes room
        self.factor = min(4.0, max(0.8, self.factor))


__all__ = [
    "MESSAGE_OVERHEAD",
    "REQUEST_OVERHEAD",
    "Calibration",
    "estimate_tokens",
    "message_tokens",
    "tools_tokens",
]
