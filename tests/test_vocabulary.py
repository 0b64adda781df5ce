"""One vocabulary for the estimators' parameters (issue 33 item 3, issue 53 item 3): a glossary.

* :data:`GLOSSARY`: every parameter name that two or more exported estimators share, with its
  one meaning (``n_neighbors`` the k of a k-NN graph, ``scale_neighbors`` the rank of a
  self-tuning width, ``regularization`` kernel CCA's ridge term, ...). A new shared name needs
  its line; a name no longer shared must go.
* One default per shared name unless :data:`DIFFERENT_DEFAULTS` says why not, in one line (the
  list can only shrink: an entry whose defaults have become equal fails too).
* ``'auto'`` is the one spelling of "choose the number of clusters".
* The rule-of-thumb widths and neighbour ranks are declared once, in
  ``dkernel.kernels.widths``: no function of the package writes them as literals.
* Former names (``dkernel.kernels.aliases``: values, parameter names, a parameter's former
  meaning) still work for one release, warn once per process, give the same model, and stay
  writable in job specs.
* :data:`KERNEL_GLOSSARY`: every kernel name, scikit-learn's with scikit-learn's meaning.
* Sizes: a sample a fit draws is ``max_samples`` (scikit-learn's), prefixed by the stage it
  bounds (``kmeans_max_samples``, ``density_max_samples``, the kdc job's
  ``selection_max_samples``); restarts of which the best is kept are ``n_init``; the size of an
  ensemble whose members are all kept is ``n_estimators``; ``block_rows`` (a kernel block) and
  ``chunk_rows`` (a chunk of data) bound memory only; ``batch_size`` is a training mini-batch.
  :data:`FORMER_SIZE_NAMES` live on only as deprecated aliases.

``python tests/test_vocabulary.py`` prints the shared names, their meanings and defaults.
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

#: The glossary: every parameter name two or more exported estimators share, with its one
#: meaning (one line). A new shared name needs its entry; a name no longer shared must go.
#: Former names (``dkernel.kernels.aliases.RENAMED_PARAMETERS``) are not vocabulary.
GLOSSARY: dict[str, str] = {
    "alpha": "restart probability of the (personalised PageRank) random walk",
    "approximation": "how the graph model is computed: 'exact', 'bipartite' (landmarks), "
    "'nystrom', 'auto' by size",
    "bandwidth": "h, the width of the mean-shift kernel; None: bandwidth_factor x the rule",
    "bandwidth_factor": "multiplier of the mean-shift bandwidth rule when bandwidth is None",
    "batch_size": "rows per training mini-batch",
    "bin_size": "grid bin width of seeds='grid'",
    "block_rows": "rows of a kernel block computed at once (bounds the memory of a kernel pass)",
    "blurring": "blurring mean shift: the density points move too",
    "checkpoint": "file the training state is saved to after each epoch, and resumed from",
    "chunk_rows": "rows per chunk of data held or read lazily (a Dask chunk, a raster strip)",
    "degrees": "degree estimate of the Nyström normalized embedding: 'nystrom' or 'landmarks'",
    "density": "the points mean shift's density estimate is built on",
    "density_max_samples": "mean shift's density is estimated on at most this many (evenly "
    "spaced) rows (max_samples of the density)",
    "dtype": "floating-point precision of the computed blocks (kernel rows, features)",
    "embedding": "which spectral embedding is computed and clustered",
    "group_factor": "end points closer than group_factor x the median move are one mode",
    "kernel": "a name of KERNEL_GLOSSARY (dkernel.kernels.registry), a callable or "
    "'precomputed'; None: chosen by the path",
    "kernel_params": "keyword arguments of the named kernel (make_kernel)",
    "kmeans_max_samples": "k-means is fitted on a uniform sample of at most this many rows, "
    "then every row is assigned (max_samples of the k-means stage)",
    "landmark_neighbors": "bipartite path: landmarks linked to each point (and the rank of "
    "the widths there)",
    "landmarks": "how Nyström landmarks are drawn: 'kmeans++' or 'uniform'",
    "learning_rate_init": "Adam's initial step size",
    "max_clusters": "largest k compared by n_clusters='auto'; None: candidate_range of the data",
    "max_iter": "iteration cap of the fit's loop (the deep models': training epochs)",
    "max_memory": "memory limit of a dense solve (default DKERNEL_MAX_MEMORY or 4 GiB)",
    "max_samples": "rows a fit draws (scikit-learn's): at most this many (int) or this fraction "
    "of the rows (float)",
    "min_cluster_size": "mean-shift basins holding less than this fraction of the points join "
    "the nearest larger mode",
    "saddle_ratio": "a mean-shift basin whose highest pass into a higher mode's basin reaches "
    "this fraction of its own peak density joins it; None: no such merging",
    "n_clusters": "number of clusters; 'auto' chooses it (dkernel.model_order); None: embed "
    "only (where clustering is optional)",
    "n_components": "dimension of the embedding (components kept)",
    "init": "how a fit starts: its first centres (KernelKMeans) or weights (DDC)",
    "n_init": "restarts (k-means, factorisations, trainings), the best kept",
    "n_landmarks": "number of landmarks (Nyström features or bipartite graph)",
    "n_neighbors": "the k of a k-NN graph: neighbours joined to each point (scikit-learn's "
    "meaning)",
    "n_seeds": "k-means centres that seed mean shift (seeds='kmeans')",
    "path_radius": "streaming assignment stops a point within path_radius x h of a stored "
    "trajectory",
    "progress": "show progress (a bar on a terminal, lines in a log)",
    "projection": "fit on the leading principal components: a count (int) or a fraction of "
    "the variance (float); None: the columns",
    "random_state": "seed of every random choice (int, None or a Generator)",
    "regularization": "kernel CCA's ridge term κ, added to each view's covariance",
    "scale_neighbors": "rank of the self-tuning width: each point's σ is the distance to its "
    "scale_neighbors-th neighbour",
    "seeds": "the starting points of mean shift",
    "sigma": "the RBF (Gaussian) width σ; None: sigma_fraction x the median distance (or "
    "the estimator's rule)",
    "sigma_fraction": "the RBF rule of thumb: σ = this fraction x the median pairwise distance",
    "solver": "how the fit is computed: 'exact', 'nystrom' or 'auto' by cost",
    "tol": "convergence tolerance of the fit's iterations",
}

#: Shared parameter names whose defaults differ between estimators, each with its reason in
#: one line (at most :data:`MAX_REASON` characters; the sources are in the docstrings).
DIFFERENT_DEFAULTS: dict[str, str] = {
    "alpha": "the papers' restart probabilities: KPPR 0.1 ([Lokse2020] II), JRC 0.15 ([Lokse2014])",
    "bandwidth_factor": "MSSC's first stage over-partitions (0.4 x Silverman's rule); "
    "MeanShift is plain mean shift",
    "batch_size": "each deep model's paper: DDC 100 ([Kampffmeyer2019]), DKAE 200 "
    "([Kampffmeyer2018])",
    "density": "MSSC's three stages estimate the density on the k-means seeds; MeanShift on "
    "a sample",
    "density_max_samples": "MSSC's density is 20 000 pre-partition seeds, MeanShift's a "
    "5 000-point sample",
    "dtype": "PCK's N x F feature map is float32 (memory); kernel blocks are float64",
    "embedding": "each estimator's best embedding (bench_defaults.py); None where the path "
    "chooses it",
    "kernel": "each family's best on bench_defaults.py (self-tuning graphs for clustering); "
    "None: by the path",
    "kmeans_max_samples": "KernelKMeans's Lloyd steps cost S·m·K on m = 300 features, "
    "SpectralClustering's S·k·K",
    "landmark_neighbors": "SpectralClustering's bipartite graph links 3 landmarks "
    "(bench_defaults.py), KDC U-SPEC's 5",
    "landmarks": "EchoStateNetwork's states are a trajectory: uniform follows its density "
    "(bench_esn.py)",
    "learning_rate_init": "DDC's 'auto' by network (bench_ddc.py); DKAE's 1e-3 (the paper "
    "gives none)",
    "max_iter": "each loop's cost: 50 IR-MAD re-weightings or deep-model epochs, 300 "
    "iterations of the clusterers",
    "max_samples": "ChangeDetection samples 20 000 pixels (a count); the PCK trains each member "
    "on half the rows (a fraction)",
    "min_cluster_size": "MSSC's first stage over-partitions on purpose (0: every mode); "
    "MeanShift prunes under 1 % or 5 points",
    "saddle_ratio": "MSSC's first stage keeps every basin (None), MeanShift joins shallow ones "
    "(0.8)",
    "n_clusters": "2 for the clusterers, 3 for JRC ([Lokse2014]), 8 scikit-learn's KMeans', "
    "'auto' MSSC's, None: embed",
    "n_components": "None follows n_clusters; the deep models', ESN's and CCA's sizes are "
    "their own (docstrings)",
    "init": "centres (k-means++) for KernelKMeans, a network's weights (spectral) for DDC",
    "n_init": "100 for MSSC's small 2nd stage, 3 factorisations for KDC, 1 DDC training "
    "(each a full fit), else 10",
    "n_landmarks": "None: the estimator's own count (min(N, 1000)); the feature maps take "
    "the count itself",
    "n_neighbors": "k-NN graph sizes: 10 for the ranking estimators (scikit-learn's), 7 for "
    "KDC (bench_defaults.py)",
    "n_seeds": "MSSC seeds mean shift with 500 k-means centres, MeanShift with 1000 points",
    "path_radius": "MSSC stops pixels within h/2 (a quarter faster, same scores); MeanShift "
    "keeps the thesis' h/5",
    "scale_neighbors": "7 ([ZelnikManor2005]); KPPR and JRC keep 10, the rank their "
    "local_scaling kernel had as n_neighbors",
    "projection": "MeanShift's density needs few dimensions (15); the PCK's and MSSC's "
    "models fit the columns",
    "seeds": "MSSC's k-means pre-partition ([Agersborg2012], §7.1); MeanShift seeds at every point",
    "sigma_fraction": "one constant per method in dkernel.kernels.widths, each with its source",
    "tol": "each loop's own stopping quantity (objective change, move length, correlation change)",
}

#: The longest reason of :data:`DIFFERENT_DEFAULTS` (one line).
MAX_REASON = 110


def _defaults(cls: type) -> dict[str, object]:
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items() if name != "self"}


def shared_parameters() -> dict[str, dict[str, object]]:
    """``{name: {estimator: default}}`` for names used by two or more exported estimators
    (former names, kept for one release, left out)."""
    where: dict[str, dict[str, object]] = defaultdict(dict)
    for cls in EXPORTED:
        former = aliases.renamed_parameters(cls)
        for name, default in _defaults(cls).items():
            if name not in former:
                where[name][cls.__name__] = default
    return {name: uses for name, uses in sorted(where.items()) if len(uses) > 1}


def different_defaults() -> dict[str, dict[str, object]]:
    return {
        name: uses
        for name, uses in shared_parameters().items()
        if len({repr(v) for v in uses.values()}) > 1
    }


def test_the_glossary_gives_every_shared_name_one_meaning():
    shared = shared_parameters()
    missing = sorted(set(shared) - set(GLOSSARY))
    assert not missing, f"shared parameter names without a meaning in GLOSSARY: {missing}"
    stale = sorted(set(GLOSSARY) - set(shared))
    assert not stale, f"{stale} are no longer shared: remove them from GLOSSARY"
    for name, meaning in GLOSSARY.items():
        assert meaning.strip() and "\n" not in meaning, name


def test_each_different_default_has_a_one_line_reason():
    for name, reason in DIFFERENT_DEFAULTS.items():
        assert reason.strip() and "\n" not in reason, name
        assert len(reason) <= MAX_REASON, (name, len(reason))


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
    # 'auto': chosen among the candidates declared there (KERNEL_KMEANS_, KPCA_SIGMA_FRACTIONS)
    assert set(uses.values()) - {"auto"} <= fractions, uses
    auto = {k for k, v in uses.items() if v == "auto"}
    assert auto <= {"KernelKMeans", "KernelPCAEmbedding", "KECA"}, uses
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


#: The former names of sample and ensemble sizes (issue 53): deprecated aliases only.
FORMER_SIZE_NAMES = {
    "kmeans_sample",
    "n_density",
    "sample_size",
    "subsample",
    "n_fit",
    "n_inits",
    "pck_n_inits",
}


def test_former_size_names_are_only_deprecated_aliases():
    """No estimator or job parameter is a sample or ensemble size under a former name, except
    as the deprecated alias of the current one (default None, "Deprecated" in its doc)."""
    for cls in EXPORTED:
        former = aliases.renamed_parameters(cls)
        for name in set(_defaults(cls)) & FORMER_SIZE_NAMES:
            assert name in former, (cls.__name__, name)
    from dkernel.jobs.registry import METHODS

    for method in METHODS.values():
        for param in method.params:
            if param.name in FORMER_SIZE_NAMES:
                assert param.default is None, (method.name, param.name)
                assert param.doc.startswith("Deprecated"), (method.name, param.name)


#: Estimators that accept n_clusters=None as the deprecated spelling of 'auto'.
N_CLUSTERS_NONE_DEPRECATED = {"KernelKMeans"}


def test_auto_is_the_one_spelling_of_choose_the_number_of_clusters():
    """Where an estimator chooses k, ``n_clusters='auto'`` asks for it; None means "embed only"
    (KernelPCAEmbedding, KECA) or is the deprecated spelling of 'auto' (warns)."""
    from sklearn.utils._param_validation import StrOptions

    choosers, embedders = set(), set()
    for cls in EXPORTED:
        constraints = getattr(cls, "_parameter_constraints", {}).get("n_clusters", [])
        auto = any(isinstance(c, StrOptions) and "auto" in c.options for c in constraints)
        if auto:
            choosers.add(cls.__name__)
        if None in constraints:
            (embedders if not auto else set()).add(cls.__name__)
            if auto:
                assert cls.__name__ in N_CLUSTERS_NONE_DEPRECATED, cls.__name__
    assert embedders == {"KECA", "KernelPCAEmbedding"}
    assert N_CLUSTERS_NONE_DEPRECATED <= choosers
    X = np.random.default_rng(6).normal(size=(40, 2))
    with pytest.warns(FutureWarning, match="n_clusters='auto'"):
        dkernel.KernelKMeans(None, max_clusters=3, random_state=0).fit(X)


#: (estimator, a construction reaching the code that reads the renamed parameter)
FORMER_PARAMETER_CASES = [
    ("SpectralClustering", {"n_clusters": 2, "approximation": "exact", "random_state": 0}),
    ("SpectralClustering", {"n_clusters": 2, "approximation": "nystrom", "random_state": 0,
                            "kernel": "local_scaling", "n_landmarks": 40}),
    ("KernelPCAEmbedding", {"n_components": 2, "kernel": "local_scaling"}),
    ("KECA", {"n_components": 2, "kernel": "knn"}),
    ("MSSC", {"n_clusters": 2, "n_init": 2, "random_state": 0}),
    ("MeanShift", {"bandwidth": 0.5}),
    ("ChangeDetection", {"method": "irmad", "random_state": 0}),
    ("ProbabilisticClusterKernel", {"max_components": 3, "random_state": 0}),
    ("KernelKMeans", {"n_clusters": 2, "solver": "nystrom", "n_landmarks": 20, "n_init": 2,
                      "random_state": 0}),
    ("DeepDivergenceClustering", {"n_clusters": 2, "max_iter": 1, "batch_size": 40,
                                  "random_state": 0}),
]  # fmt: skip

#: The fitted attributes a former parameter name must leave unchanged (those the model has).
FITTED = (
    "embedding_",
    "labels_",
    "cluster_centers_",
    "correlations_",
    "threshold_",
    "degrees_",
)

#: (value, another value) given to a renamed parameter, where (5, 6) is out of its range.
FORMER_VALUES = {
    "max_samples": (40, 41),
    ("ProbabilisticClusterKernel", "max_samples"): (0.8, 0.6),
    # a switch: the former name off, the current one on, so that both at once differ
    "progress": (False, True),
}


def test_every_former_parameter_name_is_case_tested():
    renamed = {(cls, old) for cls, names in aliases.RENAMED_PARAMETERS.items() for old in names}
    cased = {(cls, old) for cls, _ in FORMER_PARAMETER_CASES for old in
             aliases.RENAMED_PARAMETERS[cls]}  # fmt: skip
    assert renamed == cased


@pytest.mark.parametrize(("estimator", "params"), FORMER_PARAMETER_CASES)
@pytest.mark.filterwarnings("ignore::dkernel.errors.NumericalWarning")  # the k-NN kernels' clip
def test_former_parameter_names_still_fit_and_give_the_same_model(
    fresh_warnings, estimator, params
):
    """A former parameter name (``n_neighbors`` for the self-tuning widths' rank, now
    ``scale_neighbors``) still works for one release: the same model, a FutureWarning once per
    process, ``get_params`` returning what was passed; both names at once with different
    values are refused."""
    cls = getattr(dkernel, estimator)
    X = np.vstack([np.random.default_rng(3).normal(c, 0.2, size=(40, 2)) for c in ((0, 0), (2, 2))])
    for former, current in aliases.RENAMED_PARAMETERS[estimator].items():
        assert _defaults(cls)[former] is None  # "not given"
        value, other = FORMER_VALUES.get((estimator, current), FORMER_VALUES.get(current, (5, 6)))
        new = cls(**params, **{current: value}).fit(X)
        with pytest.warns(FutureWarning, match=f"{former} is deprecated.*{current}={value}"):
            old = cls(**params, **{former: value}).fit(X)
        assert old.get_params()[former] == value
        fitted = [name for name in FITTED if hasattr(new, name)]
        assert fitted
        for name in fitted:
            np.testing.assert_array_equal(getattr(old, name), getattr(new, name))
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # once per process
            cls(**params, **{former: value}).fit(X)
        with pytest.raises(ValueError, match=f"give {current} only"):
            cls(**params, **{former: value, current: other}).fit(X)


@pytest.mark.parametrize("estimator", sorted(aliases.FORMER_MEANINGS))
def test_n_neighbors_former_meaning_still_works_for_one_release(fresh_warnings, estimator):
    """KPPR and JRC passed ``n_neighbors`` to every adaptive kernel; with 'local_scaling' it was
    the widths' rank, now ``scale_neighbors``. A non-default ``n_neighbors`` there still sets
    the rank (warning once), the k-NN kernels take it silently as their graph's size."""
    cls = getattr(dkernel, estimator)
    X = np.random.default_rng(4).normal(size=(60, 3))
    extra = {"n_clusters": 2, "random_state": 0} if "n_clusters" in _defaults(cls) else {}
    new = cls(kernel="local_scaling", scale_neighbors=5, **extra).fit(X)
    with pytest.warns(FutureWarning, match="n_neighbors=5 with kernel='local_scaling'"):
        old = cls(kernel="local_scaling", n_neighbors=5, **extra).fit(X)
    np.testing.assert_array_equal(old.kernel_.gram(), new.kernel_.gram())
    with pytest.raises(ValueError, match="give scale_neighbors only"):
        cls(kernel="local_scaling", n_neighbors=5, scale_neighbors=6, **extra).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        knn = cls(kernel="knn", n_neighbors=5, **extra).fit(X)
    assert knn.kernel_params_["n_neighbors"] == 5


