"""``deerflow-ext wheels DIR``: the host and contract as wheels that install without the checkout.

``pip install .`` in a checkout finds the contract through a direct reference
(``deerflow-extension-api @ file:///…/contract``, contract/README.md says why), and pip
keeps that reference in the installed metadata: move or delete the checkout and the next
``pip install 'deerflow-ext[test]'`` fails on a path that is gone. The wheels built here
keep the exact pin (``deerflow-extension-api==<the contract's version>``) and drop the
reference, so the pair installs from a directory with ``--find-links DIR`` (offline with
``--no-index``) wherever that directory is. ``with_dependencies`` also fills the directory
with every wheel ``deerflow-ext[test]``, a hatchling build and nox need, so an extension
author's machine installs the host and runs the package's own nox with no index at all.

The build is pip's (``pip wheel``), the backend the checkout's own (hatchling); only the
finished host wheel's metadata is rewritten, with its RECORD, as the wheel format says.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .source import HOST_DISTRIBUTION

__all__ = ["CONTRACT_DISTRIBUTION", "WheelsError", "build_wheels", "drop_direct_references"]

CONTRACT_DISTRIBUTION = "deerflow-extension-api"


class WheelsError(RuntimeError):
    """The wheels cannot be built; the message is the one line the CLI prints."""


def _pip(*args: str, where: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        cwd=where,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise WheelsError(f"pip {args[0]} failed: {tail}")


def _build(project: Path, into: Path) -> Path:
    """One wheel of ``project`` (no dependencies). With hatchling importable here the build
    runs without isolation, so it needs no index either."""
    isolation = () if importlib.util.find_spec("hatchling") is None else ("--no-build-isolation",)
    before = set(into.glob("*.whl"))
    _pip("wheel", "--no-deps", *isolation, "--wheel-dir", str(into), str(project), where=project)
    (made,) = set(into.glob("*.whl")) - before
    return made


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def drop_direct_references(wheel: Path, distribution: str) -> None:
    """Remove ``Requires-Dist: <distribution> @ <url>`` from ``wheel``'s METADATA, in place.

    The version pin beside it stays; RECORD gets the new file's hash and size.
    """
    reference = re.compile(rf"^Requires-Dist: {re.escape(distribution)} @ .*\n?", re.MULTILINE | re.IGNORECASE)
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    metadata_name = next(i.filename for i, _ in entries if i.filename.endswith(".dist-info/METADATA"))
    record_name = next(i.filename for i, _ in entries if i.filename.endswith(".dist-info/RECORD"))
    files = {info.filename: data for info, data in entries}
    files[metadata_name] = reference.sub("", files[metadata_name].decode("utf-8")).encode("utf-8")
    rows = list(csv.reader(io.StringIO(files[record_name].decode("utf-8"))))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        if row and row[0] == metadata_name:
            row = [metadata_name, _record_hash(files[metadata_name]), str(len(files[metadata_name]))]
        writer.writerow(row)
    files[record_name] = out.getvalue().encode("utf-8")
    rewritten = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as target:
        for info, _ in entries:
            target.writestr(info, files[info.filename])
    rewritten.replace(wheel)


def _checkout_of(source: Path) -> Path:
    if not (source / "pyproject.toml").is_file() or not (source / "contract" / "pyproject.toml").is_file():
        raise WheelsError(
            f"{source} is not a deerflow-ext checkout (no pyproject.toml and contract/pyproject.toml); "
            "name one with --source PATH"
        )
    return source


def build_wheels(source: Path, destination: Path, *, with_dependencies: bool = False) -> list[Path]:
    """Build the host and contract wheels of checkout ``source`` into ``destination``.

    Returns the wheels written (host first, then contract, then the dependencies).
    """
    checkout = _checkout_of(source.resolve())
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="deerflow-wheels-") as scratch:
        built = Path(scratch)
        contract = _build(checkout / "contract", built)
        host = _build(checkout, built)
        drop_direct_references(host, CONTRACT_DISTRIBUTION)
        written = [Path(shutil.copy2(wheel, destination / wheel.name)) for wheel in (host, contract)]
    if with_dependencies:
        before = set(destination.glob("*.whl"))
        version = host.name.split("-")[1]
        wanted = (f"{HOST_DISTRIBUTION}[test]=={version}", "hatchling", "nox")
        _pip("wheel", "--find-links", str(destination), "--wheel-dir", str(destination), *wanted, where=destination)
        written += sorted(set(destination.glob("*.whl")) - before)
    return written
