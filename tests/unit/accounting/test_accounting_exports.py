import ast
import inspect
import re
from pathlib import Path

import pytest

import dpsense.accounting as accounting
from dpsense.core import InvalidPrivacyParameter

PACKAGE_DIR = Path(accounting.__file__).parent

EXPECTED = {
    "DEFAULT_ORDERS",
    "GaussianEvent",
    "LaplaceEvent",
    "PldEvent",
    "RdpCurve",
    "advanced_composition",
    "approx_delta_of_zcdp",
    "balle_wang_delta",
    "balle_wang_sigma",
    "best_homogeneous_composition",
    "compose_basic",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma2",
    "gaussian_rdp",
    "laplace_rdp",
    "optimal_homogeneous_composition",
    "pld_delta",
    "pld_epsilon",
    "pure_dp_rdp",
    "randomized_response_rdp",
    "zcdp_to_approx_tight",
}


def test_all_is_curated_sorted_and_resolvable():
    assert set(accounting.__all__) == EXPECTED
    assert accounting.__all__ == sorted(accounting.__all__)
    for name in accounting.__all__:
        assert hasattr(accounting, name), name
    public = {name for name in vars(accounting) if not name.startswith("_")}
    modules = {"advanced", "basic", "gaussian_exact", "pld", "rdp", "zcdp"}
    assert public - modules == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED - {"DEFAULT_ORDERS", "PldEvent"}))
def test_every_public_callable_states_its_source(name):
    doc = inspect.getdoc(getattr(accounting, name)) or ""
    module_doc = inspect.getmodule(getattr(accounting, name)).__doc__ or ""
    assert doc and doc.splitlines()[0].strip(), name
    # the function or its module cites a paper (author-year) or a theorem
    assert re.search(r"(19|20)\d\d|Thm|Prop", doc + module_doc), name


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_layer_rules_no_randomness_and_only_allowed_imports(path):
    imported = _imported_modules(path)
    allowed_roots = {"__future__", "collections", "dataclasses", "decimal", "fractions", "functools", "itertools"}
    allowed_roots |= {"math", "numbers", "operator", "typing", "numpy", "scipy", "dp_accounting", "dpsense"}
    for module in imported:
        root = module.split(".")[0]
        assert root in allowed_roots, f"{path.name} imports {module}"
        assert root not in {"random", "secrets"}
        if module.startswith("dpsense."):
            assert module.startswith(("dpsense.core", "dpsense.accounting")), f"{path.name} imports {module}"
    source = path.read_text(encoding="utf-8")
    assert "np.random" not in source and "numpy.random" not in source


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: accounting.advanced_composition(epsilon=0, delta=0, k=2, delta_prime=1e-5), "epsilon"),
        (lambda: accounting.advanced_composition(epsilon=float("nan"), delta=0, k=2, delta_prime=1e-5), "epsilon"),
        (lambda: accounting.advanced_composition(epsilon=1, delta=1, k=2, delta_prime=1e-5), "delta"),
        (lambda: accounting.advanced_composition(epsilon=1, delta=0, k=0, delta_prime=1e-5), "k"),
        (lambda: accounting.optimal_homogeneous_composition(epsilon=1, delta=0, k=2.5, delta_prime=1e-5), "integer"),
        (lambda: accounting.optimal_homogeneous_composition(epsilon=1, delta=0, k=True, delta_prime=1e-5), "integer"),
        (lambda: accounting.best_homogeneous_composition(epsilon=1, delta=0, k=3, delta_prime=0), "delta_prime"),
        (lambda: accounting.best_homogeneous_composition(epsilon=-1, delta=0, k=3, delta_prime=1e-5), "epsilon"),
        (lambda: accounting.approx_delta_of_zcdp(0.5, -0.1), "epsilon"),
        (lambda: accounting.zcdp_to_approx_tight(0.5, float("inf")), "delta"),
        (lambda: accounting.pld_delta([], epsilon=float("inf")), "epsilon"),
    ],
)
def test_invalid_parameters_name_the_rule_and_the_fix(call, word):
    with pytest.raises(InvalidPrivacyParameter, match=word) as info:
        call()
    assert "Fix:" in str(info.value) and "got" in str(info.value)


def test_budget_arguments_are_keyword_only():
    for name in ["advanced_composition", "optimal_homogeneous_composition", "best_homogeneous_composition"]:
        with pytest.raises(TypeError):
            getattr(accounting, name)(0.1, 0, 10, 1e-5)
    for name in ["balle_wang_delta", "balle_wang_sigma", "discrete_gaussian_delta", "discrete_gaussian_sigma2"]:
        with pytest.raises(TypeError):
            getattr(accounting, name)(1.0, 1.0, 1)
