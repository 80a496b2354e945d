"""Which model answers: the resolution table, typed errors, make_provider, probe_ollama, imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from services.errors import ConfigError
from services.models import ModelMissing, UnknownProvider, make_provider, probe_ollama, resolve_model
from services.models.offline import OfflineProvider
from services.models.ollama import OllamaProvider
from services.models.openai_compat import OpenAICompatProvider
from tests.models.servers import ScriptedServer
from tests.models.test_ollama import free_port

OPENAI = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1/"}


@pytest.mark.parametrize(
    ("setting", "env", "expected"),
    [
        (None, {}, ("offline", "offline", "default", None)),
        ("", {"ARIES_MODEL": ""}, ("offline", "offline", "default", None)),
        ("offline", {}, ("offline", "offline", "workspace", None)),
        ("ollama:llama3.2", {}, ("ollama", "llama3.2", "workspace", "http://127.0.0.1:11434")),
        (
            "offline",
            {"ARIES_MODEL": "ollama:llama3.2:3b"},
            ("ollama", "llama3.2:3b", "ARIES_MODEL", "http://127.0.0.1:11434"),
        ),
        (
            None,
            {"ARIES_MODEL": " Ollama:qwen2.5 ", "OLLAMA_HOST": "gpu:9000"},
            ("ollama", "qwen2.5", "ARIES_MODEL", "http://gpu:9000"),
        ),
        (
            None,
            {"ARIES_MODEL": "openai:qwen2.5", **OPENAI},
            ("openai", "qwen2.5", "ARIES_MODEL", "http://127.0.0.1:8080/v1"),
        ),
        ("openai:org/model:q4", OPENAI, ("openai", "org/model:q4", "workspace", "http://127.0.0.1:8080/v1")),
    ],
)
def test_resolution_table(setting: str | None, env: dict[str, str], expected: tuple[str, str, str, str | None]) -> None:
    config = resolve_model(setting, env)
    assert (config.provider, config.model, config.source, config.base_url) == expected


@pytest.mark.parametrize(
    ("setting", "env", "error", "fragment"),
    [
        (None, {"ARIES_MODEL": "gpt:4"}, UnknownProvider, "ARIES_MODEL=gpt:4: unknown model provider 'gpt'"),
        ("llama3.2", {}, UnknownProvider, "workspace setting model: unknown model provider 'llama3.2'"),
        (None, {"ARIES_MODEL": "ollama"}, ModelMissing, "names no model; write ollama:MODEL"),
        (None, {"ARIES_MODEL": "openai: "}, ModelMissing, "names no model"),
        (None, {"ARIES_MODEL": "openai:qwen2.5"}, ConfigError, "OPENAI_BASE_URL is not set"),
        (None, {"ARIES_MODEL": "openai:m", "OPENAI_BASE_URL": "ftp://x/v1"}, ConfigError, "is not an http(s) URL"),
        (None, {"ARIES_MODEL": "openai:m", "OPENAI_BASE_URL": "http://h:99999"}, ConfigError, "is not an http(s) URL"),
        (None, {"ARIES_MODEL": "ollama:m", "OLLAMA_HOST": "ftp://h"}, ConfigError, "scheme must be http or https"),
        (42, {}, ConfigError, "expected provider:model"),
    ],
)
def test_bad_values_are_typed_one_line_errors(
    setting: object, env: dict[str, str], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as caught:
        resolve_model(setting, env)  # type: ignore[arg-type]
    assert isinstance(caught.value, ConfigError) and caught.value.exit_code == 2
    assert fragment in caught.value.message and "\n" not in caught.value.message


def test_the_api_key_comes_from_the_environment_and_is_never_shown() -> None:
    config = resolve_model(None, {"ARIES_MODEL": "openai:m", "OPENAI_API_KEY": "sk-hidden", **OPENAI})
    assert config.api_key == "sk-hidden" and "sk-hidden" not in repr(config)
    provider = make_provider(config)
    assert "sk-hidden" not in repr(provider) and "sk-hidden" not in repr(vars(provider).get("base_url"))


def test_make_provider_builds_each_kind() -> None:
    assert isinstance(make_provider(resolve_model(None, {})), OfflineProvider)
    ollama = make_provider(resolve_model("ollama:llama3.2", {"OLLAMA_HOST": "127.0.0.1:1"}))
    assert isinstance(ollama, OllamaProvider) and ollama.base_url == "http://127.0.0.1:1" and ollama.model == "llama3.2"
    openai = make_provider(resolve_model("openai:qwen2.5", OPENAI))
    assert isinstance(openai, OpenAICompatProvider) and openai.base_url == "http://127.0.0.1:8080/v1"
    assert resolve_model("ollama:llama3.2", {}).label == "ollama:llama3.2"
    assert resolve_model(None, {}).label == "offline"


async def test_probe_ollama_lists_models_or_says_none(ollama_server: ScriptedServer) -> None:
    assert await probe_ollama(ollama_server.url) == ["llama3.2:3b", "qwen2.5:7b"]
    host = ollama_server.url.removeprefix("http://")
    assert await probe_ollama(host) == ["llama3.2:3b", "qwen2.5:7b"]
    assert await probe_ollama(f"127.0.0.1:{free_port()}") is None
    assert await probe_ollama("ftp://nope") is None


def test_importing_the_models_package_loads_no_http_library() -> None:
    code = (
        "import sys, json, services.models, services.models.config, services.models.ollama, "
        "services.models.openai_compat, services.models.offline\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'textual', 'yarl'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == []
