"""What the browser tests do on the viewer's page, through the DOM ids of the shared contract."""

from __future__ import annotations

from typing import Any

TIMEOUT_MS = 15_000


async def open_document(page: Any, name: str, state: str = "loaded") -> None:
    """Click the tree entry whose id ends with ``/name`` and wait until it is loaded (or ``state``)."""
    await page.click(f'#tree [data-doc-id$="/{name}"]')
    await page.wait_for_function(
        "name => (document.querySelector('#doc-title')?.textContent || '').includes(name)", arg=name
    )
    await wait_state(page, state)


async def wait_state(page: Any, state: str) -> str:
    """Wait for ``#status[data-state=state]`` and return its sentence."""
    status = await page.wait_for_selector(f'#status[data-state="{state}"]', timeout=TIMEOUT_MS)
    return str(await status.inner_text())


async def state(page: Any) -> str:
    return str(await page.get_attribute("#status", "data-state"))


async def type_into_editor(page: Any, text: str) -> None:
    """Replace the editor's text as a user would: select all, then type (input events fire)."""
    editor = page.locator("#editor")
    await editor.click()
    await page.keyboard.press("Control+A")
    await page.keyboard.press("Delete")
    if len(text) < 80:
        await editor.press_sequentially(text)  # key by key: keydown, input, keyup
    else:
        await editor.fill(text)  # one input event


async def wait_preview(page: Any, text: str) -> None:
    await page.wait_for_function(
        "text => (document.querySelector('#preview')?.textContent || '').includes(text)",
        arg=text,
        timeout=TIMEOUT_MS,
    )


async def editor_value(page: Any) -> str:
    return str(await page.input_value("#editor"))
