"""Child process for the commit crash tests (run with ``ARIES_CONTEXT_COMMIT_FAULT`` set or not).

``commit ROOT SESSION``: commit the session once (the fault hook kills it at the named step).
``loop ROOT SESSION``: append and commit until killed, printing ``A <index> <content>`` after each
acknowledged append and ``C <n>`` after each commit returns.
"""

import sys
from pathlib import Path

from services.context.sessions import SessionStore

CLOCK = "2026-01-01T09:00:00.000Z"


def main() -> None:
    mode, root, session_id = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    session = SessionStore(root, clock=lambda: CLOCK).load(session_id)
    if mode == "commit":
        session.commit()
        print("committed", flush=True)
        return
    i = 0
    while True:
        for j in range(3):
            content = f"I prefer option {i}-{j}. TODO: ship part {i}-{j}."
            message = session.append("user" if j != 1 else "tool", content, tool_name="probe" if j == 1 else None)
            print(f"A {message.index} {content}", flush=True)
        report = session.commit()
        print(f"C {report.archived}", flush=True)
        i += 1


if __name__ == "__main__":
    main()
