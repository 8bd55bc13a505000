"""Startup loading of N entry-point extensions: the host's loader vs stevedore vs pluggy.

Run: ``PYTHONPATH=src python benchmarks/load.py [--repeats R]``. Not a test: prints times and
ratios measured side by side in one run.

Setup (offline, once per run): 100 tiny distributions ``dfxbench-NNN`` are written as wheels
(each package imports ``deerflow_extension_api`` and registers one assembly observer) and
installed with one ``pip install --no-index --no-deps`` into a temp venv created with
``--system-site-packages`` (plus a ``.pth`` putting this tree's ``src`` and the dev
site-packages first, as ``tests/extensions/test_real_entry_points.py`` does). Each declares
``dfxbench_NNN = dfxbench_NNN:install`` in ``deerflow.extensions`` and in the groups
``dfxbench.upto25/50/100`` it belongs to, so pluggy, which loads whole groups, can load
exactly the first N too.

Every measurement is a fresh subprocess of that venv, because import cost is most of the
cost and only a cold process pays it. Per arm, two figures:

* ``load``  — the loading call alone, timed inside the process after the framework itself is
  imported: ``load_extensions(config)`` with the N names in ``config.yaml``;
  ``NamedExtensionManager("deerflow.extensions", names)``;
  ``PluginManager.load_setuptools_entrypoints("dfxbench.uptoN")``. All three scan entry
  points and import N packages; ours also calls each ``install`` and registers a pluggy
  plugin per contribution.
* ``total`` — the process's wall time including importing the framework (deerflow_ext's
  loader pulls in pydantic and the config schema; stevedore and pluggy are small).

Target: ``load`` <= 1.2x the faster of stevedore and pluggy at 100, and linear in N.
Arms and sizes are interleaved within each repeat; figures are medians over the repeats.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

SIZES = (25, 50, 100)
ROOT = Path(__file__).resolve().parents[1]

PACKAGE = """from deerflow_extension_api import extension


class Observer:
    def on_agent_assembled(self, app_store, descriptor):
        return None


@extension(api="0.2.1")
def install(registry, config):
    registry.agent_assembly_observer(Observer())
"""

ARMS = {
    "deerflow": """
import sys, time
t0 = time.perf_counter()
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.extensions.plugin_loading.loader import load_extensions
t1 = time.perf_counter()
ext = load_extensions(load_app_config(sys.argv[2]))
t2 = time.perf_counter()
assert len(ext.loaded) == int(sys.argv[1]), ext.summary
print(t2 - t1, t2 - t0)
""",
    "stevedore": """
import sys, time
t0 = time.perf_counter()
from stevedore import NamedExtensionManager
t1 = time.perf_counter()
n = int(sys.argv[1])
mgr = NamedExtensionManager("deerflow.extensions", names=[f"dfxbench_{i:03d}" for i in range(n)],
                            invoke_on_load=False, on_load_failure_callback=None)
t2 = time.perf_counter()
assert len(mgr.extensions) == n, len(mgr.extensions)
print(t2 - t1, t2 - t0)
""",
    "pluggy": """
