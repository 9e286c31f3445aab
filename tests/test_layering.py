"""The package's imports run one way (docs/architecture.md): between its parts (each subpackage of mt, and
each module at mt's top level) there is no loop, so every part can be read, tested and replaced above the
parts it stands on. Imports inside functions count: they tie the parts just the same."""

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "mt"


def part_of(module: str) -> str:
    """The part a module belongs to: mt.data.tokenizer -> data; mt.inference -> inference; mt -> mt."""
    names = module.split(".")
    return names[1] if len(names) > 1 else "mt"


def module_name(path: Path) -> str:
    names = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def imported_modules(path: Path) -> set[str]:
    """The mt modules a file imports anywhere in it (from mt.x import y: mt.x, or mt.x.y where that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "mt"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "mt":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                place = REPO / Path(*submodule.split("."))
                found.add(submodule if place.is_dir() or place.with_suffix(".py").is_file() else node.module)
    return found


def part_imports(files: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """part -> part it imports -> the 'module -> module' imports that tie them (the mt package's own
    __init__ hands names on lazily and is left out: it stands above every part)."""
    ties: dict[str, dict[str, list[str]]] = {}
    for module, imports in files.items():
        if module == "mt":
            continue
        for target in imports:
            a, b = part_of(module), part_of(target)
            if a != b and b != "mt":
                ties.setdefault(a, {}).setdefault(b, []).append(f"{module} -> {target}")
    return ties


def loops(ties: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected sets of two or more parts (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(part: str) -> None:
        index[part] = low[part] = len(index)
        stack.append(part)
        for other in ties.get(part, {}):
            if other not in index:
                visit(other)
                low[part] = min(low[part], low[other])
            elif other in stack:
                low[part] = min(low[part], index[other])
        if low[part] == index[part]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == part:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for part in sorted({*ties, *(b for targets in ties.values() for b in targets)}):
        if part not in index:
            visit(part)
    return found


def package_imports() -> dict[str, set[str]]:
    return {module_name(path): imported_modules(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_the_parts_of_the_package_import_each_other_without_a_loop():
    ties = part_imports(package_imports())
    described = []
    for members in loops(ties):
        between = [tie for a in members for b in members if b in ties.get(a, {}) for tie in sorted(ties[a][b])]
        described.append(f"{' <-> '.join(members)}: {'; '.join(between)}")
    assert not described, "imports that loop between parts of mt:\n" + "\n".join(described)


def test_the_check_finds_a_loop_between_parts_and_names_its_imports():
    files = {
        "mt.config.validation": {"mt.data.tokenizer", "mt.errors"},
        "mt.data.tokenizer": {"mt.errors"},
        "mt.data.prepare": {"mt.config.schema"},
        "mt.config.schema": set(),
        "mt.errors": set(),
        "mt": {"mt.inference"},  # the package's face imports everything: no loop of its own
        "mt.inference": {"mt.errors"},
    }
    ties = part_imports(files)
    assert loops(ties) == [["config", "data"]]
    assert ties["config"]["data"] == ["mt.config.validation -> mt.data.tokenizer"]
    del files["mt.data.prepare"]
    assert loops(part_imports(files)) == []


def test_imports_are_read_wherever_they_stand(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import mt.data.tokenizer\n"
        "from mt.config import validation\n"
        "from mt.languages import into\n"
        "def lazy():\n"
        "    from mt.model import Transformer\n"
        "import os\n"
    )
    assert imported_modules(source) == {"mt.data.tokenizer", "mt.config.validation", "mt.languages", "mt.model"}
