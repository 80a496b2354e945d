"""The headless pipe: ``aries ask`` (one turn of the turn loop, no screen), ``aries ingest`` and
``aries status``, with the researcher-rag-bridge spec's request/response JSON validated against the
schemas shipped in ``services/pipe/schemas/``.

* ``request`` — reading a question or the request JSON (``jsonschema``), one-line typed errors;
* ``headless`` — the turn on a ``Session`` with a headless approver; the response and exit code;
* ``confidence`` — ``confidence.local`` and its documented formula;
* ``status`` — indexes, model reachability, cloud mode, last audited calls;
* ``ingest`` — the spec's ingest result from the engine's ingest report.
"""
