"""find/search over the context index: Scenario A (find) and B (traceable recursive search), budgets
and their stop reasons, the normalizer, the reranker, filters, sessions, persisted traces and
settings that fail fast.  Real engine (hash embedder), real SQLite, temp dirs."""

from __future__ import annotations

import pytest

from services.audit.db import AUDIT_FILE
from services.context.errors import InvalidUri
from services.context.index import NotContextSource
from services.context.search import ContextRetriever
from services.context.search_types import SearchFilter
from services.context.sessions import SessionStore
from services.context.settings import ContextSettings
from services.context.tiers import ABSTRACT, OVERVIEW
from services.context.traces import STOP_REASONS, Budget, TraceNotFound, TraceStore
from services.context.uri import parse_uri
from services.errors import ConfigError, InvalidInput
from tests.context.ctx_fixtures import Ctx, ctx_fixture  # noqa: F401 - the fixture "ctx"


def test_scenario_a_find_ranks_files_with_valid_uris(ctx: Ctx) -> None:
    ctx.build()
    folder = parse_uri("axiom://resources/animals/mammals/llamas")
    assert "llamas" in ctx.tree.read_text(folder.join(ABSTRACT))
    assert "grazing.md" in ctx.tree.read_text(folder.join(OVERVIEW))
    assert "altiplano" in ctx.tree.read_text(folder.join("grazing.md"))
    result = ctx.retriever().find("llamas graze altiplano", limit=5)
    assert result.hits[0].uri == "axiom://resources/animals/mammals/llamas/grazing.md"
    assert result.hits[0].level == "L2" and result.hits[0].handle.startswith("context:")
    assert "altiplano" in result.hits[0].snippet
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True) and len(scores) == 5
    for hit in result.hits:
        assert ctx.tree.exists(parse_uri(hit.uri))
    assert result.trace.kind == "find" and result.trace.stop_reason == "limit"


def test_scenario_b_search_trace_has_start_points_recursive_steps_and_stop_reason(ctx: Ctx) -> None:
    ctx.build()
    result = ctx.retriever().search("alpaca fleece", limit=3)
    trace = result.trace
    assert result.hits[0].uri == "axiom://resources/animals/mammals/alpacas/fleece.md"
    assert all(hit.level == "L2" for hit in result.hits)
    assert trace.start_points and all({"uri", "score"} <= set(p) for p in trace.start_points)
    assert trace.steps[0]["directory"] == trace.start_points[0]["uri"]
    assert any(step["depth"] >= 1 for step in trace.steps)  # it went down from a start point
    assert any(step["children"] for step in trace.steps)
    assert trace.stop_reason in STOP_REASONS
    assert trace.budget_used["nodes"] == len(trace.steps)
    assert {"retrieve_ms", "walk_ms", "total_ms"} <= set(trace.timings)


@pytest.mark.parametrize(
    ("budget", "limit", "target", "reason"),
    [
        (Budget(max_nodes=1), 10, None, "max_nodes"),
        (Budget(max_depth=0), 50, "axiom://resources", "max_depth"),
        (Budget(max_ms=0.001), 10, None, "max_ms"),
        (Budget(), 1, None, "limit"),
        (Budget(), 50, None, "exhausted"),
    ],
)
def test_search_budgets_stop_with_their_reason(
    ctx: Ctx, budget: Budget, limit: int, target: str | None, reason: str
) -> None:
    ctx.build()
    result = ctx.retriever().search("llama wool altiplano", target_uri=target, limit=limit, budget=budget)
    assert result.trace.stop_reason == reason
    if reason == "max_nodes":
        assert len(result.trace.steps) == 1 and result.trace.budget_used["nodes"] == 1
    if reason == "max_depth":
        assert all(step["depth"] == 0 for step in result.trace.steps)
        assert any(step.get("cut_by_depth") for step in result.trace.steps)
    if reason == "max_ms":
        assert result.trace.steps == [] and result.hits == []


def test_find_budgets_and_limit(ctx: Ctx) -> None:
    ctx.build()
    retriever = ctx.retriever()
    assert retriever.find("llama", limit=1).trace.stop_reason == "limit"
    assert retriever.find("llama", budget=Budget(max_nodes=2)).trace.stop_reason == "max_nodes"
    assert retriever.find("llama", budget=Budget(max_ms=0.001)).trace.stop_reason == "max_ms"
    shallow = retriever.find("llama", target_uri="axiom://resources/animals", limit=50, budget=Budget(max_depth=0))
    assert shallow.trace.stop_reason == "max_depth"
    assert all(parse_uri(h.uri).parent == parse_uri("axiom://resources/animals") for h in shallow.hits)
    assert retriever.find("llama", limit=100).trace.stop_reason == "exhausted"
    with pytest.raises(InvalidInput):
        Budget(max_nodes=0)
    with pytest.raises(InvalidInput):
        retriever.find("   ")


