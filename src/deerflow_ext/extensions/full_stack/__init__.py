"""Full-stack plugins (``registry.plugin(PluginContribution)``): what the host checks and keeps.

This subpackage owns the host's side of DeerFlow's plugin contract (0.2.2 to 0.2.6) up to
registration: the settings rules and the operator's values (:mod:`.settings`), the object
schemas model tools declare (:mod:`.schema`), the in-memory snapshot of packaged browser
assets (:mod:`.browser_assets`), and the ordered checks one contribution passes before
anything is recorded (:mod:`.registration`). The registry (``contract/registry.py``)
records what these accept, attributed and rolled back like every other contribution.
"""
