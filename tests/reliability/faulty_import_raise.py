"""Raises while being imported: step 2.3 of loading fails."""

raise RuntimeError("faulty_import_raise refuses to be imported")
