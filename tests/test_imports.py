"""Import hygiene, in one place: start-up stays light, and the headless core never imports the UI.

Each row imports something in a fresh interpreter and lists modules (and their submodules) that must
not be loaded by it.
(The layer rules themselves — app > screens > widgets > services, policy ↛ tools, retrieval ⟂ tools,
no cycles — are import-linter contracts in pyproject.toml, run by `lint-imports` in .ci/run.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
HEAVY = [
    "torch",
    "sentence_transformers",
    "chromadb",
    "tantivy",
    "pypdf",
    "ebooklib",
    "aiohttp",
    "numpy",
    "transformers",
    "tokenizers",
    "mcp",
]
UI = ["textual", "app", "screens", "widgets"]
WALK_SERVICES = (
    "import importlib, pkgutil, services\n"
    "for info in pkgutil.walk_packages(services.__path__, 'services.'):\n"
    "    importlib.import_module(info.name)\n"
)

ROWS = [
    ("import app", HEAVY),
    ("import app.aries_app, app.cli\napp.cli.build_parser()", HEAVY),
    ("import app.cli.tool", ["aiohttp", "psutil", "textual", "jsonschema"]),
    ("import app.cli.desktop, services.desktop", ["aiohttp", "psutil", "textual", "jsonschema", *HEAVY]),
    # `aries [-w NAME]` before its first frame: no subcommand parsers, no session, no controllers
    # (the workspace opens right after the first frame; the controllers on first use).
    (
        "import app.aries_app, app.cli\n"
        "for argv in ([], ['-w', 'demo'], ['--workspace=demo'], ['-wdemo']):\n"
        "    assert app.cli._opens_the_tui(argv), argv\n"
        "    app.cli.build_parser(subcommands=False).parse_args(argv)\n"
        "for argv in (['-w'], ['rag', 'list'], ['--help'], ['-w', 'demo', 'tool', 'list']):\n"
        "    assert not app.cli._opens_the_tui(argv), argv\n"
        "app.aries_app.AriesApp('demo')",
        [
            "app.cli.registry",
            "app.cli.workspace",
            "app.cli.rag",
            "app.cli.tool",
            "app.cli.model",
            "app.commands.assistant",
            "app.commands.rag",
            "app.commands.tools",
            "app.commands.desktop",
            "app.cli.desktop",
            "services.desktop",
            "app.palette",
            "services.session.session",
            "services.workspace.leases",
            "app.commands.serve",
            "services.web",
            *HEAVY,
        ],
    ),
    ("import app, app.cli.rag, services.retrieval", HEAVY),
    # the web viewer: aiohttp, markdown-it and nh3 load only when a server is built or a preview rendered
    ("import app.cli.serve, services.web.viewer, services.web.documents", [*HEAVY, "nh3", "markdown_it", "textual"]),
    ("import services.retrieval, services.retrieval.engine, services.retrieval.evaluation", [*HEAVY, *UI]),
    (
        "import services.session.session, services.assistant, services.conversation, services.tools.gateway, "
        "services.policy, services.audit.log\n"
        "from services.tools.builtin import default_registry\n"
        "assert len(default_registry().list()) == 16",
        ["aiohttp", *UI],
    ),
    (WALK_SERVICES, UI),
    # Profiles: importing them (and their TUI/CLI shells) loads no pydantic or jsonschema; only parsing does.
    (
        "import services.profiles, services.profiles.audit, app.commands.profile, app.cli.profile",
        ["pydantic", "jsonschema", *HEAVY],
    ),
    # /serve: the controller (made when the palette opens) brings no aiohttp; the server comes on start.
    ("import app.commands.serve", ["aiohttp", "services.web", "services.web.viewer", *HEAVY]),
    # Start-up opens a workspace and reads its settings before the first frame: no pydantic there.
    (
        "import os, tempfile\nos.environ['ARIES_HOME'] = tempfile.mkdtemp()\n"
        "from services.workspace.manager import WorkspaceManager\nws, _ = WorkspaceManager().create('w')\n"
        "assert ws.setting('approval_mode') is None and ws.profile == 'default'\n"
        "from services.workspace.manager import ephemeral_workspace\ne = ephemeral_workspace()\n"
        "assert e.setting('model') == 'offline'",
        ["pydantic", *HEAVY],
    ),
    # The workspace ready, with a model configured: what the header shows (policy file, approval mode,
    # model) needs no profile parser (pydantic, the YAML reader) for the shipped default profile, and
    # no retrieval or answer code for the model's name.
    (
        "import os, tempfile\nos.environ['ARIES_HOME'] = tempfile.mkdtemp()\n"
        "os.environ['ARIES_MODEL'] = 'ollama:llama3.2'\n"
        "from services.workspace.manager import WorkspaceManager\nfrom services.session.session import Session\n"
        "from services.models.config import resolve_model\n"
        "ws, _ = WorkspaceManager().create('w')\ns = Session(ws)\n"
        "assert s.policy_path is None and s.mode == 'guide' and s.model_setting() == 'offline'\n"
        "assert resolve_model(s.model_setting(), os.environ).label == 'ollama:llama3.2'\ns.close()",
        ["pydantic", "services.retrieval", "services.models.answers", "services.profiles.model", *HEAVY],
    ),
    # … and in the TUI: the modules loaded when the header first shows the workspace.
    (
        "import asyncio, os, sys, tempfile\nos.environ['ARIES_HOME'] = tempfile.mkdtemp()\n"
        "os.environ['ARIES_MODEL'] = 'ollama:llama3.2'\nfrom app.aries_app import AriesApp\nseen = set()\n"
        "header_text = AriesApp.header_text\n"
        "def probe(self):\n"
        "    text = header_text(self)\n"
        "    if text:\n"
        "        seen.update(sys.modules)\n"
        "    return text\n"
        "AriesApp.header_text = probe\n"
        "async def main():\n"
        "    app = AriesApp()\n"
        "    async with app.run_test() as pilot:\n"
        "        await app.ready()\n"
        "        await pilot.pause()\n"
        "        assert 'model ollama:llama3.2' in app.sub_title, app.sub_title\n"
        "asyncio.run(main())\n"
        "bad = sorted(m for m in seen if m.split('.')[0] in ('pydantic', 'ruamel', 'torch', 'chromadb', 'tantivy')"
        " or m.startswith(('services.retrieval', 'services.models.answers', 'services.profiles.model')))\n"
        "assert seen and not bad, bad",
        [],
    ),
    # Where the user lives (issue 29): the TUI on a named workspace with a conversation to index, once
    # idle (the search index built, in a child process): workspace.yaml read without ruamel.yaml or
    # pydantic, and nothing of the index build (Tantivy, the secret detectors) left resident.
    (
        "import asyncio, os, pathlib, sys, tempfile\nhome = tempfile.mkdtemp()\nos.environ['ARIES_HOME'] = home\n"
        "os.environ['ARIES_MODEL'] = 'ollama:llama3.2'\nos.environ['OLLAMA_HOST'] = '127.0.0.1:9'\n"
        "root = pathlib.Path(home, 'workspaces', 'w')\nroot.mkdir(parents=True)\n"
        "(root / 'workspace.yaml').write_text(\"# Aries workspace settings.\\nformat_version: 1\\nname: w\\n"
        "created_at: '2026-11-27T08:49:07.623Z'\\nprofile: default\\nsettings:\\n  model: offline\\n"
        '  active_index:\\n")\n'
        "from services.workspace.manager import Workspace\ntalk = Workspace(root, 'w').new_transcript()\n"
        "talk.append('user', 'a grebe dives', turn_id=talk.conversation_id + '-t0001')\n"
        "from app.aries_app import AriesApp\nseen = set()\n"
        "async def main():\n"
        "    app = AriesApp('w', create=False)\n"
        "    async with app.run_test():\n"
        "        await app.idle.wait()\n"
        "        seen.update(sys.modules)\n"
        "        coverage = app.commands.history_index.coverage\n"
        "        assert coverage is not None and (coverage.indexed, coverage.total) == (1, 1), coverage\n"
        "asyncio.run(main())\n"
        "bad = sorted(m for m in seen if m.split('.')[0] in ('pydantic', 'ruamel', 'tantivy', 'detect_secrets')"
        " or m.startswith(('services.history_search.store', 'services.workspace.config')))\n"
        "assert seen and not bad, bad",
        [],
    ),
]


@pytest.mark.parametrize(("code", "forbidden"), ROWS, ids=[f"row{n}" for n in range(len(ROWS))])
def test_imports_stay_light_and_layered(code: str, forbidden: list[str]) -> None:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    bad = sorted({m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden)})
    assert bad == []
