"""The context window: every request is counted and fitted into the model's window (configured, told by
the provider, or learned from the server's overflow error); what is left out is said in the transcript.

Real providers against the scripted Ollama / OpenAI-compatible servers on loopback, the real session,
gateway and transcript. The real engine's behaviour (its tokenizer, its error for an overflow, its empty
stream) is checked in ``tests/real_model``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.assistant import TurnLoop
from services.assistant.context import (
    DROP_BLOCK,
    ContextFitter,
    ContextTooSmall,
    HistoryTurn,
    history_from_entries,
)
from services.models.base import ChatMessage, ModelOptions, ToolSchema
from services.models.tokens import Calibration, estimate_tokens, message_tokens, tools_tokens
from services.models.window import CACHE_FILE, forget_all, overflow_numbers
from services.session.session import Session
from tests.assistant.conftest import provider_for
from tests.models.servers import Call, Reply, ScriptedServer

LLAMA_CPP_PYTHON = (
    "This model's maximum context length is 512 tokens. However, you requested 611 tokens "
    "(610 in the messages, 1 in the completion). Please reduce the length of the messages or completion."
)


def label(server: ScriptedServer) -> str:
    return "ollama:llama3.2:3b" if server.kind == "ollama" else "openai:qwen2.5"


def configure(session: Session, server: ScriptedServer, **settings: int) -> None:
    session.workspace.update(models={label(server): settings})


def reports(session: Session) -> list[dict[str, Any]]:
    return [e for e in session.conversation.read().entries if e.get("kind") == "context"]


def sent_tokens(body: dict[str, Any]) -> int:
    """The request as Aries counts it (messages and tool schemas), from what the server received."""
    messages = [ChatMessage(role=m["role"], content=m.get("content") or "") for m in body["messages"]]
    tools = [
        ToolSchema(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in body.get("tools") or []
    ]
    return sum(message_tokens(m) for m in messages) + tools_tokens(tools)


# -- the counting -------------------------------------------------------------------------------------
def test_the_estimate_counts_prose_by_words_and_is_cheap() -> None:
    prose = "The policy gateway decides every tool call before it runs. " * 50
    # ten words and a full stop: 11 tokens a sentence in Gemma 3's tokenizer (550 in all)
    assert 550 <= estimate_tokens(prose) < 550 * 1.05
    assert estimate_tokens("aGVsbG8gd29ybGQhIGJhc2U2NA") > estimate_tokens("hellosworldsbasesixtyfour")  # case switches
    assert estimate_tokens("") == 0 and estimate_tokens("a") == 1
    assert estimate_tokens("0123456789") >= 10  # digits are tokens of their own
    assert estimate_tokens("人人生而自由") >= 4


def test_calibration_follows_an_under_estimate_at_once_and_an_over_estimate_slowly() -> None:
    calibration = Calibration()
    calibration.observe(100, 150)
    assert calibration.factor == pytest.approx(1.5)
    calibration.observe(100, 100)
    assert 1.0 < calibration.factor < 1.5
    calibration.observe(0, 10)  # nothing to learn from
    assert calibration.samples == 2


@pytest.mark.parametrize(
    ("message", "error", "window", "prompt"),
    [
        (LLAMA_CPP_PYTHON, {"code": "context_length_exceeded"}, 512, 610),
        ("Requested tokens (610) exceed context window of 512", {}, 512, 610),
        (
            "request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it",
            {"type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096},
            4096,
            5000,
        ),
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
            {},
            8192,
            9000,
        ),
        (
            "Trying to keep the first 3000 tokens when context the overflows. However, the model is loaded with "
            "context length of only 2048 tokens",
            {},
            2048,
            None,
        ),
        ("the prompt is too long: context length exceeded", {}, None, None),
    ],
)
def test_overflow_errors_of_the_servers_are_read(
    message: str, error: dict[str, Any], window: int | None, prompt: int | None
) -> None:
    assert overflow_numbers(message, error) == (True, window, prompt)


def test_other_errors_are_not_overflows() -> None:
    assert overflow_numbers("out of memory", {"code": "server_error"}) == (False, None, None)
    assert overflow_numbers("model 'x' not found", {}) == (False, None, None)


# -- the fitting ----------------------------------------------------------------------------------------
def turns(n: int, words: int = 40) -> list[HistoryTurn]:
    entries = []
    for i in range(1, n + 1):
        entries.append({"role": "user", "content": f"question {i} " + "word " * words, "turn_id": f"c-t{i:04d}"})
        entries.append({"role": "assistant", "content": f"answer {i} " + "word " * words, "turn_id": f"c-t{i:04d}"})
    return history_from_entries(entries, "c-t9999")


def hit(rank: int, words: int = 60) -> dict[str, Any]:
    text = f"passage {rank} " + "text " * words
    return {"rank": rank, "handle": f"docs:{rank:04x}", "text": text, "source_path": "a.md"}


def test_the_oldest_turns_are_left_out_first() -> None:
    history = turns(20)
    fitter = ContextFitter("system", "the question", [], history, window=1000, reserve=100)
    fitted = fitter.fit([], [], 0)
    kept = len(history) - len(fitted.left_out_turns)
    assert 0 < kept < len(history)
    assert fitted.left_out_turns == [t.turn_id for t in history[: len(fitted.left_out_turns)]]  # a prefix
    assert len(fitted.left_out_turns) % DROP_BLOCK == 0
    assert fitted.messages[-2].content.startswith("answer 20")  # the newest turn is there
    assert fitted.messages[-1].content == "the question"
    assert fitted.tokens <= 900


def test_the_start_of_what_is_sent_moves_in_blocks() -> None:
    """As the conversation grows one turn at a time, the first turn sent stays the same for several
    turns: a server's prompt cache keeps serving it."""
    firsts = []
    for n in range(10, 40):
        fitted = ContextFitter("system", "q", [], turns(n), window=1200, reserve=100).fit([], [], 0)
        firsts.append(len(fitted.left_out_turns))
    changes = sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b)
    assert firsts[-1] > firsts[0] and changes <= len(firsts) // DROP_BLOCK + 1


