"""Raises KeyboardInterrupt while being imported: a load failure of its entry (not a Ctrl-C)."""

raise KeyboardInterrupt("faulty_import_interrupt")
