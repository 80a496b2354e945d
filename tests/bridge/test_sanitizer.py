"""The sanitizer and the allowlist on the redaction corpus, without a network."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.bridge import QueryRefused, check_outbound, sanitize
from services.bridge.sanitizer import KINDS
from services.workspace.bridge_config import BridgeConfig
from tests.bridge.conftest import CORPUS_HOSTS, CORPUS_PROJECTS, must_not_redact, must_redact

CONFIG = BridgeConfig(hostnames=CORPUS_HOSTS, projects=CORPUS_PROJECTS)
REDACT = must_redact()
KEEP = must_not_redact()


def test_the_corpus_is_big_enough_and_covers_every_kind() -> None:
    assert len(REDACT) >= 60 and len(KEEP) >= 40
    assert {entry["kind"] for entry in REDACT} == set(KINDS)


@pytest.mark.parametrize("entry", REDACT, ids=[f"{n:02d}-{e['kind']}" for n, e in enumerate(REDACT)])
def test_must_redact(entry: dict[str, object]) -> None:
    result = sanitize(str(entry["question"]), CONFIG)
    for leak in entry["leaks"]:  # type: ignore[attr-defined]
        assert leak not in result.text
    assert result.counts.get(str(entry["kind"]), 0) >= 1, result.counts
    assert f"[REDACTED:{entry['kind']}#1]" in result.text


@pytest.mark.parametrize("question", KEEP)
def test_must_not_redact(question: str) -> None:
    result = sanitize(question, CONFIG)
    assert result.text == question and result.counts == {}
    check_outbound(result.text, CONFIG)  # a generic question passes the allowlist


def test_placeholders_are_stable_and_counted() -> None:
    text = "Mail a@example.com, then b@example.com, then a@example.com again from 10.1.2.3."
    result = sanitize(text, CONFIG)
    assert result.text == (
        "Mail [REDACTED:email#1], then [REDACTED:email#2], then [REDACTED:email#1] again from [REDACTED:ip#1]."
    )
    assert result.counts == {"email": 3, "ip": 1}
    assert result.mapping["[REDACTED:email#2]"] == "b@example.com"
    assert sanitize(text, CONFIG) == result  # same input, same output


def test_listed_names_are_configuration() -> None:
    question = "Why is the Bluebird build slow on build01 today?"
    assert sanitize(question, BridgeConfig()).text == question
    assert sanitize(question, CONFIG).text == "Why is the [REDACTED:project#1] build slow on [REDACTED:host#1] today?"


def test_a_private_key_without_its_end_line_is_redacted_to_the_end() -> None:
    text = "What is wrong with -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nabcdefgh"
    assert sanitize(text, CONFIG).text == "What is wrong with [REDACTED:private_key#1]"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("$ curl -X POST https://example.com/api -d @payload.json", "command"),
        ("sudo systemctl restart nginx and tell me if it works", "command"),
        ("rm -rf build then explain what happened", "command"),
        ("Explain this: curl https://example.com/install | sh", "command"),
        ("What does $(whoami) print inside a container?", "command"),
        ("Why does src/app/main.py fail to import its sibling module?", "path"),
        ("Why does ./deploy.sh exit with status 126 on the server?", "path"),
        ("Why can @jdoe42 not push to the repository anymore?", "user_id"),
        ("Why does uid=1001 own the files in the volume?", "user_id"),
        ("Please check username: carol_w in the directory", "user_id"),
        ("kubernetes", "not_a_question"),
        ("Why " + "is this slow " * 400, "too_long"),
    ],
)
def test_the_allowlist_refuses(text: str, reason: str) -> None:
    sent = sanitize(text, CONFIG).text
    with pytest.raises(QueryRefused) as caught:
        check_outbound(sent, CONFIG)
    assert caught.value.reason == reason
    assert "\n" not in caught.value.message and sent not in caught.value.message


def test_a_question_that_is_mostly_redactions_is_refused() -> None:
    text = "Why do a@example.com b@example.com c@example.com d@example.com e@example.com f@example.com fail?"
    with pytest.raises(QueryRefused) as caught:
        check_outbound(sanitize(text, CONFIG).text, CONFIG)
    assert caught.value.reason == "mostly_redacted"


def test_importing_the_bridge_loads_no_heavy_module() -> None:
    code = (
        "import sys, services.bridge, services.bridge.merge; "
        "heavy = ('detect_secrets', 'aiohttp', 'textual', 'requests', 'chromadb'); "
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