def test_the_tools_come_before_the_passages_and_passages_go_whole_lowest_ranked_first() -> None:
    """The one budget's order (issue 30): the tool definitions, then the passages by rank, then history."""
    tool = ToolSchema("big_tool", "d " * 150, {"type": "object", "properties": {}})
    hits = [hit(1), hit(2), hit(3)]
    fitter = ContextFitter("system", "q", hits, turns(3), window=366, reserve=50)
    fitted = fitter.fit([], [tool], tools_tokens([tool]))
    assert fitted.tools == [tool] and fitted.left_out_tools == []
    assert fitted.left_out_turns == [t.turn_id for t in turns(3)]
    assert [h["handle"] for h in fitted.kept_hits] == ["docs:0001"]
    assert fitted.left_out_handles == ["docs:0002", "docs:0003"]
    user = fitted.messages[-1].content
    assert "passage 1 " in user and "passage 2" not in user
    assert user.count("<<<end untrusted>>>") == 1  # whole blocks only, never a cut one
    # Without the tools, the passages take their room: the next one by rank, whole.
    bare = fitter.fit([], [], 0)
    assert [h["handle"] for h in bare.kept_hits] == ["docs:0001", "docs:0002"]
    assert bare.messages[-1].content.count("<<<end untrusted>>>") == 2


def test_history_comes_back_when_the_tools_are_left_out() -> None:
    tool = ToolSchema("big_tool", "d " * 2000, {"type": "object", "properties": {}})
    fitter = ContextFitter("system", "q", [], turns(2, words=5), window=600, reserve=50)
    fitted = fitter.fit([], [tool], tools_tokens([tool]))
    assert fitted.left_out_tools == ["big_tool"] and fitted.left_out_turns == []


