"""Loading the ``plugins:`` entries of ``config.yaml`` into a frozen snapshot (named apart from ``config.loading``).

Finding an extension (``discovery``), its version gate (``versioning``), table prefixes
(``tables``), the spec's loading sequence (``loader``) and the operator's
``extensions install``/``remove`` (``install``). Loading builds ``contract``'s snapshot and
attributes through ``boundary``; nothing that runs a task is imported here.
"""
