"""The layering `shared/__init__.py` states, checked on the source with `ast` (nothing imported):

(a) no module in `shared/` outside `shared/checkpoints/` imports a framework, anywhere in the
    file (inside functions too): framework code lives in `ports/<fw>/`;
(b) imports run one way: `cli` -> the tools (`training`, `teaching`, `measure`, `checkpoints`,
    `report`, `your_model`) -> `runtime` -> `core`, and among the tools `teaching` / `measure` ->
    `your_model` -> `checkpoints`; `experiments/` may import the product, never the reverse;
(c) `ports/` stands on the core alone: `shared.core`, `shared.errors`, `shared.runtime.contract`,
    `ports`, the frameworks and other libraries, never a tool, the CLI or the rest of the runtime;
(d) the worker's job table: every `JobKind(NAME, function)` names a function of the module that
    declares it, in a package that may import the runtime, each name once; the runtime names no
    tool module in a string (the way a table of "module:function" strings used to reach up);
(e) no import circle in `shared/` and `ports/`, at module level or inside functions;
(f) modules stay under ~300 lines and functions under ~60 statements, with the few current
    exceptions listed below, each with its reason;
(g) every repository file a product file names (a path with a suffix, in a docstring, comment or
    page) exists.
Each rule is a function of source text, and a planted violation of each is shown to fail.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "shared"
FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "flax", "optax", "onnx", "onnxruntime")
TOOLS = ("shared.training", "shared.teaching", "shared.measure", "shared.checkpoints", "shared.report",
         "shared.your_model")
EXPERIMENTS = "experiments"  # research beside the product: it may import the product, never the reverse
# package -> the imports it must never make (module prefixes)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "shared.core": ("shared.runtime", *TOOLS, "shared.cli", "ports", EXPERIMENTS),
    "shared.runtime": (*TOOLS, "shared.cli", EXPERIMENTS),
    **{tool: ("shared.cli", EXPERIMENTS) for tool in TOOLS},
}  # shared.cli may reach experiments/: `compare.py experiment` dispatches there, at the one entry
# A user's own model stands below the tools that use it (teaching's audit and verdict, measure's
# timing of it) and above checkpoints, whose plug-ins its worker reads: no arrow back, no circle.
FORBIDDEN["shared.your_model"] += ("shared.teaching", "shared.measure", "shared.training", "shared.report")
FORBIDDEN["shared.checkpoints"] += ("shared.your_model",)
# What ports/ may import from this repository (everything else of it is refused; a library is not).
PORTS_MAY_IMPORT = ("shared.core", "shared.errors", "shared.runtime.contract", "ports")
OWN_PACKAGES = ("shared", "ports", EXPERIMENTS, "compare", "portbench", "tests", "benchmarks")
# Packages whose modules may declare a job kind: those that may import the runtime.
JOB_KIND_PACKAGES = ("shared.runtime", *TOOLS, EXPERIMENTS)
MAX_LINES = 300
MAX_STATEMENTS = 60
# Current exceptions to (c): module path -> why it is one piece.
LONG_MODULES: dict[str, str] = {  # "path" -> why it may exceed MAX_LINES
    "shared/core/spec.py": "the spec, its bounds and its derived tensors are one concern: split, each half "
                           "imported the other (a circle)",
    "ports/keras/port.py": "the parallel text's interface with a branch per Keras backend (TensorFlow, JAX, "
                           "torch) in each runtime function: it cannot split alone",
    "shared/teaching/divergences.py": "the catalogue, one row per divergence holding all of it "
                                      "(alternatives, specs, demonstration, lesson): a table read top to "
                                      "bottom, where a new divergence is one row",
    "shared/core/presets.py": "the catalogue of named specs, one entry per preset stating every field and "
                              "its source: a table read top to bottom, where a new preset is one entry; "
                              "the full-size ones build on the small ones' base specs (_VIT_B16), so a "
                              "split would import them back",
    "shared/measure/peer_timing.py": "the peers' timing, whole: which public implementation builds which "
                                     "spec, the job kind, its worker side and the A/B findings",
    "ports/keras/user.py": "the parallel text of a user's model in Keras: the interface every port's user.py "
                           "has, with one walk for Keras 3 and tf_keras layers and functional graphs",
    "shared/core/weights.py": "the canonical layout whole: its table, its file, and each conversion to a "
                              "framework's layout beside its inverse",
    "shared/your_model/proposal_structure.py": "what a model's layers state, whole: the patch projection, "
                                               "blocks, norms and head read from the same units",
    "shared/your_model/proposal.py": "the spec read from a model, whole: its sources in their order "
                                     "(a library's configuration, the state dict, the layers, the "
                                     "structure, conventions, dependent defaults) and the record that "
                                     "carries each field's source and refuses what was not read",
    "shared/core/record.py": "a record and the reading of each field by its declared type are one concern: "
                             "from_dict, --set and the instance check all go through the typed values "
                             "below the class, and what writes a record back (to_dict, TOML, the hash) "
                             "beside them",
}
# each port's model.py: the spec's whole model read top to bottom, one parallel text per port (as
# lucidrains' one-file ViT); a split would put half of every port-to-port diff in another file
# a checkpoint library's plug-in: its keys, conventions, names, reading, writing and a live model's
# reading, whole; adding a library is adding one file
LONG_MODULES["shared/core/mapping.py"] = ("the one mapping format whole: its layouts (each a library's "
                                          "tensor form beside its inverse) and the Table that applies them")
LONG_MODULES |= {f"shared/checkpoints/libraries/{name}.py": "one checkpoint library, whole"
                 for name in ("hf", "keras_hub", "timm")}
LONG_MODULES |= {f"ports/{fw}/model.py": "one model, read top to bottom as a parallel text"
                 for fw in ("torch", "keras", "flax", "mlx")}
LONG_MODULES["shared/core/reference.py"] = ("the oracle: the float64 model read top to bottom, as each "
                                            "port's model.py, which it is compared with block by block")
LONG_FUNCTIONS: dict[str, str] = {}  # "path::function" -> why


def python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*.py"))


def code_roots() -> tuple[Path, ...]:
    """The product and what stands beside it: shared/, ports/ and experiments/ when present."""
    return SHARED, ROOT / "ports", ROOT / EXPERIMENTS


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(text: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in `text`, at any depth, and every
    `importlib.import_module("...")` / `__import__("...")` of a literal name."""
    out = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, base))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = ast.unparse(node.func)
            if func in ("importlib.import_module", "import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_import_walker_sees_every_kind_of_import() -> None:
    text = "\n".join([
        "import numpy as np",
        "def f():",
        "    from torch import nn",
        "    import jax.numpy",
        "    return importlib.import_module('keras')",
        "from . import sibling",
        "from ..core import spec",
    ])
    assert imports_in(text, "shared.teaching.demo", is_package=False) == [
        (1, "numpy"), (6, "shared.teaching"), (7, "shared.core"), (3, "torch"), (4, "jax.numpy"),
        (5, "keras")]


def test_no_framework_import_in_shared_outside_checkpoints() -> None:
    found = []
    for path in python_files(SHARED):
        if path.is_relative_to(SHARED / "checkpoints"):
            continue
        for line, name in imported(path):
            if any(_under(name, fw) for fw in FRAMEWORKS):
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    assert not found, "framework code belongs in ports/<fw>/:\n" + "\n".join(found)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_run_one_way(package: str) -> None:
    found = []
    for path in python_files(ROOT / Path(*package.split("."))):
        for line, name in imported(path):
            bad = [p for p in FORBIDDEN[package] if _under(name, p)]
            if bad:
                found.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    assert not found, f"{package} must not import {', '.join(FORBIDDEN[package])}:\n" + "\n".join(found)


# ---- (c) ports/ stands on the core alone --------------------------------------------------------
def port_violations(found: list[tuple[int, str]], where: str) -> list[str]:
    """The imports of a ports/ module that reach this repository above the core."""
    own = [(line, name) for line, name in found if any(_under(name, p) for p in OWN_PACKAGES)]
    return [f"{where}:{line}: imports {name}" for line, name in own
            if name != "shared" and not any(_under(name, p) for p in PORTS_MAY_IMPORT)]


def test_ports_import_only_the_core() -> None:
    found = []
    for path in python_files(ROOT / "ports"):
        found += port_violations(imported(path), path.relative_to(ROOT).as_posix())
    assert not found, (f"ports/ may import only {', '.join(PORTS_MAY_IMPORT)} of this repository: move "
                       "what it needs into shared/core:\n" + "\n".join(found))


def test_a_planted_port_import_of_a_tool_fails() -> None:
    text = "\n".join([
        "import numpy as np",
        "import torch",
        "from shared.core.train_spec import TrainSpec",
        "from shared.errors import InputError",
        "from shared.runtime.contract import PortLike",
        "from ports.torch.model import VisionTransformer",
        "from shared import REPO_ROOT",
        "def f():",
        "    from shared.training.trainloop import train_seed",
        "from shared.runtime.launch import run_worker",
        "from ..teaching import probes",
        "import experiments.plateau",
    ])
    assert port_violations(imports_in(text, "ports.torch.train", is_package=False), "t.py") == [
        "t.py:10: imports shared.runtime.launch", "t.py:12: imports experiments.plateau",
        "t.py:9: imports shared.training.trainloop"]
    relative = imports_in("from ...shared.teaching import probes", "ports.torch.defaults", is_package=False)
    assert relative == [(1, "shared.teaching")]  # a relative import cannot hide the package it reaches


# ---- (d) the worker's job table -----------------------------------------------------------------
def job_kinds_in(text: str, module: str) -> tuple[list[tuple[int, str]], list[str]]:
    """([(line, kind name)], problems) for every `JobKind(...)` call in `text`."""
    tree = ast.parse(text)
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    kinds, problems = [], []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "JobKind"):
            continue
        where = f"{module}:{node.lineno}"
        name, handler = [*node.args, None, None][:2]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) or node.keywords:
            problems.append(f"{where}: JobKind takes a literal name and a function, positionally")
            continue
        kinds.append((node.lineno, name.value))
        if not (isinstance(handler, ast.Name) and handler.id in functions):
            target = ast.unparse(handler) if handler is not None else "nothing"
            problems.append(f"{where}: job kind {name.value!r} runs {target}, not a function this module "
                            "defines (a kind is declared beside its handler)")
        if not any(_under(module, p) for p in JOB_KIND_PACKAGES):
            problems.append(f"{where}: job kind {name.value!r} declared in {module}; only "
                            f"{', '.join(JOB_KIND_PACKAGES)} may declare job kinds")
    return kinds, problems