def test_local_scaling_kernel_former_n_neighbors(fresh_warnings):
    """The registry's local_scaling kernel takes its widths' rank as scale_neighbors; its former
    name n_neighbors (the k-NN kernels' graph size) gives the same kernel, warning once."""
    from dkernel.kernels.registry import make_kernel, neighbor_count

    X = np.random.default_rng(5).normal(size=(40, 2))
    new = make_kernel("local_scaling", X, scale_neighbors=5)
    with pytest.warns(FutureWarning, match="n_neighbors is deprecated.*scale_neighbors=5"):
        old = make_kernel("local_scaling", X, n_neighbors=5)
    assert old.params == new.params and neighbor_count(old) == 5
    np.testing.assert_array_equal(old(X), new(X))
    # SpectralClustering's kernel_params of the Nyström path still reach it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # once per process: seen above
        sc = dkernel.SpectralClustering(
            2, kernel="local_scaling", kernel_params={"n_neighbors": 4}, n_landmarks=20
        ).fit(X)
    assert sc.nystrom_.kernel_.params["scale_neighbors"] == 4


def test_former_parameter_names_stay_valid_in_job_specs(fresh_warnings):
    """The spectral-clustering job's parameters derive from the estimator's signature: a spec
    that still writes ``n_neighbors`` validates and builds the estimator it meant."""
    from dkernel.jobs.steps import spectral_clustering as step
    from dkernel.schema.params import validate_mapping

    params = validate_mapping({"n_clusters": 2, "n_neighbors": 9}, step.PARAMS, "params")
    assert step._graph_size(params) == 9  # graph_neighbors 8, raised to the rank 9
    est = step.SPECTRAL_SCHEMA.build(params, random_state=0)
    assert est.n_neighbors == 9
    with pytest.warns(FutureWarning, match="scale_neighbors=9"):
        assert est._scale_neighbors() == 9
    default = validate_mapping({"n_clusters": 2}, step.PARAMS, "params")
    assert step.SPECTRAL_SCHEMA.build(default)._scale_neighbors() == 7


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
    "local_scaling": "exp(-||x-y||^2 / (s_x s_y)), s the distance to the scale_neighbors-th "
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


if __name__ == "__main__":  # the glossary and the audit, for the record
    shared, different = shared_parameters(), different_defaults()
    print(f"{len(EXPORTED)} estimators; {len(shared)} shared parameter names; ", end="")
    print(f"{len(different)} with different defaults")
    for name, uses in shared.items():
        print(f"{name}: {GLOSSARY.get(name, '(no meaning given)')}")
        if name in different:
            print(f"    defaults {uses}: {DIFFERENT_DEFAULTS.get(name, '(no reason given)')}")
