"""Gateway overhead: a governed call (schema + policy + audit + dispatch) vs the bare tool function.

    .venv/bin/python bench/gateway.py [--iterations 2000] [--tool read_text|list_dir] [--transcript]

Both paths run in the same process on the same small files, interleaved, after a warm-up.
"Direct" calls the tool implementation with a capability minted the way the gateway mints it
(the only way to call it at all) and no policy, approval, audit or result wrapping; "gateway"
is ``await gateway.execute(...)``, which also runs the sync tool in a worker thread.  Prints
the median per-call times, the median overhead in ms (target <= 2 ms) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_MS = 2.0


async def _measure(iterations: int, tool_name: str, with_transcript: bool) -> dict[str, Any]:
    from services.policy import parse_policy
    from services.tools.gateway import ToolGateway
    from services.tools.registry import ToolContext, issue_capability, revoke_capability
    from services.workspace.manager import Workspace

    with tempfile.TemporaryDirectory(prefix="aries-bench-") as tmp:
        workspace = Workspace(Path(tmp) / "ws", "bench")
        workspace.ensure_layout()
        files = workspace.root / "files"
        files.mkdir()
        for i in range(20):
            (files / f"f{i:02d}.txt").write_text(f"line {i}\n" * 50, encoding="utf-8")
        policy = parse_policy(
            "version: 1\nmode: guide\nproviders: {builtin: {enabled: true}}\ntool_classes: {fs: enabled}\n"
            "filesystem: {allowed_roots: ['${workspace}'], deny: [{id: env, glob: '**/.env'}]}\n",
            source="<bench>",
        )
        tool_id = f"builtin:fs:{tool_name}"
        args: dict[str, Any] = {"path": "files/f07.txt"} if tool_name == "read_text" else {"path": "files"}
        transcript = workspace.new_transcript() if with_transcript else None
        with ToolGateway(workspace, policy=policy) as gateway:
            spec = gateway.registry.get(tool_id)

            def direct() -> None:
                ctx = ToolContext("bench", tool_id, gateway.bound, workspace, None)
                cap = issue_capability(tool_id, "bench")
                try:
                    spec.handler(cap, ctx, args)
                finally:
                    revoke_capability(cap)

            async def governed() -> None:
                result = await gateway.execute(tool_id, args, transcript=transcript)
                if not result.ok:
                    raise SystemExit(f"gateway call failed: {result.to_dict()}")

            for _ in range(min(200, iterations)):  # warm-up: imports, caches, sqlite pages
                direct()
                await governed()
            direct_times: list[float] = []
            gateway_times: list[float] = []
            for _ in range(iterations):
                t0 = time.perf_counter()
                direct()
                t1 = time.perf_counter()
                await governed()
                t2 = time.perf_counter()
                direct_times.append((t1 - t0) * 1000)
                gateway_times.append((t2 - t1) * 1000)
    direct_ms = statistics.median(direct_times)
    gateway_ms = statistics.median(gateway_times)
    overheads = sorted(g - d for g, d in zip(gateway_times, direct_times, strict=True))
    return {
        "tool": tool_id,
        "iterations": iterations,
        "transcript": with_transcript,
        "direct_median_ms": round(direct_ms, 4),
        "gateway_median_ms": round(gateway_ms, 4),
        "overhead_median_ms": round(statistics.median(overheads), 4),
        "overhead_p90_ms": round(overheads[int(len(overheads) * 0.9)], 4),
        "ratio": round(gateway_ms / direct_ms, 2) if direct_ms else float("inf"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--tool", choices=("read_text", "list_dir"), default="read_text")
    parser.add_argument("--transcript", action="store_true", help="also append transcript entries (fsync each)")
    options = parser.parse_args(argv)
    stats = asyncio.run(_measure(options.iterations, options.tool, options.transcript))
    for key, value in stats.items():
        print(f"{key:>20}: {value}")
    verdict = "within" if stats["overhead_median_ms"] <= TARGET_MS else "OVER"
    print(
        f"median gateway overhead {stats['overhead_median_ms']:.3f} ms per call ({verdict} the {TARGET_MS} ms "
        f"target), ratio {stats['ratio']}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
