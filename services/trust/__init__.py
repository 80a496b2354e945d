"""Authority vs data: what in a workspace may start a process, open a connection, widen a path rule or
change the approval mode, and how such settings arriving from outside stay inert until the operator
trusts them.

* :mod:`services.trust.authority` — the one list of authority settings, and moving them aside
  (quarantine) or back (trust);
* :mod:`services.trust.records` — trust records (who trusted what, when, the fingerprint) and the
  state of a workspace (own, untrusted, trusted, changed);
* :mod:`services.trust.review` — what trusting would put in force, as lines a person reads in seconds.
"""
