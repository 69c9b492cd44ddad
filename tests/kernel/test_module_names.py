"""One name per thing: no two modules of the product share a file name, but where the name is a convention.

Two ``worker.py``, a ``console.py`` beside a ``console/`` folder and ``dispute.py`` in three places made a newcomer
guess which file a name meant (issue 29, item 8); so did ``bots.py`` and ``projections.py`` in the CLI beside the
bots service and the projections package. The CLI's modules are named after the commands they hold
(``*_commands.py``). The games (games/, examples/) are left out: each rule-set has the same layout on purpose
(manifest, game, rules, ...), as are the benchmarks (bench/: each named after what it measures).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("events", "services", "projections", "storage", "client")
# A file name several packages use on purpose, and why it names one thing in each.
CONVENTIONS = {
    "__init__.py": "a package",
    "errors.py": "a package's own exception types (events, the gateway's API errors, forensics' answers)",
    "metrics.py": "a process's own figures (the gateway's Prometheus registry, the engine's counters)",
    "signing.py": "the kernel's check of a player's signature and the client's signer of the same bytes",
}


def shared_names(root: Path = ROOT) -> dict[str, list[str]]:
    """Each file name more than one product module has, with their paths."""
    found: dict[str, list[str]] = defaultdict(list)
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            if not {"build", "dist", "node_modules"} & set(path.parts):
                found[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_product_modules_share_a_name_but_by_convention():
    assert {name: paths for name, paths in shared_names().items() if name not in CONVENTIONS} == {}


def test_each_convention_is_still_used():
    assert sorted(set(CONVENTIONS) - set(shared_names())) == []


def test_two_modules_of_one_name_are_found(tmp_path):
    for folder in ("services/cli", "services/engine"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "worker.py").write_text('"""A worker."""\n')
    assert shared_names(tmp_path) == {"worker.py": ["services/cli/worker.py", "services/engine/worker.py"]}
