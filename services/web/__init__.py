"""The local web viewer and editor of a workspace's documents (FR-011): ``aries serve``, ``/serve``.

:mod:`services.web.viewer` (``ViewerServer``, ``run_viewer``) is the entry point; aiohttp is imported
only when a server is built (:mod:`services.web.app`).
"""
