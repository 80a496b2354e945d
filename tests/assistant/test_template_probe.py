"""A model server whose chat template leaves the tools out (services/models/template.py): found by
asking it to count two one-token prompts, only when its stream counts nothing, once per server and
model, only on this machine or a private network; then said once, and the meter stops counting them.
A request to such a server is counted by it afterwards (the same body, one token out), which
calibrates the estimate as a counted stream does.

The scripted OpenAI-compatible server on loopback answers the probe's non-streamed requests with the
prompt counts it is given (the real case, Gemma on llama-cpp-python: tests/real_model)."""

from __future__ import annotations

from pathlib import Path

from services.assistant import ContextMeasured, TurnLoop
from services.models import template
from services.models.config import make_provider, resolve_model
from services.models.http import Timeouts
from services.models.openai_compat import OpenAICompatProvider
from services.models.window import cache_key
from services.session.session import Session
from services.workspace.manager import WorkspaceManager
from tests.models.servers import Reply, ScriptedServer

ASK = "Read the file notes.txt and tell me what it says."
NO_TOOLS = 'name: plain\ndescription: "No tools."\ntools:\n  enable: []\n'


async def turns(server: ScriptedServer, replies: list[Reply], texts: list[str]) -> tuple[Session, list[int], list]:
    """``texts`` as turns of one session (every tool enabled, a window that holds them all)."""
    workspace = WorkspaceManager().create("probe")[0]
    (workspace.root / "notes.txt").write_text("the notes\n", encoding="utf-8")
    workspace.update(models={"qwen2.5": {"context_window": 65536, "tool_budget": 100_000}})
    for reply in replies:
        server.add(reply)
    config = resolve_model(None, {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url})
    session = Session(workspace, interactive=False, conversation=None)
    meters: list[int] = []
    breakdowns: list = []

    def heard(event: object) -> None:
        if isinstance(event, ContextMeasured):
            meters.append(event.breakdown.used)
            breakdowns.append(event.breakdown)

    for text in texts:
        provider = make_provider(config)
        await TurnLoop(session, provider, on_event=heard).run(text)
        await provider.aclose()  # type: ignore[attr-defined]
    return session, meters, breakdowns


def key_of(server: ScriptedServer) -> str:
    provider = make_provider(resolve_model(None, {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url}))
    return cache_key(provider.name, str(provider.base_url), provider.model)


async def test_a_template_that_drops_the_tools_is_said_once_and_not_counted(aries_home: Path) -> None:
    server = ScriptedServer("openai").start()
    try:
        replies = [
            Reply(text="It says the notes.", usage_chunk=False),  # no counts in the stream: the server is asked
            Reply(text="", prompt_tokens=9),  # the one-word prompt
            Reply(text="", prompt_tokens=9),  # the same with a tool: not one token more
            Reply(text="Still the notes.", usage_chunk=False),
            Reply(text="", prompt_tokens=300),  # the count of the request just sent (it calibrates)
        ]
        session, meters, breakdowns = await turns(server, replies, [ASK, ASK])
        try:
            notices = [e for e in session.conversation.read().entries if e.get("title") == "tools"]
        finally:
            await session.aclose()
        bodies = server.chat_requests()
    finally:
        server.stop()
    assert [bool(b.get("stream")) for b in bodies] == [True, False, False, True, False]
    assert bodies[4]["messages"] == bodies[3]["messages"] and bodies[4]["max_tokens"] == 1  # counted
    assert "tools" not in bodies[1] and bodies[2]["tools"] == [template.PROBE_TOOL] and bodies[1]["max_tokens"] == 1
    assert bodies[3]["tools"] == bodies[0]["tools"]  # still sent (a forced call works), no longer counted
    assert breakdowns[0].tool_definitions > 0 and breakdowns[1].tool_definitions == 0
    assert meters[1] < meters[0]
    assert len(notices) == 1 and "does not show" in notices[0]["content"]
    assert template.known(key_of(server)) is False
    assert '"tools_shown": false' in (aries_home / "cache" / template.CACHE_FILE).read_text(encoding="utf-8")