def test_normalizer_folds_case_and_diacritics_and_expands_aliases(ctx: Ctx) -> None:
    ctx.build()
    (ctx.workspace.root / "context_aliases.yaml").write_text("K8s: [Kubernetes]\n", encoding="utf-8")
    on = ctx.retriever()
    folded = on.find("ZÜRICH", limit=3)
    assert folded.trace.normalized == "zurich zürich"
    assert folded.hits[0].uri == "axiom://resources/travel/zurich.md"
    alias = on.find("k8s", limit=3)
    assert alias.trace.normalized == "k8s kubernetes"
    assert alias.hits[0].uri == "axiom://resources/travel/kubernetes.txt"
    off = ctx.retriever(AXIOMME_QUERY_NORMALIZER="off")
    assert off.find("ZÜRICH", limit=3).trace.normalized == "ZÜRICH"
    assert all(h.uri != "axiom://resources/travel/kubernetes.txt" for h in off.find("k8s", limit=3).hits[:1])


def test_reranker_is_deterministic_on_and_off_and_demotes_tier_files(ctx: Ctx) -> None:
    ctx.build()
    on, off = ctx.retriever(), ctx.retriever(AXIOMME_RERANKER="off")
    runs_on = [[h.to_dict() for h in on.find("llama wool", limit=20).hits] for _ in range(2)]
    runs_off = [[h.to_dict() for h in off.find("llama wool", limit=20).hits] for _ in range(2)]
    assert runs_on[0] == runs_on[1] and runs_off[0] == runs_off[1]
    scores_on = {h["uri"]: h["score"] for h in runs_on[0]}
    scores_off = {h["uri"]: h["score"] for h in runs_off[0]}
    tier = next(uri for uri in scores_on if uri.endswith(ABSTRACT) and uri in scores_off)
    assert scores_on[tier] == pytest.approx(scores_off[tier] * 0.80, abs=1e-5)
    wool = "axiom://resources/animals/mammals/llamas/wool.md"
    assert scores_on[wool] == pytest.approx(scores_off[wool] * 1.10, abs=1e-5)  # its folder's L0 matched too
    searched = [[h.to_dict() for h in on.search("llama wool").hits] for _ in range(2)]
    assert searched[0] == searched[1]


def test_filters_scope_prefix_file_type_and_target(ctx: Ctx) -> None:
    ctx.build()
    ctx.write("tea.md", "# Tea\n\nI like llama-shaped tea cups.\n", scope="user")
    from services.context.index import sync_index

    sync_index(ctx.tree, ctx.engine)
    retriever = ctx.retriever()
    user = retriever.find("llama", limit=50, filter=SearchFilter(scope="user"))
    assert [h.uri for h in user.hits] == ["axiom://user/tea.md"]
    cooking = retriever.search("dough lentils", filter=SearchFilter(prefix="axiom://resources/cooking"))
    assert cooking.hits and all(h.uri.startswith("axiom://resources/cooking/") for h in cooking.hits)
    txt = retriever.find("containers", limit=50, filter=SearchFilter(file_types=("txt",)))
    assert [h.uri for h in txt.hits] == ["axiom://resources/travel/kubernetes.txt"]
    targeted = retriever.search("llama", target_uri="axiom://resources/animals/mammals/alpacas")
    assert [h.uri for h in targeted.hits] == ["axiom://resources/animals/mammals/alpacas/fleece.md"]
    with pytest.raises(NotContextSource):
        retriever.find("x", target_uri="axiom://temp")
    with pytest.raises(InvalidUri):
        retriever.find("x", target_uri="axiom://resources/../user")
    with pytest.raises(InvalidInput):
        SearchFilter(scope="queue")


def test_session_messages_expand_the_search_query(ctx: Ctx) -> None:
    ctx.build()
    session = SessionStore(ctx.tree.root).create("s1")
    session.append("user", "Tell me about the condor and its thermals.")
    session.append("assistant", "The condor rides thermals over the Andes.")
    result = ctx.retriever().search("birds", session="s1", limit=3)
    assert result.trace.expansion[:2] == ["condor", "thermals"]
    assert result.trace.normalized.startswith("birds condor thermals")
    assert result.hits[0].uri == "axiom://resources/animals/birds/condor.md"


def test_traces_are_persisted_and_read_back_after_reopening(ctx: Ctx) -> None:
    ctx.build()
    retriever = ctx.retriever()
    searched = retriever.search("llama wool", limit=2)
    found = retriever.find("sourdough")
    retriever.close()
    reopened = TraceStore(ctx.workspace.root / AUDIT_FILE)
    try:
        assert reopened.get(searched.trace.id).to_dict() == searched.trace.to_dict()
        assert [t.id for t in reopened.recent(5)][:2] == [found.trace.id, searched.trace.id]
        with pytest.raises(TraceNotFound):
            reopened.get("nope")
    finally:
        reopened.close()


def test_bad_settings_fail_fast() -> None:
    for env in (
        {"AXIOMME_RETRIEVAL_BACKEND": "postgres"},
        {"AXIOMME_RERANKER": "doc-aware-v2"},
        {"AXIOMME_QUERY_NORMALIZER": "sometimes"},
    ):
        with pytest.raises(ConfigError) as info:
            ContextSettings.from_env(env)
        assert next(iter(env)) in info.value.message


def test_a_malformed_alias_table_is_a_config_error(ctx: Ctx) -> None:
    (ctx.workspace.root / "context_aliases.yaml").write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        ContextRetriever(ctx.tree, ctx.engine, settings=ContextSettings.from_env({}))
