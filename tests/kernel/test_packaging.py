"""The distribution installs the repository's folders under the one name `almanac`, never as bare packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import msgspec

from almanac.events import registry

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"client": "almanac.client", "events": "almanac.events", "games": "almanac.games", "projections": "almanac.projections", "services": "almanac.services",
           "storage": "almanac.storage"}


def test_the_package_list_names_every_package_folder():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {name: folder for folder, name in FOLDERS.items()}
    found = sorted(
        FOLDERS[init.parent.relative_to(ROOT).parts[0]] + "".join(f".{p}" for p in init.parent.relative_to(ROOT).parts[1:])
        for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
    )
    assert sorted(setuptools["packages"]) == found


def test_the_wheel_installs_into_a_clean_venv_under_the_almanac_name(tmp_path):
    # Given the wheel built from a copy of the checkout (pip builds in the tree it is given: not ours)
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".almanac", ".pytest_cache", ".ruff_cache"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels), str(source)], check=True, cwd=tmp_path, capture_output=True)
    [wheel] = wheels.glob("almanac-*.whl")

    # When it is installed into a fresh venv that has nothing else
    env_dir = tmp_path / "clean"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True)

    # Then it holds one top-level package, almanac, with the five folders below it
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"almanac"}
    # and no benchmark: they are a distribution of their own (bench/), not part of the runtime
    assert not [name for name in archive.namelist() if name.startswith(("almanac/bench/", "almanac/services/bench/"))
                or "boardgameio" in name]
    assert {p.name for p in (site / "almanac").iterdir() if p.is_dir()} >= set(FOLDERS)
    assert not any((site / bare).exists() for bare in FOLDERS)
    # package data travels too: a game's console picture, its rulebook (beside the game) and its versions' fingerprints
    assert (site / "almanac" / "games" / "board" / "picture.js").exists()
    assert all((site / "almanac" / "games" / game / "RULES.md").exists() for game in ("board", "claim", "realm", "sectors"))
    assert (site / "almanac" / "games" / "realm" / "v2" / "fingerprints.toml").exists()

    # And the pure write model imports from there (msgspec is its only dependency: lent from this
    # interpreter), finding the rule-sets through the installed entry points, away from the checkout
    lent = tmp_path / "lent"
    lent.mkdir()
    (lent / "msgspec").symlink_to(Path(msgspec.__file__).parent)
    probe = ("import almanac.events.registry as r, almanac.events.codec; "
             "m = r.manifest('realm'); print(m.ref, r.installed(), almanac.events.codec.__file__); "
             "print(*(v.fingerprint + ' ' + str(v.revision(v.fingerprint).number) for v in r.all_manifests()))")
    shown = subprocess.run([str(python), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(lent)}).stdout
    assert shown.startswith("realm@1 ['board', 'claim', 'realm', 'sectors'] ")  # the default version
    assert str(site / "almanac" / "events" / "codec.py") in shown
    # and each version's code hashes as in the checkout, a revision on the list the wheel carries
    here = [f"{m.fingerprint} {m.revision(m.fingerprint).number}" for m in registry.all_manifests()
            if m.name in ("board", "claim", "realm", "sectors")]
    assert " ".join(here) == shown.splitlines()[1]


def test_the_container_image_copies_every_package_folder_before_installing():
    # pip installs the image from the folders it was given: a folder left out is a package missing in it
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert [folder for folder in FOLDERS if f"COPY {folder} ./{folder}\n" not in dockerfile] == []


def test_the_benchmarks_are_a_distribution_of_their_own_with_the_peer_files_and_no_import_of_the_cli(tmp_path):
    # Given the bench/ folder built as its own wheel
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(ROOT / "bench")], check=True, cwd=tmp_path, capture_output=True)
    [wheel] = tmp_path.glob("almanac_bench-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    # Then it installs almanac.bench, boardgame.io's files for `bench e2e --peer` included (package data)
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"almanac"}
    assert {"almanac/bench/e2e.py", "almanac/bench/boardgameio/package.json",
            "almanac/bench/boardgameio/package-lock.json", "almanac/bench/boardgameio/server.js"} <= set(names)
    # And no benchmark imports the CLI (whose `bench` commands import the benchmarks): the stacks they start
    # come from services/supervisor.py, which imports neither
    for module in (ROOT / "bench").glob("*.py"):
        assert "almanac.services.cli" not in module.read_text(), module.name
    assert "almanac.services.cli" not in (ROOT / "services" / "supervisor.py").read_text().replace(
        "from almanac.services.cli import main; main()", "")  # the children it starts run the CLI


def test_no_process_opens_a_messaging_framework_connection_that_carries_nothing():
    # FastStream carried no message of Almanac's (its broker only wrapped the process lifecycle, on a Redis connection
    # of its own): the runtime neither depends on it nor imports it (docs/design-rulings.md, "FastStream"); only the
    # benchmark that measures it does
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in dependencies if d.lower().startswith("faststream")]
    for folder in FOLDERS:
        for module in (ROOT / folder).rglob("*.py"):
            source = module.read_text()
            assert "import faststream" not in source and "from faststream" not in source, module