import sys, time
t0 = time.perf_counter()
import pluggy
t1 = time.perf_counter()
n = int(sys.argv[1])
pm = pluggy.PluginManager("deerflow")
loaded = pm.load_setuptools_entrypoints(f"dfxbench.upto{n}")
t2 = time.perf_counter()
assert loaded == n, loaded
print(t2 - t1, t2 - t0)
""",
}


def _wheel(dest: Path, i: int) -> Path:
    name, version = f"dfxbench_{i:03d}", "1.0.0"
    info = f"{name}-{version}.dist-info"
    groups = ["deerflow.extensions"] + [f"dfxbench.upto{n}" for n in SIZES if i < n]
    entry_points = "".join(f"[{g}]\n{name} = {name}:install\n\n" for g in groups)
    files = {
        f"{name}/__init__.py": PACKAGE.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: dfxbench-{i:03d}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: dfxbench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": entry_points.encode(),
    }

    def line(n: str, data: bytes) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{n},sha256={digest},{len(data)}"

    files[f"{info}/RECORD"] = ("\n".join([line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]) + "\n").encode()
    path = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return path


def make_venv(tmp: Path, count: int) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dev_site = sysconfig.get_paths()["purelib"]
    (Path(site) / "_deerflow_dev.pth").write_text(
        f"import sys; sys.path[:0] = [p for p in ({str(ROOT / 'src')!r}, {dev_site!r}) if p not in sys.path]\n"
    )
    wheels = tmp / "wheels"
    wheels.mkdir()
    paths = [str(_wheel(wheels, i)) for i in range(count)]
    env = _env()
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-deps", "-q", *paths], check=True, env=env, timeout=300
    )
    return python


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def measure(python: Path, tmp: Path, arm: str, n: int) -> tuple[float, float, float]:
    """(load seconds, in-process seconds incl. framework import, process wall seconds)."""
    script = tmp / f"arm_{arm}.py"
    config = tmp / f"config_{n}.yaml"
    start = time.perf_counter()
    done = subprocess.run(
        [str(python), str(script), str(n), str(config)], capture_output=True, text=True, env=_env(), cwd=tmp
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"the {arm} arm failed at N={n} (exit {done.returncode}): {last}")
    out = done.stdout.split()
    return float(out[0]), float(out[1]), wall


def main(repeats: int) -> None:
    if importlib.util.find_spec("stevedore") is None:
        raise SystemExit("load.py measures against stevedore, which is not installed: pip install stevedore")
    with tempfile.TemporaryDirectory(prefix="dfxbench-") as name:
        tmp = Path(name)
        t0 = time.perf_counter()
        python = make_venv(tmp, max(SIZES))
        print(f"installed {max(SIZES)} packages into a temp venv in {time.perf_counter() - t0:.1f}s")
        for arm, code in ARMS.items():
            (tmp / f"arm_{arm}.py").write_text(code)
        for n in SIZES:
            plugins = "".join(f"  - name: b{i:03d}\n    use: dfxbench_{i:03d}\n" for i in range(n))
            (tmp / f"config_{n}.yaml").write_text(f"plugins:\n{plugins}")
        baseline = tmp / "arm_bare.py"
        baseline.write_text("import sys, time\nprint(0.0, 0.0)\n")

        results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        bare: list[float] = []
        for arm in ARMS:  # warm the OS page cache for every arm once
            measure(python, tmp, arm, SIZES[0])
        for rep in range(repeats):
            bare.append(measure(python, tmp, "bare", 0)[2])
            for n in SIZES:
                arms = list(ARMS) if rep % 2 == 0 else list(reversed(ARMS))
                for arm in arms:
                    results.setdefault((arm, n), []).append(measure(python, tmp, arm, n))

    def med(arm: str, n: int, k: int) -> float:
        return statistics.median(r[k] for r in results[(arm, n)])

    print(f"python {sys.version.split()[0]}; medians of {repeats} fresh processes per cell; milliseconds")
    print(f"bare interpreter start: {statistics.median(bare) * 1e3:.0f} ms wall")
    print(f"{'N':>4} {'arm':<10}{'load':>9}{'load/N':>9}{'in-proc':>9}{'wall':>8}   load vs faster of stevedore/pluggy")
    for n in SIZES:
        faster = min(med("stevedore", n, 0), med("pluggy", n, 0))
        for arm in ARMS:
            load = med(arm, n, 0)
            print(
                f"{n:>4} {arm:<10}{load * 1e3:>9.1f}{load / n * 1e3:>9.3f}{med(arm, n, 1) * 1e3:>9.1f}"
                f"{med(arm, n, 2) * 1e3:>8.0f}   {load / faster:.2f}x"
            )
    ours = [med("deerflow", n, 0) for n in SIZES]
    print(
        "linearity (deerflow load per extension, 25/50/100): "
        + ", ".join(f"{v / n * 1e3:.3f} ms" for v, n in zip(ours, SIZES, strict=True))
    )
    print("target: deerflow load <= 1.2x the faster of stevedore and pluggy at N=100, linear in N")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    main(parser.parse_args().repeats)
