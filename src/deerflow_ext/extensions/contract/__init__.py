"""The host's side of the public contract: hookspecs, the registry, the loaded snapshot, stores.

What an extension's ``install()`` registers (``hookspecs``, ``registry``), what the host
keeps of a load (``snapshot``: ``LoadedExtensions`` and its contributions) and the data store
handed to observers (``stores``). Everything else in the extension runtime reads these; they
import only ``boundary`` (attributed diagnostics).
"""
