import pytest

from services.errors import InvalidName
from services.text.names import validate_name

BAD = [
    "",
    ".",
    "..",
    "../x",
    "a/b",
    "a\\b",
    "/abs",
    "x" * 65,
    "x" * 300,
    "tab\tname",
    "nl\nname",
    "nul\x00name",
    "esc\x1bname",
    "bell\x07",
    " lead",
    "trail ",
    ".hidden",
    "-flag",
    "c:drive",
    "star*",
    "q?",
    "pipe|x",
    "rtl\u202eevil",
    "zw\u200bspace",
    "ls\u2028sep",
]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused_with_a_clear_message(name: str) -> None:
    with pytest.raises(InvalidName) as info:
        validate_name(name)
    message = info.value.message
    assert "workspace name" in message
    assert "\n" not in message.replace("\\n", "")


@pytest.mark.parametrize("name", ["demo", "Research_2026", "a.b", "x" * 64, "données", "α-β"])
def test_good_names_pass(name: str) -> None:
    assert validate_name(name) == name
