"""deerflow-ext: the host side of the DeerFlow extension contract.

The public contract extension authors import lives in :mod:`deerflow_extension_api`;
everything here is the host that loads and runs their contributions.
"""

__all__ = ["__version__"]

__version__ = "0.2.1"
