"""Run Aries CLI commands in one process against an imported workspace and report what happened.

``python -m tests.trust.probe SPEC.json`` reads ``{"commands": [[argv...], ...], "stdin": {...}}`` and
prints one JSON line per command: ``{"argv", "code", "stdout", "stderr", "traceback"}``. A command that
raises out of ``app.cli.main`` (which a user would see as a Python traceback) is caught here and
reported with ``traceback: true``. One process per bundle keeps the hostile-bundle suite fast while
every command still runs the real CLI code path (MCP servers start as real subprocesses, models are
contacted over real sockets, stores are opened for real).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback


def run(argv: list[str], stdin: str | None) -> dict[str, object]:
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    crashed = False
    code: object = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        crashed = True
        err.write(traceback.format_exc())
    finally:
        sys.stdin = saved
    text = out.getvalue() + err.getvalue()
    return {
        "argv": argv,
        "code": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "traceback": crashed or "Traceback (most recent call last)" in text,
    }


def main() -> int:
    spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
    stdins = spec.get("stdin") or {}
    for index, argv in enumerate(spec["commands"]):
        print(json.dumps(run(argv, stdins.get(str(index)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
