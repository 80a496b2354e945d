"""Counting tokens without the model's tokenizer: a documented estimate, corrected by the server.

The estimate is per character class, from what BPE / SentencePiece vocabularies do with text:

* an ASCII letter, space or newline: 1/4 of a token (English prose and code run at about four
  characters a token; the space before a word usually merges into the word's token);
* a digit: 1 token (Gemma and Llama 3 split numbers into digits or short groups);
* other ASCII (punctuation, brackets, tabs): 0.6 of a token;
* any other character: 0.8 of a token (CJK runs at about one token per character, accented Latin
  text much better);
* and 0.75 more at every switch between a letter and a digit (hex, UUIDs and ids are cut there,
  nearly a token a character).

Checked against Gemma 3's own tokenizer (``/extras/tokenize/count`` of the real server in
``tests/real_model``): it over-counts English prose, Python, JSON, German and Chinese by 10–19 %,
hex and UUIDs by 5–27 %, matches Aries' own transcripts, and under-counts base64 by about 25 % and
runs of mixed whitespace by up to 45 %. Each message adds :data:`MESSAGE_OVERHEAD` tokens for its
chat-template markers, each request :data:`REQUEST_OVERHEAD`.

The estimate is then *checked against the server*: whenever a reply reports the real prompt size
(``usage.prompt_tokens``, Ollama's ``prompt_eval_count``, or the numbers in a context-overflow
error), :class:`Calibration` compares it with the estimate of that same request and scales later
estimates by the ratio (up at once, down slowly). Counting is pure string work: a few
microseconds per thousand characters, memoized per text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.models.base import ChatMessage, ToolSchema

MESSAGE_OVERHEAD = 8
REQUEST_OVERHEAD = 16


def _shape_table() -> bytes:
    """Every byte of UTF-8 text to its class: ASCII letters ``a``, digits ``0``, space and newline
    `` ``, other ASCII ``.``, the first byte of any other character ``f``, continuation bytes ``c``."""
    table = bytearray(256)
    for code in range(256):
        char = chr(code)
        if code >= 0xC0:
            table[code] = ord("f")
        elif code >= 0x80:
            table[code] = ord("c")
        else:
            table[code] = ord("a" if char.isalpha() else "0" if char.isdigit() else " " if char in " \n" else ".")
    return bytes(table)


_SHAPE = _shape_table()


@lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (see the module docstring); at least 1 for any text."""
    if not text:
        return 0
    shape = text.encode("utf-8", "surrogatepass").translate(_SHAPE)  # bytes: C speed throughout
    letters, digits, spaces, punctuation, foreign = (shape.count(c) for c in (b"a", b"0", b" ", b".", b"f"))
    switches = shape.count(b"0a") + shape.count(b"a0")  # hex, ids, base64: a token at nearly every switch
    return int((letters + spaces) * 0.25 + digits + punctuation * 0.6 + foreign * 0.8 + switches * 0.75) + 1


def message_tokens(message: ChatMessage) -> int:
    """One message: its content, its tool calls (name and arguments) and the template's markers."""
    total = MESSAGE_OVERHEAD + estimate_tokens(message.content)
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
    over-counts ordinary text by 10–17 %, and a server that counts far less (a template that leaves
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
