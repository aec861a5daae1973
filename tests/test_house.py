"""The house's shape: imports run one way (no cycle between the library's modules),
no library function over 60 lines, the demo tooling in its own room."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# setup.py maps the package seahorse_metrics.tasks onto the top-level tasks/ folder.
PACKAGE_DIRS = {
    "seahorse_metrics": ROOT / "seahorse_metrics",
    "seahorse_metrics.tasks": ROOT / "tasks",
}


def _library_modules() -> dict[str, pathlib.Path]:
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package] + parts)] = path
    return modules


def _imported(module: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """Library modules `module` imports anywhere in its file (function-level too)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            # The longest library module the name starts with.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_import_cycle_in_the_library():
    modules = _library_modules()
    known = set(modules)
    # A package's __init__ importing its own submodules is how packages
    # expose them, not a cycle between modules: only edges between distinct
    # non-ancestor modules count.
    graph = {
        name: {
            target
            for target in _imported(name, path, known)
            if not name.startswith(target + ".") and not target.startswith(name + ".")
        }
        for name, path in modules.items()
    }
    cycle = _cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize(
    "source,expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
    ],
)
def test_the_cycle_finder_finds_cycles(source, expected):
    assert _cycle(source) == expected


# ------------------------------------------------- the demo tooling's room

DEMO_DATA = ROOT / "demo_data"


def _imports_of(path: pathlib.Path) -> set[str]:
    """Every module name `path` imports (function-level too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add(node.module or "")
    return names


def test_the_library_never_imports_the_demo_tooling():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imports_of(path) if name.split(".")[0] == "demo_data"
        )
        for path in _library_modules().values()
    }
    assert not {path: names for path, names in offenders.items() if names}, (
        "the library imports demo_data/, which is not installed"
    )


def test_setup_installs_the_library_and_not_the_demo_tooling(monkeypatch):
    import runpy

    import setuptools

    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"))
    packages = captured["packages"]
    assert "seahorse_metrics" in packages and "seahorse_metrics.tasks" in packages
    assert not [name for name in packages if name.split(".")[0] == "demo_data"]


def _functions_over(paths, longest: int) -> list[str]:
    """`file:line name (n lines)` of every function (or method) longer than
    `longest` lines, docstring included."""
    too_long = []
    for path in sorted(paths):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > longest:
                    too_long.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)"
                    )
    return too_long


def test_library_functions_are_at_most_sixty_lines():
    too_long = _functions_over(_library_modules().values(), 60)
    assert not too_long, f"over 60 lines (split them into named steps): {too_long}"


def test_demo_tooling_functions_fit_on_one_screen():
    too_long = _functions_over(DEMO_DATA.rglob("*.py"), 50)
    assert not too_long, f"over 50 lines: {too_long}"


@pytest.mark.parametrize(
    "module", ["demo_data.sample", "demo_data.vocab", "demo_data.backbone", "demo_data.qfs"]
)
def test_the_documented_demo_tooling_commands_run(module):
    import subprocess
    import sys

    from test_readme import documents  # the README and the documentation's pages

    text = "".join(pathlib.Path(path).read_text(encoding="utf-8") for path in documents())
    assert f"python -m {module}" in text
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"usage: python -m {module}" in result.stdout


# ------------------------------------------------- packages and modules


def _package_of(module: str) -> str:
    """`seahorse_metrics.scoring.files` -> `seahorse_metrics.scoring`; a module at
    the top (`seahorse_metrics.predict`) is a room of its own."""
    parts = module.split(".")
    if module == "seahorse_metrics.tasks" or module.startswith("seahorse_metrics.tasks."):
        return "seahorse_metrics.tasks"
    return ".".join(parts[:2])


def package_graph() -> dict[str, set[str]]:
    """Package -> the packages its modules import, through every import
    (module level and inside functions)."""
    modules = _library_modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = _package_of(name)
        graph.setdefault(source, set())
        for target in _imported(name, path, known):
            if target != "seahorse_metrics" and _package_of(target) != source:
                graph[source].add(_package_of(target))
    return graph


def test_no_import_cycle_between_packages():
    """One direction between packages, whatever the import's place: an import
    inside a function (kept there for start-up time) may only point down."""
    cycle = _cycle(package_graph())
    assert not cycle, "import cycle between packages: " + " -> ".join(cycle)


def test_library_modules_are_at_most_600_lines():
    too_long = {
        str(path.relative_to(ROOT)): length
        for path in _library_modules().values()
        if (length := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert not too_long, f"modules over 600 lines (split them by what they own): {too_long}"


def test_one_public_face_and_the_client_stays_light():
    """Issue 45 point 8: `seahorse_metrics` names the public classes (the
    client among them, beside the server in `serving/`); importing the
    package and the client loads neither JAX nor a server package."""
    import subprocess
    import sys

    script = (
        "import sys, seahorse_metrics as s\n"
        "from seahorse_metrics.serving import client\n"
        "assert s.RemoteScorer is client.RemoteScorer, s.RemoteScorer\n"
        "heavy = sorted({'jax', 'starlette', 'uvicorn', 'flax'} & set(sys.modules))\n"
        "assert not heavy, heavy\n"
        "print(sorted(s.__all__))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == str(
        ["MultiScorer", "RemoteScorer", "Scorer", "__version__"]
    )
    assert not (ROOT / "seahorse_metrics" / "client.py").exists()
