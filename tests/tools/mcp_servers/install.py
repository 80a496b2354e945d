"""Install the npm MCP servers the tests use into ``tests/tools/mcp_servers/node_modules`` (git
ignores it), once: ``npm ci`` from the committed lock file, under a lock so that parallel test
workers install it only once.  ``.ci/run`` calls this before the suite; the tests call it too.

    python tests/tools/mcp_servers/install.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILESYSTEM_JS = HERE / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


def install() -> Path:
    """The filesystem server's entry point, installed if it is not there yet."""
    from filelock import FileLock

    if FILESYSTEM_JS.is_file():
        return FILESYSTEM_JS
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH: cannot install @modelcontextprotocol/server-filesystem")
    with FileLock(str(HERE / ".install.lock")):
        if not FILESYSTEM_JS.is_file():
            command = "ci" if (HERE / "package-lock.json").is_file() else "install"
            subprocess.run(
                [npm, command, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                cwd=HERE,
                check=True,
                timeout=600,
            )
    if not FILESYSTEM_JS.is_file():
        raise RuntimeError(f"npm {command} did not install {FILESYSTEM_JS}")
    return FILESYSTEM_JS


if __name__ == "__main__":
    print(install())
    sys.exit(0)
