"""Aries: the Textual application and the ``aries`` command line.

Importing this package is cheap: it loads no Textual, no model and no index library.
"""

__version__ = "0.1.0"
