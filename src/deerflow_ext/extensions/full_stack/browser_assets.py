"""Packaged browser assets (``BrowserAssets``): a validated, in-memory snapshot.

At registration the host reads the package's manifest and every file it lists, checks each
against the rules below, and keeps the bytes. What is served afterwards is that snapshot,
never the file system: a file edited (or swapped for a symlink) after startup is not
served until the plugin registers again, and a request path can only name a file the
snapshot holds. The revision hashes the manifest and every file's content, so any change
gives new URLs and a browser's immutable cache never serves a stale mix.

Rules (DeerFlow's assets-v1 transport, digest §4.4): the manifest is a JSON object with
exactly ``schema_version`` (the integer 1), ``entry`` (a listed ``.js``/``.mjs`` file) and
``files`` (1 to 256 unique paths); duplicate JSON keys are refused; a path is at most 512
characters of segments ``[A-Za-z0-9_-][A-Za-z0-9_.-]*`` (so no ``..``, no dotfiles, no
``%``, ``?``, ``\\`` or absolute paths); no component may be a symlink, and the resolved
file must be a regular file inside the root; only the listed media types; at most 4 MiB a
file, 16 MiB in all, 64 KiB of manifest.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from deerflow_extension_api import BrowserAssets

__all__ = [
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_PACKAGE_BYTES",
    "MAX_PATH_LENGTH",
    "MEDIA_TYPES",
    "Asset",
    "LoadedBrowserAssets",
    "load_browser_assets",
    "valid_asset_path",
]

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_PACKAGE_BYTES = 16 * 1024 * 1024
MAX_FILES = 256
MAX_MANIFEST_BYTES = 64 * 1024
MAX_PATH_LENGTH = 512

MEDIA_TYPES: Mapping[str, str] = MappingProxyType(
    {
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".css": "text/css",
        ".json": "application/json",
        ".map": "application/json",
        ".wasm": "application/wasm",
        ".png": "image/png",
        ".jpg": "image/jpeg",
        ".jpeg": "image/jpeg",
        ".gif": "image/gif",
        ".webp": "image/webp",
        ".svg": "image/svg+xml",
        ".ico": "image/x-icon",
        ".woff": "font/woff",
        ".woff2": "font/woff2",
        ".ttf": "font/ttf",
        ".otf": "font/otf",
    }
)
_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_MANIFEST_KEYS = frozenset({"schema_version", "entry", "files"})


@dataclass(frozen=True, slots=True)
class Asset:
    """One snapshotted file: its bytes and the media type it is served as."""

    content: bytes
    media_type: str


@dataclass(frozen=True, slots=True)
class LoadedBrowserAssets(BrowserAssets):
    """The declaration plus what registration read: the entry, the revision, the files."""

    entry: str = field(default="", kw_only=True)
    revision: str = field(default="", kw_only=True)
    files: Mapping[str, Asset] = field(default_factory=lambda: MappingProxyType({}), kw_only=True)


def valid_asset_path(path: object) -> bool:
    """Whether ``path`` may name a packaged asset (in a manifest or a request)."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_LENGTH:
        return False
    return all(_SEGMENT.fullmatch(segment) for segment in path.split("/"))


def load_browser_assets(declaration: BrowserAssets) -> LoadedBrowserAssets:
    """Read, check and snapshot ``declaration``; ``ValueError`` (or ``FileNotFoundError``
    for a listed file that is missing) names the first rule broken."""
    root = Path(declaration.root)
    if root.is_symlink():
        raise ValueError("Browser assets must not contain symlinks")
    root = root.resolve(strict=True)
    if not root.is_dir():
        raise ValueError("Browser asset root must be a directory")
    if not valid_asset_path(declaration.manifest):
        raise ValueError("Invalid browser manifest path")
    manifest = _parse_manifest(_read(root, declaration.manifest, MAX_MANIFEST_BYTES))
    entry, paths = manifest["entry"], manifest["files"]
    files: dict[str, Asset] = {}
    total = 0
    for path in paths:
        media_type = _media_type(path)
        content = _read(root, path, MAX_FILE_BYTES)
        total += len(content)
        if total > MAX_PACKAGE_BYTES:
            raise ValueError("Browser asset size limit exceeded")
        files[path] = Asset(content, media_type)
    return LoadedBrowserAssets(
        declaration.module,
        declaration.root,
        declaration.manifest,
        declaration.public_fields,
        entry=entry,
        revision=_revision(manifest, files),
        files=MappingProxyType(files),
    )


def _parse_manifest(raw: bytes) -> dict[str, Any]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("Duplicate browser manifest key")
        return dict(pairs)

    try:
        manifest = json.loads(raw.decode("utf-8"), object_pairs_hook=unique)
    except UnicodeDecodeError:
        raise ValueError("Browser manifest must be UTF-8 JSON") from None
    except json.JSONDecodeError:
        raise ValueError("Browser manifest must be UTF-8 JSON") from None
    if not isinstance(manifest, dict) or manifest.keys() != _MANIFEST_KEYS:
        raise ValueError("Browser manifest must be an object with exactly schema_version, entry and files")
    version = manifest["schema_version"]
    if type(version) is not int or version != 1:
        raise ValueError("Unsupported browser asset manifest; expected schema_version 1")
    files = manifest["files"]
    if (
        not isinstance(files, list)
        or not 1 <= len(files) <= MAX_FILES
        or len(set(map(str, files))) != len(files)
        or not all(valid_asset_path(path) for path in files)
    ):
        raise ValueError("Browser manifest must list unique asset paths")
    entry = manifest["entry"]
    if not valid_asset_path(entry) or entry not in files or not entry.endswith((".js", ".mjs")):
        raise ValueError("Browser manifest entry must be a listed JavaScript module")
    return manifest


def _media_type(path: str) -> str:
    suffix = path[path.rfind(".") :].lower() if "." in path else ""
    media_type = MEDIA_TYPES.get(suffix)
    if media_type is None:
        raise ValueError(f"Unsupported browser asset file type: {path}")
    return media_type


def _read(root: Path, relative: str, limit: int) -> bytes:
    """The bytes of ``root/relative``, refusing symlinks anywhere below root and escapes."""
    current = root
    for part in relative.split("/"):
        current = current / part
        if current.is_symlink():
            raise ValueError("Browser assets must not contain symlinks")
    resolved = current.resolve(strict=True)  # FileNotFoundError for a listed file that is missing
    if not resolved.is_relative_to(root) or not resolved.is_file():
        raise ValueError(f"Browser asset is not a regular file inside the package: {relative}")
    with resolved.open("rb") as handle:
        content = handle.read(limit + 1)
    if len(content) > limit:
        raise ValueError("Browser asset size limit exceeded")
    return content


def _revision(manifest: Mapping[str, Any], files: Mapping[str, Asset]) -> str:
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    for path in sorted(files):
        digest.update(path.encode("utf-8") + b"\0" + hashlib.sha256(files[path].content).digest())
    return digest.hexdigest()
