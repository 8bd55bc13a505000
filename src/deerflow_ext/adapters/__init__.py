"""Other libraries' private surface, one module per library, and nothing else.

The host leans on a few names no library promises to keep: LangChain's chain composers and
trace helpers, LangChain core's streaming route, LangGraph's state-channel reader and its
PostgreSQL saver's cursor hook, FastAPI's and Starlette's router internals, langsmith's
runtime overrides, ``importlib_metadata``'s distribution path, CPython's bytecode and its sqlite3
connection's handle (loading sqlite-vec where Python was built without extension loading), uvicorn's
HTTP protocol class (a deadline for request heads). Each is reached only through the module
here named after its library, which

* says what it uses, why, and what the host does without it (the *fallback*: the host
  always keeps working, it only loses a speed-up or a finer check);
* answers ``None`` (or the safe default) when the name is gone, instead of raising;
* has a test (``tests/adapters/``) that fails loudly, naming the library and its version,
  when the private name or its signature changes, so an upgrade that silently switches to
  the fallback is caught.

``tests/adapters/test_private_surface.py`` also checks that no other host module imports a
private name of these libraries.
"""
