"""Raises KeyboardInterrupt while being imported: it must propagate out of loading."""

raise KeyboardInterrupt("faulty_import_interrupt")
