"""One vocabulary for the estimators' parameters (issue 33, item 3).

* A parameter name that several exported estimators share means one thing, and has one
  default unless :data:`DIFFERENT_DEFAULTS` says why not (the list can only shrink: an entry
  whose defaults have become equal fails too).
* The rule-of-thumb widths and neighbour ranks are declared once, in
  ``dkernel.kernels.widths``: no function of the package writes them as literals.
* Former names (``dkernel.kernels.aliases``) still work, warn once per process, and stay
  writable in job specs.

``python tests/test_vocabulary.py`` prints the shared names and their defaults.
"""

from __future__ import annotations

import ast
import inspect
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator

import dkernel
from dkernel.kernels import aliases, widths

PKG = Path(__file__).resolve().parents[1] / "dkernel"

#: Every estimator class that ``dkernel`` exports.
EXPORTED = sorted(
    (
        obj
        for obj in (getattr(dkernel, name) for name in dkernel.__all__)
        if isinstance(obj, type) and issubclass(obj, BaseEstimator)
    ),
    key=lambda cls: cls.__name__,
)

#: Shared parameter names whose defaults differ between estimators, each with the reason.
DIFFERENT_DEFAULTS: dict[str, str] = {
    "alpha": "restart probability: [Lokse2020] Paper II uses 0.1 for KPPR, [Lokse2014] 0.15 for JRC",
    "bandwidth_factor": "MSSC's first stage over-partitions (0.4 × Silverman's rule); MeanShift "
    "is the plain mean shift",
    "density": "MSSC's three-stage default (k-means seeds as the density); MeanShift samples",
    "dtype": "PCK's features are float32 (memory of the N x F map); the kernel estimators' "
    "blocks float64",
    "embedding": "each estimator offers its own set of embeddings (JRC: normalized or "
    "laplacian; Nyström: kpca...; SpectralClustering: chosen by the path; MSSC: normalized)",
    "kernel": "each family's best default on bench_defaults.py (self-tuning graphs for "
    "clustering, rbf for KPCA / KECA / KPPR, knn_mean for JRC), None where chosen by the path",
    "kmeans_sample": "KernelKMeans's Lloyd steps run on m = 300 Nyström features (S·m·K per step), "
    "SpectralClustering's on k embedding columns: half the rows keep its k-means cheap",
    "regularization": "two quantities: KernelCCA's ridge term on each view's covariance, MSSC's "
    "degree regularisation of the partition affinity",
    "landmark_neighbors": "SpectralClustering's bipartite graph links 3 landmarks "
    "(bench_defaults.py), the kernel decomposition U-SPEC's 5",
    "n_clusters": "2 for the clusterers, 3 for JRC ([Lokse2014]), None where clustering is optional",
    "n_components": "None follows n_clusters; NystromEmbedding is a transformer without it; "
    "EchoStateNetwork keeps 300 components of its 400 states (bench_esn.py's search); "
    "DeepKernelizedAutoencoder's code size, 2000 ([Kampffmeyer2018], §4.2)",
    "batch_size": "each deep model's paper: DeepDivergenceClustering's 100 ([Kampffmeyer2019]), "
    "DeepKernelizedAutoencoder's 200 ([Kampffmeyer2018], §4.1)",
    "learning_rate_init": "DeepDivergenceClustering's 'auto' (bench_ddc.py); "
    "DeepKernelizedAutoencoder's Adam step 1e-3 (scikit-learn's MLP default; the paper gives none)",
    "n_density": "MSSC's density is 20 000 pre-partition seeds, MeanShift's a 5 000-point sample",
    "n_init": "k-means restarts: 100 for MSSC's small second stage ([Agersborg2012]), 3 "
    "factorisations for the kernel decomposition, 10 elsewhere; one trained network for "
    "DeepDivergenceClustering (each restart is a full training)",
    "n_landmarks": "None means each estimator's own default count (1000 landmarks, or min(N, "
    "1000)); NystromEmbedding and EchoStateNetwork take the count itself",
    "landmarks": "EchoStateNetwork's states are a trajectory in time: uniform landmarks follow "
    "its density (what bench_esn.py's search ran with); k-means++ spreads them elsewhere",
    "n_neighbors": "the neighbour rank of the adaptive kernels: 7 for local scaling "
    "(DEFAULT_LOCAL_SCALING_NEIGHBORS), 10 for the k-NN graphs of the ranking estimators "
    "(DEFAULT_KNN_NEIGHBORS); the kernel decomposition's graph size 7 (bench_defaults.py)",
    "n_seeds": "MSSC seeds mean shift with 500 k-means centres, MeanShift with 1000 points",
    "path_radius": "MSSC's pixels stop within h/2 of a stored trajectory, a quarter less "
    "assignment time at the same scores (bench_mssc_defaults.py); MeanShift keeps h/5, the "
    "thesis protocol's",
    "seeds": "MSSC's k-means pre-partition ([Agersborg2012], §7.1); MeanShift seeds at every point",
    "sigma_fraction": "the RBF rule of thumb's fraction: one constant per method in "
    "dkernel.kernels.widths, each with its source (median heuristic, PCKID 0.2, [Lokse2014] 0.15, "
    "MSSC 0.5, ESN 1.0)",
    "tol": "relative objective change of the factorisation against mean shift's move length "
    "and IR-MAD's change of the canonical correlations",
    "max_iter": "IR-MAD's re-weightings converge in tens of iterations ([Nielsen2007]); the "
    "iterative clusterers' 300; DeepDivergenceClustering's and DeepKernelizedAutoencoder's "
    "are training epochs (benchmarks/bench_ddc.py, benchmarks/bench_dkae.py)",
}


