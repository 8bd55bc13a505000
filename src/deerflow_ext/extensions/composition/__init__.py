"""Composition: contributed middleware, isolated, ordered and placed in the agent's stack.

The spec's rules each have their module: the hook vocabulary (``hooks``), the wrapper that
observes and never decides (``isolation``, its generated classes in ``mirror`` and its handler
in ``handler_watch``), the ordering check (``ordering``), each contributor asked
(``middleware_contributions``) and the one composition point (``stack``); ``assembly``
reports what a construction decided. The machinery that makes a valid stack cheaper to run
sits above the rules and is planned once per shape: ``wrap_fusion`` fuses runs of wrap-only
wrappers into one LangChain layer, ``carry`` runs such a group inside the host layer before it,
``layers`` plans both.
"""
