"""A small MCP server over stdio that misbehaves on request (hand-written on purpose: the SDK's
server would not send garbage).  Tools:

- ``echo {text}``: answers ``text`` (annotated read-only);
- ``wipe``: answers "wiped" (annotated ``destructiveHint: true``);
- ``hang``: never answers;
- ``garbage``: writes a line that is not JSON, then a result whose ``content`` is not a list;
- ``huge {bytes}``: answers that many bytes of text;
- ``crash``: exits with status 3 in the middle of the call;
- ``error``: answers ``isError: true``.

``--child`` starts a grandchild (``sleep 300``) first, to check that stopping the server leaves
no orphan.  ``--pidfile PATH`` writes ``server_pid child_pid`` there once it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "wipe",
        "description": "Pretend to wipe something.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": False, "destructiveHint": True},
    },
    {"name": "hang", "description": "Never answers.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "garbage", "description": "Malformed output.", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "huge",
        "description": "A large answer.",
        "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 1}}},
    },
    {"name": "crash", "description": "Exits mid-call.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "error", "description": "Reports a failure.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "bad schema", "description": "An invalid name.", "inputSchema": {"type": "object"}},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(request_id: object, value: str, *, is_error: bool = False) -> None:
    result: dict[str, object] = {"content": [{"type": "text", "text": value}]}
    if is_error:
        result["isError"] = True
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def call(request_id: object, name: str, args: dict[str, object]) -> None:
    if name == "echo":
        text(request_id, str(args.get("text", "")))
    elif name == "wipe":
        text(request_id, "wiped")
    elif name == "hang":
        time.sleep(3600)
    elif name == "garbage":
        sys.stdout.write("this is not JSON-RPC {\n")
        sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list", "isError": 7}})
    elif name == "huge":
        text(request_id, "x" * int(str(args.get("bytes", 5_000_000))))
    elif name == "crash":
        os._exit(3)
    elif name == "error":
        text(request_id, "the thing failed: \x1b[31mred\x1b[0m", is_error=True)
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def main() -> None:
    child = None
    if "--child" in sys.argv:
        child = subprocess.Popen(["sleep", "300"])
    if "--pidfile" in sys.argv:
        path = sys.argv[sys.argv.index("--pidfile") + 1]
        with open(path + ".tmp", "w") as handle:
            handle.write(f"{os.getpid()} {child.pid if child else 0}\n")
        os.replace(path + ".tmp", path)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            version = message.get("params", {}).get("protocolVersion", "2025-06-18")
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "misbehaving", "version": "0.1"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message.get("params", {})
            call(request_id, params.get("name", ""), params.get("arguments") or {})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
