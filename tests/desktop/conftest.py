"""The governed-tools sandbox and loopback web server, shared with tests/tools."""

from tests.tools.conftest import sandbox, web_server  # noqa: F401