def runtime_names_up(text: str, module: str) -> list[str]:
    """String constants (docstrings aside) of a runtime module that name a module it may not import."""
    tree = ast.parse(text)
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [f"{module}:{n.lineno}: names {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and any(_under(n.value.partition(":")[0], p) for p in FORBIDDEN["shared.runtime"])]


def job_table(paths: list[tuple[str, str]]) -> tuple[dict[str, list[str]], list[str]]:
    """(kind -> the modules declaring it, problems) over (module, text) pairs."""
    declared: dict[str, list[str]] = {}
    problems = []
    for module, text in paths:
        kinds, found = job_kinds_in(text, module)
        problems += found
        for _, name in kinds:
            declared.setdefault(name, []).append(module)
        if _under(module, "shared.runtime"):
            problems += runtime_names_up(text, module)
    problems += [f"job kind {name!r} declared {len(where)} times: {', '.join(where)}"
                 for name, where in declared.items() if len(where) > 1]
    return declared, problems


def test_every_job_kind_is_declared_beside_its_handler() -> None:
    sources = [(module_name(p), p.read_text()) for p in python_files(*code_roots())]
    declared, problems = job_table(sources)
    assert not problems, "the worker's job table:\n" + "\n".join(problems)
    # the kinds the product's commands hand the worker; experiments/ may add its own
    product = {name for name, where in declared.items() if not _under(where[0], EXPERIMENTS)}
    assert product >= {"logits", "taps", "user", "devices", "timing", "peers", "steps", "grad", "loop",
                       "diverge"}, sorted(product)


def test_a_planted_job_table_violation_fails() -> None:
    good = "def steps(framework, job, out):\n    pass\nSTEPS = JobKind('steps', steps)\n"
    assert job_table([("shared.training.parity", good)]) == ({"steps": ["shared.training.parity"]}, [])
    by_string = "K = JobKind('warp', 'shared.training.parity:steps')\n"
    imported_handler = "from shared.training.parity import steps\nK = job_kinds.JobKind('warp', steps)\n"
    in_core = "def f(framework, job, out):\n    pass\nK = JobKind('core', f)\n"
    table_up = "KINDS = {'steps': 'shared.training.parity:steps'}\n"
    _, problems = job_table([("shared.runtime.worker", by_string + table_up),
                             ("shared.runtime.jobs", imported_handler),
                             ("shared.core.spec", in_core),
                             ("shared.measure.phases", good), ("experiments.plateau", good)])
    assert problems == [
        "shared.runtime.worker:1: job kind 'warp' runs 'shared.training.parity:steps', not a function this "
        "module defines (a kind is declared beside its handler)",
        "shared.runtime.worker:1: names 'shared.training.parity:steps'",
        "shared.runtime.worker:2: names 'shared.training.parity:steps'",
        "shared.runtime.jobs:2: job kind 'warp' runs steps, not a function this module defines (a kind is "
        "declared beside its handler)",
        f"shared.core.spec:3: job kind 'core' declared in shared.core.spec; only "
        f"{', '.join(JOB_KIND_PACKAGES)} may declare job kinds",
        "job kind 'warp' declared 2 times: shared.runtime.worker, shared.runtime.jobs",
        "job kind 'steps' declared 2 times: shared.measure.phases, experiments.plateau"]


# ---- (e) no import circle -----------------------------------------------------------------------
def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules of `sources` it imports, at any depth. `sources`: module -> (text,
    is_package). `from X import a` is an edge to X.a when that is a module, else to X. An import
    under `if TYPE_CHECKING:` is no edge: it never runs, so it cannot make a circle (the layer
    rules above still check its direction)."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for module, (text, is_package) in sources.items():
        tree = ast.parse(text)
        names = {(n.lineno, n.module, tuple(a.name for a in n.names)) for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
        type_only = {inner.lineno for n in ast.walk(tree) if isinstance(n, ast.If)
                     and ast.unparse(n.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                     for stmt in n.body for inner in ast.walk(stmt)}
        for line, name in imports_in(text, module, is_package):
            if line in type_only:
                continue
            members = next((m for ln, _, m in names if ln == line), ())
            targets = [f"{name}.{m}" for m in members if f"{name}.{m}" in sources] or [name]
            graph[module] |= {t for t in targets if t in sources and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_shared_and_ports() -> None:
    sources = {module_name(p): (p.read_text(), p.name == "__init__.py")
               for p in python_files(SHARED, ROOT / "ports")}
    found = circles(import_graph(sources))
    assert not found, "modules that import each other (move the shared piece down):\n" + \
        "\n".join(" <-> ".join(group) for group in found)


def test_a_planted_import_circle_fails() -> None:
    sources = {
        "shared.your_model.binding": ("from shared.core.mapping import Table\n"
                                      "def bind():\n    from shared.your_model.structure import links\n",
                                      False),
        "shared.your_model.structure": ("from shared.your_model import binding\n", False),
        "shared.core.mapping": ("import numpy as np\n", False),
        "shared.your_model": ("", True),
    }
    graph = import_graph(sources)
    # the module, not the package
    assert graph["shared.your_model.structure"] == {"shared.your_model.binding"}
    assert circles(graph) == [["shared.your_model.binding", "shared.your_model.structure"]]
    del sources["shared.your_model.structure"]
    sources["shared.your_model.structure"] = ("from shared.core.mapping import Table\n", False)
    assert circles(import_graph(sources)) == []
    # a type-only import back (the validation module naming ModelSpec in its annotations) runs never
    sources["shared.your_model.structure"] = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from shared.your_model.binding import Binding\n", False)
    assert circles(import_graph(sources)) == []


# ---- (f) size: a guide to splitting by concern ---------------------------------------------------
def test_modules_stay_short() -> None:
    too_long = []
    for path in python_files(SHARED, ROOT / "ports"):
        rel = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in LONG_MODULES:
            too_long.append(f"{rel}: {lines} lines")
        if rel in LONG_MODULES:
            assert lines > MAX_LINES, f"{rel} is {lines} lines now: take it off LONG_MODULES"
    assert not too_long, f"over {MAX_LINES} lines: split by concern (or list with a reason):\n" + \
        "\n".join(too_long)


def statements(node: ast.AST) -> int:
    return sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - 1  # not the def itself


def test_functions_stay_short() -> None:
    too_long = []
    listed = set()
    for path in python_files(SHARED, ROOT / "ports"):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and statements(node) > MAX_STATEMENTS:
                key = f"{rel}::{node.name}"
                listed.add(key)
                if key not in LONG_FUNCTIONS:
                    too_long.append(f"{key}: {statements(node)} statements")
    assert set(LONG_FUNCTIONS) <= listed, f"no longer long: {sorted(set(LONG_FUNCTIONS) - listed)}"
    assert not too_long, f"over {MAX_STATEMENTS} statements:\n" + "\n".join(too_long)


def test_the_newcomer_path_states_its_own_length() -> None:
    """docs/architecture.md's six files (spec -> weights -> port -> verdict) and their line count,
    read from the document itself, so the count it states stays true as the files grow."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## Spec -> weights -> port -> verdict"):]
    section = section[:section.index("\n## ", 1)]
    files = re.findall(r"^\d\. `([\w/]+\.py)`", section, re.M)
    assert len(files) == 6, files
    stated = int(re.search(r"\(([\d,]+) lines together\)", section).group(1).replace(",", ""))
    counted = sum(len((ROOT / f).read_text().splitlines()) for f in files)
    assert stated == counted, f"docs/architecture.md says {stated:,} lines; the six files have {counted:,}"


# A repository path as a product file names it: a top-level folder, then a file with a suffix. What a
# run writes (results/, runs/) is output, not a file of the repository.
NAMED_PATH = re.compile(r"(?<![\w./-])((?:shared|ports|tests|docs|tools|experiments|examples|benchmarks|"
                        r"constraints|\.ci)/[\w./-]*\.(?:py|md|txt|toml|json|html|sh|cfg))(?![\w/-])")


def named_paths(text: str) -> set[str]:
    return {m[1] for m in NAMED_PATH.finditer(text) if "{" not in m[1]}


PRODUCT_TEXTS = ("README.md", "Makefile", "pyproject.toml", "compare.py", "portbench.py", "shared", "ports",
                 "tests", "docs", "tools", "experiments", "examples", "benchmarks", ".ci")
GONE = "shared/checkpoints/" + "config_keys.py"  # split, so this file does not name it itself


def test_every_file_a_product_file_names_exists() -> None:
    """No product file points a reader at a file the repository does not have: a docstring once
    sent readers to GONE, removed when the config keys became each plug-in's Key rows."""
    found = [p for name in PRODUCT_TEXTS for p in ([ROOT / name] if (ROOT / name).is_file() else
                                                   (ROOT / name).rglob("*"))]
    texts = [p for p in found if p.is_file() and p.suffix in (".py", ".md", ".sh", ".toml", "")
             and "__pycache__" not in p.parts]
    missing = sorted({f"{p.relative_to(ROOT)}: {named}" for p in texts
                      for named in named_paths(p.read_text(encoding="utf-8", errors="replace"))
                      if not (ROOT / named).exists()})
    assert not missing, "\n".join(missing)


def test_a_planted_pointer_to_a_missing_file_fails() -> None:
    planted = f"the keys each reader reads ({GONE}); see docs/spec.md and results/x.json"
    assert named_paths(planted) == {GONE, "docs/spec.md"} and not (ROOT / GONE).exists()
