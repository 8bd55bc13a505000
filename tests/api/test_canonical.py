from __future__ import annotations

import hashlib
import math

import pytest

from deerflow_extension_api import canonical_hash, canonical_json


def test_sorted_keys_no_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, 2, {"d": None, "c": True}]}) == ('{"a":[1,2,{"c":true,"d":null}],"b":1}')


def test_unicode_kept_verbatim() -> None:
    assert canonical_json({"k": "é☃"}) == '{"k":"é☃"}'


def test_tuples_are_arrays() -> None:
    assert canonical_json((1, (2, 3))) == canonical_json([1, [2, 3]]) == "[1,[2,3]]"


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, math.nan, math.inf, {"x": object()}, [b"bytes"], {("a",): 1}],
    ids=["object", "set", "nan", "inf", "nested-object", "bytes", "tuple-key"],
)
def test_type_error_never_repr(value: object) -> None:
    with pytest.raises(TypeError):
        canonical_json(value)


def test_circular_reference_is_type_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(TypeError):
        canonical_json(loop)


def test_hash_is_sha256_of_utf8_json() -> None:
    value = {"z": "é", "a": [1.5, None]}
    expected = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    assert canonical_hash(value) == expected


def test_hash_is_stable_across_key_order() -> None:
    assert canonical_hash({"a": 1, "b": 2}) == canonical_hash({"b": 2, "a": 1})
    # A pinned value: changing the canonical form is a breaking change for every
    # extension that stored a hash.
    assert canonical_hash({"a": [1, "x"]}) == hashlib.sha256(b'{"a":[1,"x"]}').hexdigest()
    assert canonical_hash("hello") != canonical_hash(["hello"])
