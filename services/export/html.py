"""An export as one self-contained HTML file: inline CSS, no script, nothing loaded from elsewhere.

Every text is ``html.escape``d (quotes too) and came made safe by :mod:`services.export.document`
(secrets redacted; control, escape and bidi characters shown as visible escapes), so markup, escape
sequences and bidi overrides from the conversation are inert text. The page has no link, image,
form or script of its own, and says so to the browser: a Content-Security-Policy ``<meta>`` right
after ``<meta charset>`` (``default-src 'none'``: nothing may load; ``style-src 'unsafe-inline'``:
the one ``<style>``; no base, no form target) and ``referrer`` ``no-referrer``.
"""

from __future__ import annotations

from html import escape

from services.export.document import Body, Citation, Entry, ExportDocument, Field

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

STYLE = """
:root { color-scheme: light dark; --muted: #666; --line: #d0d7de; --code: #f6f8fa; --accent: #0b5cad; }
@media (prefers-color-scheme: dark) { :root { --muted: #9aa4ad; --line: #3a4149; --code: #161b22; --accent: #6cb6ff; } }
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .5rem; }
h2 { font-size: 1.2rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1rem; margin: 1.2rem 0 .3rem; }
h3 .detail, code { font-family: ui-monospace, monospace; font-size: .92em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 1rem; margin: .3rem 0; color: var(--muted); }
dt { font-weight: 600; } dd { margin: 0; overflow-wrap: anywhere; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem;
      white-space: pre-wrap; overflow-wrap: anywhere; font: .9em/1.45 ui-monospace, monospace; }
.note { color: var(--muted); font-size: .9em; }
.entry { border-left: 3px solid var(--line); padding-left: .8rem; margin: .8rem 0; }
.entry.user { border-color: var(--accent); } .entry.assistant { border-color: #2da44e; }
.entry.tool { border-color: #bf8700; } .entry.notice { border-color: #8c959f; }
.label { font-weight: 600; margin: .4rem 0 0; }
.citation { margin: .4rem 0 .4rem 1rem; }
""".strip()


def _text(value: str) -> str:
    return escape(value, quote=True)


def _fields(fields: tuple[Field, ...]) -> list[str]:
    if not fields:
        return []
    rows = [f"<dt>{_text(field.label)}</dt><dd><code>{_text(field.value)}</code></dd>" for field in fields]
    return ["<dl>", *rows, "</dl>"]


def _body(body: Body) -> list[str]:
    label = [f'<p class="label">{_text(body.label)}</p>'] if body.label else []
    return [*label, f'<pre class="{_text(body.language)}">{_text(body.text)}</pre>']


def _citation(citation: Citation) -> list[str]:
    source = f" — <code>{_text(citation.source)}</code>" if citation.source else ""
    head = f"<p><b>[{citation.number}]</b> <code>{_text(citation.handle)}</code>{source}: {_text(citation.note)}.</p>"
    text = [f"<pre>{_text(citation.text)}</pre>"] if citation.text is not None else []
    return [f'<div class="citation {_text(citation.state)}">', head, *text, "</div>"]


def _entry(entry: Entry) -> list[str]:
    detail = f' <span class="detail">{_text(entry.detail)}</span>' if entry.detail else ""
    lines = [f'<article class="entry {_text(entry.kind)}">', f"<h3>{_text(entry.heading)}{detail}</h3>"]
    lines += _fields(entry.fields)
    for body in entry.bodies:
        lines += _body(body)
    if entry.citations:
        lines.append('<p class="label">Citations</p>')
        for citation in entry.citations:
            lines += _citation(citation)
    lines.append("</article>")
    return lines


def render(document: ExportDocument) -> bytes:
    title = _text(document.title)
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_text(CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>",
        f"<style>\n{STYLE}\n</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{title}</h1>",
        *_fields(document.fields),
        *[f'<p class="note">{_text(note)}</p>' for note in document.notes],
        "</header>",
    ]
    for number, part in enumerate(document.parts, start=1):
        lines += [f'<section class="part" id="part-{number}">', f"<h2>{_text(part.heading)}</h2>"]
        for entry in part.entries:
            lines += _entry(entry)
        lines.append("</section>")
    lines += ["</body>", "</html>"]
    return ("\n".join(lines) + "\n").encode("utf-8")


__all__ = ["CSP", "render"]
