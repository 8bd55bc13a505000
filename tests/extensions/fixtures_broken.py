"""A test extension module that fails while being imported (spec step 2.3)."""

raise RuntimeError("broken at import time")
