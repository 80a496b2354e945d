"""The baseline for bench/startup.py: a bare Textual app with a Header, a Static and a Footer."""

from textual.app import App
from textual.widgets import Footer, Header, Static


class BareApp(App[None]):
    def compose(self):  # type: ignore[no-untyped-def]
        yield Header()
        yield Static("Bare Textual baseline")
        yield Footer()


if __name__ == "__main__":
    BareApp().run()
