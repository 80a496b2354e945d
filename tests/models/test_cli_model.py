"""``aries model list`` as a user runs it: a subprocess against the scripted servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.models.servers import ScriptedServer
from tests.models.test_ollama import free_port

REPO = Path(__file__).resolve().parents[2]


def aries(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("ARIES_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL")}
    base.pop("OPENAI_API_KEY", None)
    full = {**base, "ARIES_HOME": str(home), "PYTHONPATH": str(REPO), **env}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
    )


def test_lists_every_provider_and_the_model_in_use(
    aries_home: Path, ollama_server: ScriptedServer, openai_server: ScriptedServer
) -> None:
    result = aries(
        "model",
        "list",
        home=aries_home,
        OLLAMA_HOST=ollama_server.url.removeprefix("http://"),
        OPENAI_BASE_URL=openai_server.base_url,
        OPENAI_API_KEY="sk-from-env",
        ARIES_MODEL="ollama:llama3.2:3b",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "offline: offline",
        f"ollama at {ollama_server.url}: llama3.2:3b, qwen2.5:7b",
        f"openai at {openai_server.base_url}: llama-3, qwen2.5",
        "in use: ollama:llama3.2:3b (from ARIES_MODEL)",
    ]
    assert result.stderr == ""
    assert openai_server.requests[0].headers["Authorization"] == "Bearer sk-from-env"
    assert [r.path for r in ollama_server.requests] == ["/api/tags"]


def test_json_and_the_workspace_setting(aries_home: Path, ollama_server: ScriptedServer) -> None:
    assert aries("workspace", "new", "demo", home=aries_home).returncode == 0
    meta = aries_home / "workspaces" / "demo" / "workspace.yaml"
    meta.write_text(meta.read_text().replace("model: offline", "model: ollama:mistral"))
    result = aries("-w", "demo", "model", "list", "--json", home=aries_home, OLLAMA_HOST=ollama_server.url)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["active"] == {
        "provider": "ollama",
        "model": "mistral",
        "label": "ollama:mistral",
        "source": "workspace",
    }
    assert data["providers"] == [
        {"provider": "offline", "url": None, "models": ["offline"], "error": None},
        {"provider": "ollama", "url": ollama_server.url, "models": ["llama3.2:3b", "qwen2.5:7b"], "error": None},
    ]
    human = aries("-w", "demo", "model", "list", home=aries_home, OLLAMA_HOST=ollama_server.url)
    assert human.stdout.splitlines()[-1] == "in use: ollama:mistral (from the workspace); ollama does not list mistral"


def test_nothing_listening_gives_one_clean_line_and_exit_0(aries_home: Path) -> None:
    port = free_port()
    result = aries(
        "model", "list", home=aries_home, OLLAMA_HOST=f"127.0.0.1:{port}", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "offline: offline",
        f"ollama at http://127.0.0.1:{port}: not reachable (connection refused)",
        f"openai at http://127.0.0.1:{port}/v1: not reachable (connection refused)",
        "in use: offline (nothing configured)",
    ]
    assert result.stderr == ""


def test_a_bad_model_setting_is_one_line_after_the_listing(aries_home: Path) -> None:
    result = aries("model", "list", home=aries_home, ARIES_MODEL="gpt:4", OLLAMA_HOST=f"127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert result.stdout.splitlines()[0] == "offline: offline"
    assert result.stderr.splitlines() == [
        "aries: ARIES_MODEL=gpt:4: unknown model provider 'gpt' in 'gpt:4' (known: offline, ollama, openai)"
    ]