def _defaults(cls: type) -> dict[str, object]:
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self"}


def shared_parameters() -> dict[str, dict[str, object]]:
    """``{name: {estimator: default}}`` for names used by two or more exported estimators."""
    where: dict[str, dict[str, object]] = defaultdict(dict)
    for cls in EXPORTED:
        for name, default in _defaults(cls).items():
            where[name][cls.__name__] = default
    return {name: uses for name, uses in sorted(where.items()) if len(uses) > 1}


def different_defaults() -> dict[str, dict[str, object]]:
    return {
        name: uses
        for name, uses in shared_parameters().items()
        if len({repr(v) for v in uses.values()}) > 1
    }


def test_shared_parameters_with_different_defaults_are_explained():
    found = different_defaults()
    unexplained = {name: found[name] for name in sorted(set(found) - set(DIFFERENT_DEFAULTS))}
    assert not unexplained, (
        f"shared parameter names with different defaults and no reason: {unexplained}; use the "
        "default of the other estimators or add the reason to DIFFERENT_DEFAULTS"
    )
    stale = sorted(set(DIFFERENT_DEFAULTS) - set(found))
    assert not stale, f"{stale} no longer have different defaults: remove them from the list"


def _literal_defaults(path: Path, names: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        positional = args.posonlyargs + args.args
        pairs = list(
            zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
        )
        pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
        for arg, default in pairs:
            if (
                arg.arg in names
                and isinstance(default, ast.Constant)
                and isinstance(default.value, int | float)
                and not isinstance(default.value, bool)
            ):
                rel = path.relative_to(PKG.parent)
                out.append(f"{rel}:{node.lineno} {node.name}({arg.arg}={default.value})")
    return out


def test_widths_and_neighbour_ranks_are_declared_once():
    """No function writes a rule-of-thumb fraction or a neighbour rank as a number: the
    defaults are the named constants of ``dkernel.kernels.widths`` (or of a module that says
    why its own differs)."""
    names = {"sigma_fraction", "fraction", "n_neighbors", "scale_neighbors", "graph_neighbors"}
    literals = [hit for p in sorted(PKG.rglob("*.py")) for hit in _literal_defaults(p, names)]
    assert not literals, f"literal defaults (use dkernel.kernels.widths): {literals}"


def test_width_fractions_are_constants_of_widths_only():
    """A rule-of-thumb fraction is a constant of ``dkernel.kernels.widths`` (with its reason),
    never a module constant of its own elsewhere."""
    own = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "kernels" / "widths.py":
            continue
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.endswith("SIGMA_FRACTION"):
                    own.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {target.id}")
    assert not own, f"fractions declared outside dkernel/kernels/widths.py: {own}"


def test_every_width_default_is_a_declared_fraction():
    fractions = {
        getattr(widths, name) for name in widths.__all__ if name.endswith("_SIGMA_FRACTION")
    }
    uses = shared_parameters()["sigma_fraction"]
    assert set(uses.values()) <= fractions, uses
    # the generic rule of thumb, the registry's rbf and KPCA agree (issue 33)
    from dkernel.kernels.registry import make_kernel

    X = np.random.default_rng(0).normal(size=(300, 3))
    sigma = widths.sigma_rule_of_thumb(X)
    assert make_kernel("rbf", X).params["sigma"] == sigma
    assert dkernel.KernelPCAEmbedding().fit(X).sigma_ == sigma


def test_no_default_is_a_former_name():
    for cls in EXPORTED:
        for name, default in _defaults(cls).items():
            assert default not in aliases.RENAMED_VALUES.get(name, {}), (cls.__name__, name)


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which former names this process was warned about (the warning is once)."""
    monkeypatch.setattr(aliases, "_WARNED", set())


def test_former_name_warns_once_per_process(fresh_warnings):
    with pytest.warns(FutureWarning, match="kernel='gaussian' is a deprecated name.*'rbf'"):
        assert aliases.resolve_alias("gaussian", "kernel", "Owner") == "rbf"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert aliases.resolve_alias("gaussian", "kernel", "Owner") == "rbf"
        assert aliases.resolve_alias("rbf", "kernel", "Owner") == "rbf"
        assert aliases.resolve_alias(None, "kernel", "Owner") is None
    with pytest.warns(FutureWarning, match="embedding='njw'.*'normalized'"):
        assert aliases.resolve_alias("njw", "embedding", "MSSC") == "normalized"


def test_former_names_still_fit_and_give_the_same_model(fresh_warnings):
    X = np.vstack([np.random.default_rng(1).normal(c, 0.1, size=(40, 2)) for c in ((0, 0), (1, 1))])
    new = dkernel.KernelDecompositionClustering(2, kernel="rbf", random_state=0).fit(X)
    with pytest.warns(FutureWarning, match="'gaussian'"):
        old = dkernel.KernelDecompositionClustering(2, kernel="gaussian", random_state=0).fit(X)
    assert old.get_params()["kernel"] == "gaussian"  # get_params returns what was passed
    assert old.sigma_ == new.sigma_
    np.testing.assert_array_equal(old.posteriors_, new.posteriors_)
    np.testing.assert_array_equal(old.predict_proba(X[:5]), new.predict_proba(X[:5]))

    from dkernel.meanshift import second_stage

    A = np.exp(-(np.subtract.outer(np.arange(8.0), np.arange(8.0)) ** 2))
    with pytest.warns(FutureWarning, match="'njw'"):
        old_stage = second_stage(A, 2, "njw", n_init=3, seed=0)
    new_stage = second_stage(A, 2, "normalized", n_init=3, seed=0)
    for a, b in zip(old_stage, new_stage, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("estimator", "parameter", "former"),
    [("KernelDecompositionClustering", "kernel", "gaussian"), ("MSSC", "embedding", "njw")],
)
def test_former_names_stay_valid_in_job_specs(estimator, parameter, former):
    """Job parameters derive from the estimators (``EstimatorSchema``): a spec written with
    the former name still validates, and the estimator warns when it fits."""
    from dkernel.schema.estimator import derive_param

    param = derive_param(getattr(dkernel, estimator), parameter)
    assert former in param.choices
    assert aliases.RENAMED_VALUES[parameter][former] in param.choices


#: Glossary of kernel names: one meaning each, the scikit-learn names with scikit-learn's
#: formula and parameters (``gamma``, ``degree``, ``coef0``), dkernel's with theirs.
KERNEL_GLOSSARY: dict[str, str] = {
    "rbf": "exp(-||x-y||^2 / (2 sigma^2)) = exp(-gamma ||x-y||^2), gamma = 1 / (2 sigma^2); "
    "sigma by the rule of thumb when neither is given (scikit-learn: gamma = 1 / n_features)",
    "cosine": "<x, y> / (||x|| ||y||), 0 for a zero row (scikit-learn's)",
    "linear": "<x, y> (scikit-learn's)",
    "poly": "(gamma <x, y> + coef0)^degree, gamma = 1 / n_features, degree 3, coef0 1 "
    "(scikit-learn's)",
    "polynomial": "scikit-learn's other name of poly",
    "sigmoid": "tanh(gamma <x, y> + coef0), gamma = 1 / n_features, coef0 1 (scikit-learn's)",
    "laplacian": "exp(-gamma ||x-y||_1), gamma = 1 / n_features (scikit-learn's)",
    "chi2": "exp(-gamma sum (x-y)^2 / (x+y)), gamma 1, data >= 0 (scikit-learn's)",
    "additive_chi2": "-sum (x-y)^2 / (x+y), data >= 0 (scikit-learn's)",
    "local_scaling": "exp(-||x-y||^2 / (s_x s_y)), s the distance to the n_neighbors-th "
    "neighbour (self-tuning, [ZelnikManor2005])",
    "knn": "the symmetric 0/1 n_neighbors-nearest-neighbour graph, with self-loops",
    "knn_mean": "the half-weighted k-NN graph: 1 mutual, 1/2 one way (scikit-learn's k-NN "
    "affinity)",
    "landmark": "points joined through their n_neighbors nearest of n_landmarks k-means "
    "landmarks, B D^-1 B^T (U-SPEC)",
    "pck": "the probabilistic cluster kernel of a fitted (or default) ProbabilisticClusterKernel",
    "precomputed": "X holds the kernel's rows (square in fit, against the training points after)",
}


def test_kernel_glossary_lists_every_kernel_name_once():
    from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS

    from dkernel.kernels.registry import available_kernels

    assert set(KERNEL_GLOSSARY) == set(available_kernels())
    assert set(PAIRWISE_KERNEL_FUNCTIONS) <= set(KERNEL_GLOSSARY)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("rbf", {"gamma": 0.3}),
        ("poly", {"gamma": 0.5, "degree": 2, "coef0": 0.0}),
        ("sigmoid", {"gamma": 0.2}),
        ("laplacian", {"gamma": 0.7}),
        ("chi2", {"gamma": 0.4}),
        ("linear", {}),
        ("cosine", {}),
        ("additive_chi2", {}),
    ],
)
def test_a_scikit_learn_kernel_name_means_scikit_learns_kernel(name, params):
    """The names, parameters and defaults scikit-learn gives its kernels mean the same here."""
    from sklearn.metrics.pairwise import pairwise_kernels

    from dkernel.kernels.registry import make_kernel

    X = np.random.default_rng(2).random((12, 3))
    # the defaults too, but rbf's: its width is dkernel's rule of thumb unless given
    for given in [params] + ([{}] if name != "rbf" else []):
        ours = make_kernel(name, X, **given)(X, X)
        np.testing.assert_allclose(ours, pairwise_kernels(X, metric=name, **given))


if __name__ == "__main__":  # the audit, for the record
    shared, different = shared_parameters(), different_defaults()
    print(f"{len(EXPORTED)} estimators; {len(shared)} shared parameter names; ", end="")
    print(f"{len(different)} with different defaults")
    for name, uses in different.items():
        print(f"  {name}: {uses}")
