"""Start-up stays light, and the headless core never imports Textual."""

import json
import subprocess
import sys

HEAVY = ["torch", "sentence_transformers", "chromadb", "tantivy", "pypdf", "ebooklib", "aiohttp", "numpy"]


def loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_app_loads_no_heavy_module() -> None:
    modules = loaded_after("import app")
    assert not {m for m in modules if m.split(".")[0] in HEAVY}


def test_starting_the_tui_module_and_cli_loads_no_heavy_module() -> None:
    modules = loaded_after("import app.aries_app, app.cli\napp.cli.build_parser()")
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert heavy == []


def test_services_never_import_textual() -> None:
    code = (
        "import importlib, pkgutil, services\n"
        "for info in pkgutil.walk_packages(services.__path__, 'services.'):\n"
        "    importlib.import_module(info.name)\n"
    )
    modules = loaded_after(code)
    assert "textual" not in modules
    assert not [m for m in modules if m.startswith("textual.")]
