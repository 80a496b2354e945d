"""The usage line's output tokens (issue 30 item 7): the server's count from the stream's usage chunk
(``stream_options.include_usage``) when it sends one; Aries' own count of the streamed text, marked
estimated, when it does not (llama-cpp-python's stream carries no usage: the line said "0 out")."""

from __future__ import annotations

from pathlib import Path

from services.assistant import TurnLoop, UsageReport
from services.models.http import Timeouts
from services.models.openai_compat import OpenAICompatProvider
from services.models.tokens import estimate_tokens
from services.session.session import Session
from services.workspace.manager import WorkspaceManager
from services.workspace.transcripts import read_transcript
from tests.models.servers import Reply, ScriptedServer

ANSWER = "Bergen is on the west coast of Norway, between seven mountains."


async def one_turn(aries_home: Path, reply: Reply) -> tuple[dict[str, object], list[UsageReport]]:
    server = ScriptedServer("openai", models=["gemma"]).start()
    workspace = WorkspaceManager().create("talk")[0]
    reports: list[UsageReport] = []
    try:
        server.add(reply)
        provider = OpenAICompatProvider("gemma", server.base_url, timeouts=Timeouts())
        session = Session(workspace, interactive=False, conversation=None)
        try:
            loop = TurnLoop(
                session, provider, on_event=lambda e: reports.append(e) if isinstance(e, UsageReport) else None
            )
            outcome = await loop.run("Where is Bergen?")
            await provider.aclose()
            path = session.conversation.transcript.path
        finally:
            await session.aclose()
        assert server.chat_requests()[0]["stream_options"] == {"include_usage": True}
    finally:
        server.stop()
        workspace.close()
    answer = [e for e in read_transcript(path).entries if e["role"] == "assistant"][-1]
    assert answer["usage"] == outcome.usage
    return answer["usage"], reports


async def test_the_servers_usage_chunk_gives_the_output_tokens(aries_home: Path) -> None:
    usage, reports = await one_turn(aries_home, Reply(text=ANSWER, prompt_tokens=40, completion_tokens=17))
    assert usage["completion_tokens"] == 17 and usage["prompt_tokens"] == 40
    assert "completion_tokens_estimated" not in usage
    assert reports[-1].completion_tokens == 17 and reports[-1].completion_tokens_estimated == 0


async def test_a_stream_without_usage_gets_an_estimate_not_zero(aries_home: Path) -> None:
    usage, reports = await one_turn(aries_home, Reply(text=ANSWER, usage_chunk=False))
    assert usage["completion_tokens"] == 0
    assert usage["completion_tokens_estimated"] == estimate_tokens(ANSWER) > 0
    assert reports[-1].completion_tokens_estimated == estimate_tokens(ANSWER)
