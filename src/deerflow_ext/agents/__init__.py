"""The agent host: embedded model, host middlewares, agent builders, system calls.

Submodules are imported directly (``deerflow_ext.agents.lead`` etc.); this package keeps
no eager imports so ``extensions/`` modules can reach ``agents.middlewares`` lazily without
pulling in the whole host.
"""