def test_a_message_larger_than_the_window_is_one_clear_error() -> None:
    fitter = ContextFitter("system", "word " * 2000, [hit(1)], turns(2), window=512, reserve=64, label="openai:tiny")
    with pytest.raises(ContextTooSmall, match=r"does not fit the context window of openai:tiny.*window is 512"):
        fitter.fit([], [], 0)


# -- the turn loop against the servers -------------------------------------------------------------------
async def test_a_long_conversation_stays_inside_the_configured_window(session: Session, server: ScriptedServer) -> None:
    configure(session, server, context_window=700, max_tokens=50)
    for n in range(1, 13):
        server.add(Reply(text=f"answer number {n}: " + "blah " * 30, prompt_tokens=0))  # the server does not count
        loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
        outcome = await loop.run(f"question number {n}: " + "tell me more " * 10)
        await loop.provider.aclose()
        assert outcome.error is None, outcome.error
        assert outcome.context["window"] == 700 and outcome.context["window_source"] == "config"
    for body in server.chat_requests():
        assert sent_tokens(body) <= 700 - 50
        if server.kind == "openai":
            assert body["max_tokens"] == 50
        else:
            assert body["options"]["num_predict"] == 50 and body["options"]["num_ctx"] == 700
    said = reports(session)
    assert said, "the transcript says what was left out"
    last = said[-1]
    assert last["left_out"]["turns"]["count"] >= 5 and last["left_out"]["turns"]["first"].endswith("-t0001")
    assert last["window"] == 700 and last["window_source"] == "config"
    assert "oldest turn(s)" in last["content"]
    # The newest earlier turn reached the model; the oldest did not, unless brought back as relevant
    # (issue 30: then only inside an earlier-turn block of the message, never as history).
    final = server.chat_requests()[-1]["messages"]
    assert any("answer number 11" in str(m["content"]) for m in final)
    history = final[1:-1]
    assert not any("answer number 1:" in str(m["content"]) for m in history)
    assert all("earlier-turn" in m["content"] for m in final if "answer number 1:" in str(m["content"]))


