"""Child process for the crash test: appends and registers until it is killed.

It prints ``T <message_id> <content>`` after each transcript append returns and
``A <sha256> <name>`` after each artifact is registered: those are the acknowledged writes.
"""

import os
import sys

from services.workspace.manager import WorkspaceManager


def main() -> None:
    name, round_id = sys.argv[1], sys.argv[2]
    workspace, _ = WorkspaceManager().open(name)
    transcript = workspace.latest_transcript()
    registry = workspace.artifacts
    out = sys.stdout
    i = 0
    while True:
        content = f"r{round_id}-m{i}-" + "x" * (i % 97)
        entry = transcript.append("user", content)
        out.write(f"T {entry['message_id']} {content}\n")
        out.flush()
        payload = os.urandom(64 + (i * 131) % 4096)
        artifact, _ = registry.add_bytes(payload, f"r{round_id}-a{i}.bin", provenance={"kind": "crash-test"})
        out.write(f"A {artifact.hash} {artifact.name}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    main()
