"""Issue 29: the builtin tools' outputs are pydantic models (``services.tools.outputs``). Their
generated schemas are the ones published before (kept in ``tests/fixtures/
output_schemas_before_issue29.json``, copied from the hand-written schemas they replace), every
builtin tool publishes its model's schema, and a recorded output that does not fit its model parses
to ``None`` (its reader shows the raw JSON) instead of raising."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from services.tools import outputs
from services.tools.builtin import default_registry
from services.tools.outputs import OUTPUT_MODELS, ShellRunOutput, output_of, parse_output
from services.tools.schemas import output_schema_of

BEFORE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "output_schemas_before_issue29.json").read_text()
)
"""The hand-written output schemas as they were, by their old names."""

OLD_NAMES = {
    "builtin:fs:list_dir": "FS_LIST_DIR_OUT",
    "builtin:fs:read_text": "FS_READ_TEXT_OUT",
    "builtin:fs:write_text": "FS_WRITE_TEXT_OUT",
    "builtin:fs:search_text": "FS_SEARCH_TEXT_OUT",
    "builtin:fs:apply_patch": "FS_APPLY_PATCH_OUT",
    "builtin:fs:restore": "RESTORE_OUT",
    "builtin:fs:add_artifact": "ADD_ARTIFACT_OUT",
    "builtin:shell:start": "SHELL_START_OUT",
    "builtin:shell:poll": "SHELL_POLL_OUT",
    "builtin:shell:kill": "SHELL_KILL_OUT",
    "builtin:shell:run": "SHELL_RUN_OUT",
    "builtin:web:search": "WEB_SEARCH_OUT",
    "builtin:web:fetch": "WEB_FETCH_OUT",
    "builtin:web:extract": "WEB_EXTRACT_OUT",
    "builtin:context:find": "CONTEXT_OUT",
    "builtin:context:search": "CONTEXT_OUT",
}


def test_every_builtin_tool_has_an_output_model_and_every_old_schema_a_tool() -> None:
    builtin = {spec.tool_id for spec in default_registry().list() if spec.provider == "builtin"}
    assert set(OUTPUT_MODELS) == builtin == set(OLD_NAMES)
    assert set(OLD_NAMES.values()) == set(BEFORE)


@pytest.mark.parametrize("tool_id", sorted(OLD_NAMES))
def test_the_generated_output_schema_is_the_hand_written_one(tool_id: str) -> None:
    generated = output_schema_of(OUTPUT_MODELS[tool_id])
    assert generated == BEFORE[OLD_NAMES[tool_id]]
    assert json.dumps(generated, sort_keys=True) == json.dumps(BEFORE[OLD_NAMES[tool_id]], sort_keys=True)
    assert default_registry().get(tool_id).describe()["output_schema"] == generated
    Draft202012Validator.check_schema(generated)


def test_a_recorded_output_parses_into_its_model_and_one_that_does_not_fit_gives_none() -> None:
    recorded = {
        "exit_code": 0,
        "stdout": "steady\n",
        "stderr": "",
        "stdout_bytes": 7,
        "stderr_bytes": 0,
        "process_id": "p1-3c5297",
        "cleaned_up": [],
    }
    run = parse_output(ShellRunOutput, recorded)
    assert run is not None and run.stdout == "steady\n" and run.exit_code == 0
    assert run.model_dump() == recorded and list(run.model_dump()) == list(recorded)
    assert output_of("builtin:shell:run", recorded) == run
    assert output_of("builtin:shell:run", {**recorded, "exit_code": "zero"}) is None  # wrong type
    assert output_of("builtin:shell:run", {**recorded, "older_field": 1}) is None  # another version's
    assert output_of("builtin:shell:run", {"omitted": "too large for the transcript"}) is None
    assert output_of("builtin:shell:run", None) is None
    assert output_of("mcp:server:tool", recorded) is None  # no model: shown as it is


def test_the_models_refuse_what_their_schemas_refuse() -> None:
    for model in OUTPUT_MODELS.values():
        assert model.model_config.get("extra") == "forbid" and model.model_config.get("frozen") is True
    assert outputs.FsEntry.model_fields["type"].annotation is not None
    assert parse_output(outputs.FsEntry, {"path": "a", "name": "a", "type": "socket", "size": 0}) is None
    assert parse_output(outputs.FsEntry, {"path": "a", "name": "a", "type": "file", "size": -1}) is None
