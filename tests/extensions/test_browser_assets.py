"""Packaged browser assets: the manifest rules, path rules, symlinks, limits at and past their
edges, and a snapshot that later file edits cannot reach (digest §4.4)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.extensions.full_stack.browser_assets import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_MANIFEST_BYTES,
    LoadedBrowserAssets,
    load_browser_assets,
    valid_asset_path,
)
from deerflow_extension_api import BrowserAssets


def package(root: Path, files: dict[str, bytes | str], manifest: Any = None, *, name: str = "ui_manifest.json") -> Path:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    if manifest is None:
        manifest = {"schema_version": 1, "entry": next(iter(files)), "files": list(files)}
    (root / name).write_text(manifest if isinstance(manifest, str) else json.dumps(manifest), encoding="utf-8")
    return root


def load(root: Path, **kwargs: Any) -> LoadedBrowserAssets:
    return load_browser_assets(BrowserAssets("acme.page", root, **kwargs))


def test_a_valid_package_is_snapshotted_with_types_entry_and_revision(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {
            "static/index.mjs": "export default {}",
            "static/app.css": "body{}",
            "img/logo.svg": "<svg/>",
            "a.woff2": b"\0",
        },
    )
    loaded = load(root, public_fields=["limit"])
    assert loaded.entry == "static/index.mjs" and loaded.public_fields == ("limit",)
    assert {path: asset.media_type for path, asset in loaded.files.items()} == {
        "static/index.mjs": "text/javascript",
        "static/app.css": "text/css",
        "img/logo.svg": "image/svg+xml",
        "a.woff2": "font/woff2",
    }
    assert len(loaded.revision) == 64
    with pytest.raises(TypeError):
        loaded.files["x"] = loaded.files["a.woff2"]  # type: ignore[index]


def test_the_snapshot_ignores_later_edits_and_a_new_registration_changes_the_revision(tmp_path: Path) -> None:
    root = package(tmp_path, {"index.js": "one"})
    first = load(root)
    (root / "index.js").write_text("two", encoding="utf-8")
    assert first.files["index.js"].content == b"one"
    second = load(root)
    assert second.files["index.js"].content == b"two" and second.revision != first.revision
    assert load(root).revision == second.revision  # the same bytes, the same revision


def test_the_manifest_is_part_of_the_revision(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {"index.js": "x", "extra.css": "y"},
        {"schema_version": 1, "entry": "index.js", "files": ["index.js", "extra.css"]},
    )
    both = load(root).revision
    package(tmp_path, {"index.js": "x"}, {"schema_version": 1, "entry": "index.js", "files": ["index.js"]})
    assert load(root).revision != both


@pytest.mark.parametrize(
    "path",
    [
        "../secret.js",
        "a/../b.js",
        "./a.js",
        ".hidden.js",
        "/abs.js",
        "a//b.js",
        "a%2fb.js",
        "a?.js",
        "a\\b.js",
        "https://x/a.js",
        "",
        "a/",
    ],
)
def test_unsafe_paths_are_refused(path: str, tmp_path: Path) -> None:
    assert not valid_asset_path(path)
    root = package(tmp_path, {"index.js": "x"}, {"schema_version": 1, "entry": "index.js", "files": ["index.js", path]})
    with pytest.raises(ValueError, match="unique asset paths"):
        load(root)


def test_path_length_at_and_past_512(tmp_path: Path) -> None:
    assert valid_asset_path("a" * 512) and not valid_asset_path("a" * 513)
    assert valid_asset_path("_a-b.c/d") and not valid_asset_path(3)


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        ({"schema_version": 2, "entry": "index.js", "files": ["index.js"]}, "expected schema_version 1"),
        ({"schema_version": True, "entry": "index.js", "files": ["index.js"]}, "expected schema_version 1"),
        ({"schema_version": "1", "entry": "index.js", "files": ["index.js"]}, "expected schema_version 1"),
        (
            {"schema_version": 1, "entry": "style.css", "files": ["index.js", "style.css"]},
            "entry must be a listed JavaScript module",
        ),
        ({"schema_version": 1, "entry": "other.js", "files": ["index.js"]}, "entry must be a listed JavaScript module"),
        ({"schema_version": 1, "entry": "index.js", "files": []}, "unique asset paths"),
        ({"schema_version": 1, "entry": "index.js", "files": ["index.js", "index.js"]}, "unique asset paths"),
        ({"schema_version": 1, "entry": "index.js", "files": "index.js"}, "unique asset paths"),
        (
            {"schema_version": 1, "entry": "index.js", "files": ["index.js"], "extra": 1},
            "exactly schema_version, entry and files",
        ),
        ({"schema_version": 1, "files": ["index.js"]}, "exactly schema_version, entry and files"),
        (["index.js"], "exactly schema_version, entry and files"),
        (
            '{"schema_version": 1, "schema_version": 1, "entry": "index.js", "files": ["index.js"]}',
            "Duplicate browser manifest key",
        ),
        ("{not json", "UTF-8 JSON"),
    ],
)
def test_invalid_manifests_are_refused(manifest: Any, match: str, tmp_path: Path) -> None:
    root = package(tmp_path, {"index.js": "x", "style.css": "y"}, manifest)
    with pytest.raises(ValueError, match=match):
        load(root)


def test_unsupported_file_types_are_refused(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {"index.js": "x", "page.html": "<p>"},
        {"schema_version": 1, "entry": "index.js", "files": ["index.js", "page.html"]},
    )
    with pytest.raises(ValueError, match="Unsupported browser asset file type"):
        load(root)


def test_a_listed_file_that_is_missing(tmp_path: Path) -> None:
    root = package(
        tmp_path, {"index.js": "x"}, {"schema_version": 1, "entry": "index.js", "files": ["index.js", "gone.css"]}
    )
    with pytest.raises(FileNotFoundError):
        load(root)


def test_symlinks_are_refused_for_files_directories_and_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.js").write_text("s", encoding="utf-8")
    root = package(
        tmp_path / "pkg",
        {"index.js": "x"},
        {"schema_version": 1, "entry": "index.js", "files": ["index.js", "link.js"]},
    )
    os.symlink(outside / "secret.js", root / "link.js")
    with pytest.raises(ValueError, match="must not contain symlinks"):
        load(root)
    root2 = package(
        tmp_path / "pkg2",
        {"index.js": "x"},
        {"schema_version": 1, "entry": "index.js", "files": ["index.js", "dir/secret.js"]},
    )
    os.symlink(outside, root2 / "dir")
    with pytest.raises(ValueError, match="must not contain symlinks"):
        load(root2)
    os.symlink(root2, tmp_path / "root-link")
    with pytest.raises(ValueError, match="must not contain symlinks"):
        load(tmp_path / "root-link")


def test_per_file_limit_at_and_past_4_mib(tmp_path: Path) -> None:
    at = package(tmp_path / "at", {"index.js": b"x" * MAX_FILE_BYTES})
    assert len(load(at).files["index.js"].content) == MAX_FILE_BYTES
    past = package(tmp_path / "past", {"index.js": b"x" * (MAX_FILE_BYTES + 1)})
    with pytest.raises(ValueError, match="size limit exceeded"):
        load(past)


def test_package_limit_at_and_past_16_mib(tmp_path: Path) -> None:
    chunk = b"x" * MAX_FILE_BYTES
    files: dict[str, bytes | str] = {f"f{i}.js": chunk for i in range(4)}
    assert len(load(package(tmp_path / "at", files)).files) == 4
    with pytest.raises(ValueError, match="size limit exceeded"):
        load(package(tmp_path / "past", {**files, "tail.js": b"x"}))


def test_file_count_at_and_past_256(tmp_path: Path) -> None:
    names = [f"f{i}.js" for i in range(MAX_FILES + 1)]
    root = package(
        tmp_path, dict.fromkeys(names, "x"), {"schema_version": 1, "entry": "f0.js", "files": names[:MAX_FILES]}
    )
    assert len(load(root).files) == MAX_FILES
    package(tmp_path, {}, {"schema_version": 1, "entry": "f0.js", "files": names})
    with pytest.raises(ValueError, match="unique asset paths"):
        load(root)


def test_manifest_size_at_and_past_64_kib(tmp_path: Path) -> None:
    base = json.dumps({"schema_version": 1, "entry": "index.js", "files": ["index.js"]})
    padded = base[:-1] + " " * (MAX_MANIFEST_BYTES - len(base)) + "}"
    assert len(padded) == MAX_MANIFEST_BYTES
    root = package(tmp_path, {"index.js": "x"}, padded)
    assert load(root).entry == "index.js"
    package(tmp_path, {}, base[:-1] + " " * (MAX_MANIFEST_BYTES - len(base) + 1) + "}")
    with pytest.raises(ValueError, match="size limit exceeded"):
        load(root)


def test_the_manifest_name_follows_the_path_rules(tmp_path: Path) -> None:
    root = package(tmp_path, {"index.js": "x"}, name="custom.json")
    assert load(root, manifest="custom.json").entry == "index.js"
    with pytest.raises(ValueError, match="Invalid browser manifest path"):
        load(root, manifest="../custom.json")
