"""The context index: what sync_index takes (L2 + tier files of the four core scopes, nothing from
temp/queue or other dot-names), idempotence, deletions, source path ↔ URI."""

from __future__ import annotations

import pytest

from services.context.index import INDEX_NAME, NotContextSource, sync_index, uri_of_source
from services.context.uri import parse_uri
from tests.context.ctx_fixtures import Ctx, ctx_fixture  # noqa: F401 - the fixture "ctx"


def test_sync_indexes_l2_and_tier_files_and_never_temp_queue_or_other_dot_names(ctx: Ctx) -> None:
    ctx.build({"docs/a.md": "# A\n\nAlpha text about llamas.\n"})
    ctx.write("notes/me.md", "# Me\n\nI like tea.\n", scope="user")
    root = ctx.tree.root
    (root / "temp" / "staging-x").mkdir(parents=True)
    (root / "temp" / "staging-x" / "half.md").write_text("llamas half written\n")
    (root / "queue" / "job.md").write_text("llamas queued\n")
    (root / "resources" / ".secret.md").write_text("llamas secret\n")
    (root / "resources" / "docs" / ".hidden").mkdir()
    (root / "resources" / "docs" / ".hidden" / "x.md").write_text("llamas hidden\n")
    (root / "agent" / ".lock.md").write_text("llamas lock\n")
    report = sync_index(ctx.tree, ctx.engine)
    indexed = set(report.added) | set(report.unchanged) | set(report.updated)
    assert indexed == {
        "resources/.abstract.md",
        "resources/.overview.md",
        "resources/docs/.abstract.md",
        "resources/docs/.overview.md",
        "resources/docs/a.md",
        "user/notes/me.md",
    }
    assert not [issue for issue in report.errors]
    assert ctx.engine.active_index is None  # the context index never becomes the /rag index
    hits = ctx.retriever().find("llamas", limit=50).hits
    assert hits and all(not h.uri.startswith(("axiom://temp", "axiom://queue")) for h in hits)
    assert all(".secret" not in h.uri and ".hidden" not in h.uri and ".lock" not in h.uri for h in hits)


def test_second_sync_embeds_nothing_and_deleted_files_leave_the_index(ctx: Ctx) -> None:
    ctx.build()
    again = sync_index(ctx.tree, ctx.engine)
    assert again.added == [] and again.updated == [] and again.removed == []
    assert again.chunks_added == 0 and len(again.unchanged) > 8
    target = parse_uri("axiom://resources/animals/birds/condor.md")
    assert any(h.uri == str(target) for h in ctx.retriever().find("condor thermals").hits)
    ctx.tree.remove(target, actor="user")
    gone = sync_index(ctx.tree, ctx.engine)
    assert gone.removed == ["resources/animals/birds/condor.md"]
    assert all(h.uri != str(target) for h in ctx.retriever().find("condor thermals", limit=50).hits)
    assert INDEX_NAME == "context"


def test_uri_of_source() -> None:
    assert str(uri_of_source("resources/docs/a.md")) == "axiom://resources/docs/a.md"
    assert str(uri_of_source("user/.abstract.md")) == "axiom://user/.abstract.md"
    assert uri_of_source("resources/my%20notes.md").name == "my%20notes.md"  # literal names
    for bad in ("temp/staging-1/a.md", "queue/x.md", "a.md", "elsewhere/a.md", ""):
        with pytest.raises(NotContextSource):
            uri_of_source(bad)
