"""What a workspace says to the model in the operator's name: its slash commands and its instructions.

* :mod:`services.project.commands` — ``commands/NAME.md``: front matter (description, arguments, an
  optional profile or tool list, a format version) and a prompt template with ``$ARGUMENTS``, ``$1``…;
* :mod:`services.project.instructions` — ``AGENTS.md`` at the workspace root: added to the system
  prompt, size-capped with a notice.

Both are *authority* (``services.trust.authority``): operator-authored text, in force only while the
workspace's settings are (its own, or trusted and unchanged); a bundle's copies wait in quarantine.
Nothing here reads trust: ``services.session.inforce.resolve`` decides whether they are read at all.
"""
