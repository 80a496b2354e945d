"""The constrained second pass (services/assistant/constrained.py) against the real engine
(llama-cpp-python's server, Gemma 3 270M): asked for the arguments of a started ``read_text`` call
with ``{"type": "json_object", "schema": …}`` (``settings.models.<name>.schema_format``), the model
can only write a JSON object that the tool's schema accepts; the ``json_schema`` form, which this
server refuses, fails with one line and no traceback."""

from __future__ import annotations

import pytest

from services.assistant.constrained import second_pass
from services.assistant.loop import offered_schema
from services.models.base import ChatMessage, ModelOptions, ToolCall
from services.models.config import make_provider, resolve_model
from services.tools.builtin import default_registry
from tests.real_model.llama_server import LlamaServer

pytestmark = pytest.mark.timeout(600)


async def test_the_second_pass_writes_arguments_the_schema_accepts(llama_server: LlamaServer) -> None:
    from jsonschema.validators import validator_for

    registry = default_registry()
    schema = offered_schema(registry.get("builtin:fs:read_text").input_schema)
    call = ToolCall("c1", "builtin__fs__read_text", {}, '{"path": "notes.txt"', "not JSON")
    asked = [ChatMessage("user", "Read the file notes.txt")]
    provider = make_provider(resolve_model(None, llama_server.env("gemma")))
    try:
        options = ModelOptions(max_tokens=128, temperature=0, schema_format="json_object")
        done = await second_pass(provider, asked, call, schema, options, "arguments are not valid JSON")
        refused = await second_pass(
            provider, asked, call, schema, ModelOptions(max_tokens=16, schema_format="json_schema"), "not JSON"
        )
    finally:
        await provider.aclose()
    assert done.arguments is not None, done.error
    assert list(validator_for(schema)(schema).iter_errors(done.arguments)) == []
    registry.validate("builtin:fs:read_text", done.arguments)  # what the gateway checks
    assert refused.arguments is None and refused.error is not None and "\n" not in refused.error
