"""The version gate: the spec's rules before and from 1.0, and the refusal text verbatim."""

from __future__ import annotations

import pytest

from deerflow_ext.extensions.plugin_loading.versioning import (
    API_DISTRIBUTION,
    ApiVersion,
    ApiVersionError,
    check_marker,
    is_compatible,
    pip_range,
    refusal_message,
)
from deerflow_extension_api import API_VERSION, extension

V = ApiVersion.parse


@pytest.mark.parametrize(
    ("required", "host", "ok"),
    [
        # before 1.0: same major and minor, patch no newer than the host's
        ("0.2.1", "0.2.1", True),
        ("0.2.0", "0.2.1", True),
        ("0.2.2", "0.2.1", False),
        ("0.1.0", "0.2.1", False),
        ("0.1.9", "0.2.1", False),
        ("0.3.0", "0.2.1", False),
        ("1.0.0", "0.2.1", False),
        # from 1.0: same major, (minor, patch) no newer than the host's
        ("1.0.0", "1.4.2", True),
        ("1.3.9", "1.4.2", True),
        ("1.4.2", "1.4.2", True),
        ("1.4.3", "1.4.2", False),
        ("1.5.0", "1.4.2", False),
        ("2.0.0", "1.4.2", False),
        ("0.9.0", "1.4.2", False),
        # DeerFlow's markers: missing parts are zero, extra parts compare too
        ("0.2", "0.2.1", True),
        ("0.2.0.0", "0.2.1", True),
        ("0.2.1.1", "0.2.1", False),
        ("0.3", "0.2.1", False),
        ("0.1", "0.2.1", False),
        ("1", "1.4.2", True),
        ("1.4", "1.4.2", True),
        ("1.5", "1.4.2", False),
    ],
)
def test_gate_table(required: str, host: str, ok: bool) -> None:
    assert is_compatible(V(required), V(host)) is ok
    install = extension(api=required)(lambda registry, config: None)
    if ok:
        check_marker(install, host_version=host)
    else:
        with pytest.raises(ApiVersionError):
            check_marker(install, host_version=host)


def test_missing_marker_skips_the_check() -> None:
    check_marker(lambda registry, config: None, host_version="0.2.1")


@pytest.mark.parametrize(
    ("marker", "advice"),
    [
        (
            "0.2.2",
            "extension requires extension-api 0.2.2, host provides 0.2.1. "
            "Install a matching version: pip install 'deerflow-extension-api>=0.2.2,<0.3'",
        ),
        # DeerFlow's short marker, refused as written
        (
            "0.3",
            "extension requires extension-api 0.3, host provides 0.2.1. "
            "Install a matching version: pip install 'deerflow-extension-api>=0.3,<0.4'",
        ),
    ],
)
def test_spec_refusal_text_verbatim(marker: str, advice: str) -> None:
    install = extension(api=marker)(lambda registry, config: None)
    with pytest.raises(ApiVersionError) as info:
        check_marker(install, host_version="0.2.1")
    assert str(info.value) == advice


@pytest.mark.parametrize(
    ("required", "expected"),
    [("0.2.2", ">=0.2.2,<0.3"), ("0.0.1", ">=0.0.1,<0.1"), ("1.4.0", ">=1.4.0,<2"), ("3.0.7", ">=3.0.7,<4")],
)
def test_pip_range(required: str, expected: str) -> None:
    assert pip_range(V(required)) == expected


def test_the_advice_names_the_contract_distribution() -> None:
    assert API_DISTRIBUTION == "deerflow-extension-api"
    assert refusal_message(V("0.3.0"), V("0.2.1")).endswith("pip install 'deerflow-extension-api>=0.3.0,<0.4'")


class SneakyVersion(str):
    def __str__(self) -> str:
        raise AssertionError("extension code ran while the host formatted its marker")

    __format__ = __repr__ = __str__  # type: ignore[assignment]


def test_a_str_subclass_marker_is_read_as_a_plain_string() -> None:
    install = extension(api=SneakyVersion("0.3"))(lambda registry, config: None)
    with pytest.raises(ApiVersionError, match=r"requires extension-api 0\.3, host provides"):
        check_marker(install, host_version="0.2.1")


@pytest.mark.parametrize("marker", ["v0.2.1", "0.2.1rc1", " 0.2.1", "", "0.", ".2", "0.٢.1", 21, 0.2, None])
def test_malformed_markers_are_refused_clearly(marker: object) -> None:
    def install(registry: object, config: object) -> None:
        return None

    install.__deerflow_api__ = marker  # type: ignore[attr-defined]
    if marker is None:
        check_marker(install)  # None is "no marker"
        return
    with pytest.raises(ApiVersionError, match=r"extension declares extension-api .*(not a version|version string)"):
        check_marker(install)


def test_host_version_is_the_contracts() -> None:
    assert str(V(API_VERSION)) == "0.2.6"
    assert V(API_VERSION).parts == (0, 2, 6)
    assert V("0.2").parts == (0, 2, 0)


@pytest.mark.parametrize(
    ("marker", "accepted"), [("0.2.6", True), ("0.2.0", True), ("0.2", True), ("0.2.1", True), ("0.2.7", False)]
)
def test_this_host_admits_deerflows_newest_contract_and_every_earlier_0_2(marker: str, accepted: bool) -> None:
    """An extension pinned ``>=0.2.6,<0.3`` marks itself 0.2.6; one pinned ``>=0.2.0,<0.3`` 0.2.0."""
    install = extension(api=marker)(lambda registry, config: None)
    if accepted:
        check_marker(install)
    else:
        with pytest.raises(ApiVersionError, match=r"host provides 0\.2\.6"):
            check_marker(install)