async def test_a_template_that_shows_the_tools_keeps_counting_them(aries_home: Path) -> None:
    server = ScriptedServer("openai").start()
    try:
        replies = [
            Reply(text="It says the notes.", usage_chunk=False),
            Reply(text="", prompt_tokens=9),
            Reply(text="", prompt_tokens=75),  # the tool rendered
            Reply(text="Still the notes.", usage_chunk=False),
            Reply(text="", prompt_tokens=900),
        ]
        session, _, breakdowns = await turns(server, replies, [ASK, ASK])
        try:
            notices = [e for e in session.conversation.read().entries if e.get("title") == "tools"]
        finally:
            await session.aclose()
        requests = len(server.chat_requests())
    finally:
        server.stop()
    assert requests == 5 and not notices  # asked once, not again on the second turn (whose request is counted)
    assert breakdowns[1].tool_definitions > 0
    assert template.known(key_of(server)) is True


async def test_a_server_that_counts_in_its_stream_is_never_asked(aries_home: Path) -> None:
    server = ScriptedServer("openai").start()
    try:
        session, _, _ = await turns(server, [Reply(text="One."), Reply(text="Two.")], [ASK, ASK])
        await session.aclose()
        streamed = [bool(b.get("stream")) for b in server.chat_requests()]
    finally:
        server.stop()
    assert streamed == [True, True] and template.known(key_of(server)) is None


async def test_a_hosted_server_is_never_asked(aries_home: Path) -> None:
    """Not this machine, not a private network: nothing is sent (a public address; this machine reaches none)."""
    assert template.local_server("http://127.0.0.1:8080/v1") and template.local_server("http://localhost/v1")
    assert template.local_server("http://192.168.1.20:1234/v1") and template.local_server("http://[::1]:8080/v1")
    assert not template.local_server("https://api.openai.com/v1")
    assert not template.local_server("http://93.184.215.14/v1")
    provider = OpenAICompatProvider("gpt", "http://93.184.215.14/v1", timeouts=Timeouts(first_byte=0.001))
    try:
        assert await template.probe(provider, "remote") is None
    finally:
        await provider.aclose()
    assert template.asked("remote") and template.known("remote") is None
    assert not (aries_home / "cache" / template.CACHE_FILE).exists()


async def test_a_request_the_stream_did_not_count_is_counted_and_calibrates(aries_home: Path) -> None:
    """No tools offered: each uncounted request is counted by the server after it; the usage line gets
    its tokens in, and the next request's estimate is scaled toward the server's count."""
    server = ScriptedServer("openai").start()
    try:
        workspace = WorkspaceManager().create("count")[0]
        (workspace.root / "profiles").mkdir(exist_ok=True)
        (workspace.root / "profiles" / "plain.yaml").write_text(NO_TOOLS, encoding="utf-8")
        workspace.update(profile="plain")
        replies = [
            Reply(text="One.", usage_chunk=False),
            Reply(text="", prompt_tokens=1000),  # the server counts far more than the estimate
            Reply(text="Two.", usage_chunk=False),
            Reply(text="", prompt_tokens=1000),
        ]
        for reply in replies:
            server.add(reply)
        config = resolve_model(None, {"ARIES_MODEL": "openai:qwen2.5", "OPENAI_BASE_URL": server.base_url})
        session = Session(workspace, interactive=False, conversation=None)
        meters: list[int] = []
        outcomes = []
        for text in ("Hello there.", "Hello again."):
            provider = make_provider(config)
            loop = TurnLoop(
                session,
                provider,
                on_event=lambda e: meters.append(e.breakdown.used) if isinstance(e, ContextMeasured) else None,
            )
            outcomes.append(await loop.run(text))
            await provider.aclose()  # type: ignore[attr-defined]
        await session.aclose()
        bodies = server.chat_requests()
    finally:
        server.stop()
    assert [bool(b.get("stream")) for b in bodies] == [True, False, True, False]
    assert outcomes[0].usage["prompt_tokens"] == 1000  # the usage line's tokens in: the server's count
    assert meters[1] > 1.5 * meters[0]  # calibrated up at once toward the server's count
