"""The documentation a user reads: short enough to read, links that lead somewhere, and no trace of how
the project was built (numbered work sessions, paths outside the repository)."""

import re
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from conftest import REPO

# Process vocabulary that means nothing to a user. pytest's scope="session" does not match.
PROCESS_WORDS = re.compile(r"sessions? ?-?\d|\.\./shared|device tool|lent GPU", re.IGNORECASE)
EXEMPT = ("data/", "tests/", ".ci/")  # corpora, the tests themselves, the CI harness


def tracked_files() -> list[str]:
    result = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip("not a git checkout")
    return [path for path in result.stdout.splitlines() if (REPO / path).is_file()]


def test_no_tracked_file_speaks_of_how_the_project_was_built():
    found = []
    for path in tracked_files():
        if path.startswith(EXEMPT):
            continue
        text = (REPO / path).read_text(encoding="utf-8", errors="replace")
        found += [
            f"{path}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if PROCESS_WORDS.search(line)
        ]
    assert not found, "\n".join(found)


def test_the_pattern_catches_what_it_must_and_spares_pytest():
    assert PROCESS_WORDS.search("measured in session 10") and PROCESS_WORDS.search("the session-6 machine")
    assert PROCESS_WORDS.search("default ../shared/data/multi30k")
    assert not PROCESS_WORDS.search('@pytest.fixture(scope="session")')


def test_the_readme_is_a_guide_not_a_log():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference material to docs/"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.MULTILINE)}


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
)
def test_every_link_leads_to_a_file_and_heading_that_exist(page):
    source = REPO / page
    text = re.sub(r"```.*?```", "", source.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (source.parent / file).resolve() if file else source
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(target)
    assert not broken, f"{page}: {broken}"


def test_every_figure_the_readme_cites_is_in_the_benchmarks():
    """The README's results table quotes rounded figures; each must round from one in docs/benchmarks.md."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Results") : readme.index("## Install")]
    benchmarks = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for commit in set(re.findall(r"\b[0-9a-f]{7}\b", table)):
        assert commit in benchmarks, commit
    measured = {
        Decimal(x).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP) for x in re.findall(r"\b\d\d\.\d+\b", benchmarks)
    }
    for bleu in set(re.findall(r"\b\d\d\.\d\b", table)):
        assert Decimal(bleu) in measured, f"README's {bleu} is not a figure of docs/benchmarks.md"
