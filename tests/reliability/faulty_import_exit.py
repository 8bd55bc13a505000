"""Importing this module calls sys.exit(7), as a broken extension package might."""

import sys

sys.exit(7)
