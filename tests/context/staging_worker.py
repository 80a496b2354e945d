"""Child process for the staging crash test: stages a resource slowly until it is killed.

Usage: ``python -m tests.context.staging_worker CONTEXT_ROOT``.  It prints ``STAGED <folder>`` once the
staging folder exists and the first bytes are written, then keeps writing (never finalizing).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from services.context.tree import ContextTree


def main() -> None:
    tree = ContextTree(Path(sys.argv[1]))
    staging = tree.stage("user")
    staging.path.mkdir()
    (staging.path / "part-0.md").write_text("# half\n", encoding="utf-8")
    with open(staging.path / "big.md", "wb") as handle:
        handle.write(b"x" * 4096)
        handle.flush()
        print(f"STAGED {staging.folder.name}", flush=True)
        while True:
            handle.write(b"y" * 4096)
            handle.flush()
            time.sleep(0.01)


if __name__ == "__main__":
    main()
