"""Importing this module is the security failure the tests check for."""

IMPORTED = True


def install(registry: object, config: object) -> None:
    raise AssertionError("security_bomb must never be installed")