async def test_the_servers_overflow_error_is_learned_and_the_request_fitted_again(
    session: Session, openai_only: ScriptedServer, aries_home: Path
) -> None:
    server = openai_only
    forget_all()
    for n in range(1, 4):
        server.add(Reply(text=f"answer {n} " + "words " * 80))
        loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
        assert (await loop.run(f"question {n} " + "more " * 80)).error is None
        await loop.provider.aclose()
    server.add(Reply(status=400, error=LLAMA_CPP_PYTHON), Reply(text="fits now"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("question 4 " + "more " * 80)
    await loop.provider.aclose()
    assert outcome.error is None and outcome.text == "fits now"
    assert outcome.context["window"] == 512 and outcome.context["window_source"] == "learned"
    refused, retried = server.chat_requests()[-2:]
    assert sent_tokens(retried) < sent_tokens(refused) and "tools" not in retried
    report = reports(session)[-1]
    assert "refused a request as larger than its context window (its window: 512 tokens" in report["content"]
    assert report["window"] == 512 and report["left_out"]["turns"]["count"] >= 1
    # Kept for the next process: it starts from the learned window and sends a fitting request at once.
    cached = json.loads((aries_home / "cache" / CACHE_FILE).read_text())
    assert [entry["window"] for entry in cached.values()] == [512]
    forget_all()
    server.add(Reply(text="first try"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("question 5")
    await loop.provider.aclose()
    assert outcome.context["window_source"] == "learned" and outcome.text == "first try"


async def test_an_empty_stream_is_explained_by_the_same_request_not_streamed(
    session: Session, openai_only: ScriptedServer
) -> None:
    """llama-cpp-python's server answers a request over its window with a 200 and an empty stream."""
    server = openai_only
    forget_all()
    server.add(Reply(raw_lines=[]), Reply(status=400, error=LLAMA_CPP_PYTHON), Reply(text="answered"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    # the tools that match it (read, file) make the first request far more than the 512 the server has
    outcome = await loop.run("read the file notes.txt " + "hello " * 30)
    await loop.provider.aclose()
    assert outcome.error is None and outcome.text == "answered"
    stream, probe, retry = server.chat_requests()
    assert stream["stream"] is True and probe.get("stream") is None and probe["max_tokens"] == 1
    assert probe["messages"] == stream["messages"] and retry["stream"] is True


async def test_an_empty_stream_that_is_no_overflow_stays_an_error(
    session: Session, openai_only: ScriptedServer
) -> None:
    server = openai_only
    server.add(Reply(raw_lines=[]), Reply(text="the probe got an answer"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.error is not None and "ended before a finish_reason" in outcome.error


async def test_ollama_says_its_window_and_gets_it_as_num_ctx(session: Session, ollama_only: ScriptedServer) -> None:
    server = ollama_only
    server.num_ctx = 2048
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.context["window"] == 2048 and outcome.context["window_source"] == "provider"
    assert server.chat_requests()[0]["options"]["num_ctx"] == 2048
    assert any(r.path == "/api/show" for r in server.requests)


async def test_ollama_without_num_ctx_is_fitted_to_its_default(session: Session, ollama_only: ScriptedServer) -> None:
    server = ollama_only
    server.context_length = 131072
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.context["window"] == 8192  # what Aries asks for, not the trained 131072
    assert server.chat_requests()[0]["options"]["num_ctx"] == 8192
    server.context_length = 2048
    from services.assistant import turn_window

    turn_window._SAID.clear()  # what a provider said is kept for a minute
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.context["window"] == 2048


async def test_an_openai_server_that_says_max_model_len(session: Session, openai_only: ScriptedServer) -> None:
    server = openai_only
    server.max_model_len = 1024
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.context == {**outcome.context, "window": 1024, "window_source": "provider"}


async def test_the_servers_count_corrects_the_estimate(session: Session, server: ScriptedServer) -> None:
    """A server that counts twice what Aries estimated: the next request is fitted tighter."""
    configure(session, server, context_window=900)
    for n in range(1, 6):
        server.add(Reply(text=f"answer {n} " + "word " * 40, prompt_tokens=0))
        loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
        await loop.run(f"question {n} " + "word " * 40)
        await loop.provider.aclose()
    before = sent_tokens(server.chat_requests()[-1])
    server.add(Reply(text="x", prompt_tokens=before * 2), Reply(text="y"))
    for text in ("question 6", "question 7"):
        loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
        await loop.run(text)
        await loop.provider.aclose()
    after = sent_tokens(server.chat_requests()[-1])
    assert after * 2 <= 900 and after < before


async def test_a_length_stop_is_said(session: Session, server: ScriptedServer) -> None:
    configure(session, server, max_tokens=4)
    server.add(Reply(text="cut sho", finish_reason="length"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("hello")
    await loop.provider.aclose()
    assert outcome.finish_reason == "length" and outcome.text == "cut sho"
    notices = [e for e in session.conversation.read().entries if e.get("title") == "length"]
    assert len(notices) == 1 and "max_tokens 4" in notices[0]["content"]


async def test_a_message_too_large_for_the_window_never_reaches_the_server(
    session: Session, server: ScriptedServer
) -> None:
    configure(session, server, context_window=256)
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("word " * 2000)
    await loop.provider.aclose()
    assert outcome.error is not None and "does not fit the context window" in outcome.error
    assert server.chat_requests() == []


async def test_tool_results_are_cut_to_the_window_and_say_so(session: Session, server: ScriptedServer) -> None:
    configure(session, server, context_window=3000, max_tokens=100)
    (session.workspace.root / "big.txt").write_text("line of text\n" * 4000)
    from tests.assistant.test_loop import names

    tool = names(session, server)["builtin:fs:read_text"]
    server.add(Reply(tool_calls=[Call(tool, {"path": "big.txt"})]), Reply(text="done"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("read big.txt")
    await loop.provider.aclose()
    assert outcome.error is None
    second = server.chat_requests()[1]
    result = next(m for m in second["messages"] if m["role"] == "tool")
    assert "to fit the model's context window]" in result["content"]
    assert sent_tokens(second) <= 3000


async def test_tool_choice_is_sent_by_its_provider_name(session: Session, openai_only: ScriptedServer) -> None:
    from tests.assistant.test_loop import names

    server = openai_only
    configure(session, server, context_window=32768)
    tool = names(session, server)["builtin:fs:list_dir"]
    server.add(Reply(text="ok"))
    loop = TurnLoop(session, provider_for(server), options=ModelOptions(tool_choice=tool), max_steps=1)  # type: ignore[arg-type]
    await loop.run("list")
    await loop.provider.aclose()
    body = server.chat_requests()[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": tool}}


@pytest.fixture
def openai_only() -> Any:
    server = ScriptedServer("openai").start()
    yield server
    server.stop()


@pytest.fixture
def ollama_only() -> Any:
    server = ScriptedServer("ollama").start()
    yield server
    server.stop()


def test_the_offered_schemas_have_no_huge_bounds_and_the_gateway_keeps_them(session: Session) -> None:
    """llama.cpp turns a schema's maxLength into grammar rules; at 8192 its server dies. The model is
    offered the schema without bounds above 256; the gateway still enforces the registry's."""
    from services.models.offline import OfflineProvider

    schemas, names = TurnLoop(session, OfflineProvider()).offered_tools()
    text = json.dumps([s.parameters for s in schemas])
    assert '"maxLength": 8192' not in text and '"maxLength": 67108864' not in text
    read = next(s for s in schemas if s.name == names.provider_name("builtin:fs:read_text"))
    assert read.parameters["properties"]["path"]["minLength"] == 1
    registry = session.gateway().registry.get("builtin:fs:read_text").input_schema
    assert registry["properties"]["path"]["maxLength"] == 8192


async def test_a_path_beyond_the_registry_bound_is_still_refused(session: Session) -> None:
    result = await session.call_tool("builtin:fs:read_text", {"path": "a" * 9000})
    assert not result.ok and result.error is not None and result.error.type == "InvalidInput"


async def test_every_request_carries_an_output_cap_even_when_none_is_configured(
    session: Session, server: ScriptedServer
) -> None:
    """Issue 33 item 2: a small model cannot ramble until the window is full — with no ``max_tokens``
    configured the request asks for at most the answer's share of the window (an eighth of it)."""
    configure(session, server, context_window=2048)
    server.add(Reply(text="a short answer"))
    loop = TurnLoop(session, provider_for(server))  # type: ignore[arg-type]
    outcome = await loop.run("a question")
    await loop.provider.aclose()
    assert outcome.error is None, outcome.error
    (body,) = server.chat_requests()
    cap = body["max_tokens"] if server.kind == "openai" else body["options"]["num_predict"]
    assert cap == 2048 // 8


async def test_the_default_cap_says_how_to_raise_it_when_an_answer_reaches_it(
    session: Session, openai_only: ScriptedServer
) -> None:
    configure(session, openai_only, context_window=1024)
    openai_only.add(Reply(text="blah " * 20, finish_reason="length"))
    loop = TurnLoop(session, provider_for(openai_only))  # type: ignore[arg-type]
    await loop.run("ramble")
    await loop.provider.aclose()
    notices = [e for e in session.conversation.read().entries if e.get("title") == "length"]
    assert len(notices) == 1
    assert "max_tokens 128, the default share of the window" in notices[0]["content"]
    assert "settings.models." in notices[0]["content"]
