"""The front ends' shared vocabulary: what the CLI and the HTTP service read and what they send back.

* ``dpsense.interface.spec``: the one release-spec model (``ReleaseSpec`` and its parts), its field
  rules and its errors (each a pydantic error whose ``ctx`` carries the ``fix``).
* ``dpsense.interface.documents``: the one JSON renderer (privacy losses, budgets, releases, stored
  releases, datasets, table rows).
* ``dpsense.interface.wording``: a refusal's fix in the words of the CLI or of HTTP (the library
  states it in Python).

It sits between the front ends (``dpsense.cli``, ``dpsense.service``) and ``dpsense.release``: it
imports the query and release layers, never a front end.
"""
