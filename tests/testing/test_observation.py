"""What an operator sees, compared across runs: ids and timings masked, run-to-run noise ignored."""

from __future__ import annotations

from deerflow_ext.testing.observation import first_difference, masked, noise, normalised


def test_ids_hashes_addresses_times_and_the_hosts_folder_are_masked() -> None:
    value = {
        "run": "7f3c2a9e-1b2c-4d5e-8f90-123456789abc",
        "task": "subagent-0123456789abcdef0123",
        "at": "2026-12-01T00:20:31.276449Z",
        "obj": "<Span at 0x7fe86751a980>",
        "path": "/tmp/deerflow-check-x/host-3/deerflow.db",
        "n": 3,
        "items": ("a", None, 1.5),
    }
    assert normalised(value, "/tmp/deerflow-check-x/host-3") == {
        "run": "<id>",
        "task": "subagent-<hex>",
        "at": "<time>",
        "obj": "<Span at <addr>>",
        "path": "<dir>/deerflow.db",
        "n": 3,
        "items": ["a", None, 1.5],
    }


def test_what_differs_between_two_runs_of_the_same_list_is_noise_everywhere() -> None:
    first = {"routes": {"/a": {"tokens": 10, "spans": [1, 2]}, "/b": {"ms": 3.1}}}
    second = {"routes": {"/a": {"tokens": 10, "spans": [1, 2, 3]}, "/b": {"ms": 2.9}}}
    paths = noise(first, second)
    assert paths == {("routes", "/a", "spans"), ("routes", "/b", "ms")}
    third = {"routes": {"/a": {"tokens": 11, "spans": []}, "/b": {"ms": 9.0}}}
    assert first_difference(masked(first, paths), masked(third, paths)) == "routes./a.tokens: 10 != 11"
    assert first_difference(masked(first, paths), masked(second, paths)) is None


def test_a_difference_names_the_first_path_where_values_part() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "a.1.b: 2 != 3"
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == 'c: "<absent>" != 2'
    assert first_difference([1, 2], [1]) == "<the whole result>: [1, 2] != [1]"
