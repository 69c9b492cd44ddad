"""The docs stand on their own: every repository path they name exists, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "games").glob("*/RULES.md"))]
# Where a path named in the docs may start: the repository's own folders and top-level files.
TOP = ("client/", "clients/", "events/", "games/", "projections/", "services/", "tests/", "docs/", "examples/", "deploy/", ".ci/")
TOP_FILES = ("README.md", "pyproject.toml")
# Placeholders and patterns in a named path (`events/<name>/`, `tests/golden/*.json`) are not checked.
PATTERN = re.compile(r"[<>*{}\[\]|$]")
# What once pointed at files beside the checkout (design notes, seed texts, measurements).
OUTSIDE = re.compile(r"\.\./shared|shared/notes|shared/seeds|DESIGN\.md|/work/")


def named_paths(text: str) -> set[str]:
    """Paths a doc names: in backticks (`events/codec.py`, `events/codec.py:12`) and relative links."""
    found = set(re.findall(r"`([^`\s]+)`", text)) | set(re.findall(r"\]\(([^)\s#]+)", text))
    paths = set()
    for token in found:
        token = token.split(":")[0].rstrip(".,;")
        if PATTERN.search(token) or "://" in token:
            continue
        if token.startswith(TOP) or token in TOP_FILES:
            paths.add(token)
    return paths


def test_every_repository_path_the_docs_name_exists():
    missing = {
        str(doc.relative_to(ROOT)): sorted(p for p in named_paths(doc.read_text()) if not (ROOT / p).exists())
        for doc in DOCS
    }
    assert {doc: paths for doc, paths in missing.items() if paths} == {}


def test_no_doc_code_or_configuration_points_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path == Path(__file__).resolve() or path.suffix not in (".md", ".py", ".toml", ".yml", ".txt", ".jsonl", ""):
            continue
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()[:100]}")
    assert offenders == []
