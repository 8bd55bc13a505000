"""Table prefixes: host collisions, overlaps between extensions, and alembic include_object."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deerflow_ext.extensions.contract.snapshot import TablePrefix
from deerflow_ext.extensions.plugin_loading.tables import (
    HOST_TABLE_NAMES,
    TablePrefixCollisionError,
    check_table_prefixes,
    host_table_collisions,
    make_include_object,
)


@pytest.mark.parametrize(
    ("prefix", "claimed"),
    [
        ("run", ("run_events", "runs")),
        ("run_", ("run_events",)),  # the run journal (migration 0011)
        ("runs", ("runs",)),
        ("checkpoint", ("checkpoint_blobs", "checkpoint_migrations", "checkpoint_writes", "checkpoints")),
        ("THREAD", ("thread_leases", "threads")),
        ("thread_", ("thread_leases",)),
        ("w", ("webhook_outbox", "writes")),
        ("acme_", ()),
        ("runs_acme_", ()),  # extends a host name without claiming it
        ("alembic", ("alembic_version",)),
    ],
)
def test_host_collisions(prefix: str, claimed: tuple[str, ...]) -> None:
    assert host_table_collisions(prefix, HOST_TABLE_NAMES) == claimed


def test_collision_raises_with_the_prefix_and_tables() -> None:
    with pytest.raises(TablePrefixCollisionError, match=r"'check'.*checkpoint_blobs") as info:
        check_table_prefixes([TablePrefix("ok_", "a:install", "a"), TablePrefix("check", "b:install", "b")])
    assert info.value.prefix.extension == "b:install"


@pytest.mark.parametrize(("first", "second"), [("acme_", "acme_"), ("acme_", "acme_audit_"), ("acme_audit_", "acme_")])
def test_overlapping_prefixes_of_two_extensions_abort(first: str, second: str) -> None:
    with pytest.raises(TablePrefixCollisionError, match="two extensions cannot own the same tables"):
        check_table_prefixes([TablePrefix(first, "a:install", "a"), TablePrefix(second, "b:install", "b")])


def test_same_extension_twice_may_share_its_prefix() -> None:
    prefixes = [TablePrefix("acme_", "a:install", "one"), TablePrefix("acme_", "a:install", "two")]
    assert check_table_prefixes(prefixes) == tuple(prefixes)


def _table(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name)


def test_include_object_excludes_prefixed_tables_and_their_parts() -> None:
    include = make_include_object([TablePrefix("acme_", "a:install", "a"), "costs_"])
    assert include(_table("acme_events"), "acme_events", "table", True, None) is False
    assert include(_table("costs_rows"), "costs_rows", "table", False, None) is False
    assert include(_table("runs"), "runs", "table", True, None) is True
    owned = SimpleNamespace(table=_table("acme_events"))
    host = SimpleNamespace(table=_table("runs"))
    for type_ in ("column", "index", "unique_constraint", "foreign_key_constraint"):
        assert include(owned, "ix_whatever", type_, True, None) is False
        assert include(host, "ix_whatever", type_, True, None) is True


def test_include_object_with_no_prefixes_includes_everything() -> None:
    include = make_include_object(())
    assert include(_table("acme_events"), "acme_events", "table", True, None) is True


def test_include_object_works_with_sqlalchemy_objects() -> None:
    sa = pytest.importorskip("sqlalchemy")
    metadata = sa.MetaData()
    owned = sa.Table("acme_log", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Index("ix_acme", "id"))
    host = sa.Table("runs", metadata, sa.Column("id", sa.Integer, primary_key=True))
    include = make_include_object(["acme_"])
    assert include(owned, "acme_log", "table", True, None) is False
    assert include(owned.c.id, "id", "column", True, None) is False
    assert include(next(iter(owned.indexes)), "ix_acme", "index", True, None) is False
    assert include(host, "runs", "table", False, None) is True
    assert include(host.c.id, "id", "column", False, None) is True
