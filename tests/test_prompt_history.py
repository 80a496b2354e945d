"""The workspace's prompt history: deduplicated (a prompt sent again moves to the end), capped,
written atomically, secrets redacted by the bridge's detectors before they are stored, and an
unreadable file read as an empty history."""

from __future__ import annotations

import json
from pathlib import Path

from services.history_search.prompt_history import FILE_NAME, PromptHistory, redact_secrets
from services.workspace.manager import WorkspaceManager

OPENAI_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_prompts_are_deduplicated_capped_and_kept_in_the_workspace() -> None:
    workspace = WorkspaceManager().create("hist")[0]
    history = PromptHistory.for_workspace(workspace)
    history.cap = 3
    for prompt in ["one", "two", "one", "three", "four"]:
        history.record(prompt)
    assert history.prompts() == ["one", "three", "four"]
    stored = json.loads((workspace.root / FILE_NAME).read_text(encoding="utf-8"))
    assert stored == {"version": 1, "prompts": ["one", "three", "four"]}
    assert not list(workspace.root.glob(f".{FILE_NAME}.*.tmp"))  # the atomic write left no temp file
    assert PromptHistory.for_workspace(WorkspaceManager().open("hist")[0]).prompts()[-1] == "four"


def test_secrets_are_redacted_before_they_are_stored(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    history = PromptHistory(path)
    history.record(f"use the key {OPENAI_KEY} to call /home/me/app.py")
    history.record(f"export GITHUB_TOKEN={GITHUB_TOKEN} then run it")
    raw = path.read_text(encoding="utf-8")
    assert OPENAI_KEY not in raw and GITHUB_TOKEN not in raw
    first, second = history.prompts()
    assert first == "use the key [REDACTED:api_key] to call /home/me/app.py"  # the path is kept
    assert second.startswith("export GITHUB_TOKEN=[REDACTED:") and second.endswith(" then run it")
    assert redact_secrets("plain words stay") == "plain words stay"


def test_an_unreadable_history_is_empty_and_replaced_on_the_next_prompt(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    for broken in ["{not json", '{"version": 1, "prompts": [1, 2]}', '{"prompts": [], "other": true}', "\udcff"]:
        path.write_bytes(broken.encode("utf-8", "surrogateescape"))
        assert PromptHistory(path).prompts() == []
    assert PromptHistory(path).record("fresh") == ["fresh"]
    assert PromptHistory(path).prompts() == ["fresh"]
