"""Deep divergence-based clustering ([Kampffmeyer2019], Paper IV of [Lokse2020]): the three loss
terms against literal NumPy transcriptions of eq. 3-4, their gradients by finite differences,
and the estimator's contracts (out-of-sample on training rows, determinism, Dask input, resume
after an interruption, the missing extra, bad input)."""

from __future__ import annotations

import subprocess
import sys
from itertools import combinations

import dask
import dask.array as da
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dkernel import DeepDivergenceClustering  # noqa: E402
from dkernel._random import derive_seed as _derive_seed  # noqa: E402
from dkernel.deep._cs_divergence import (  # noqa: E402
    cs_divergence_term,
    ddc_loss,
    gaussian_kernel,
    orthogonality_term,
    simplex_corner_similarity,
)
from dkernel.deep._ddc_training import predict_proba_array  # noqa: E402
from dkernel.deep._training import mini_batches  # noqa: E402
from dkernel.errors import DKernelDeprecationWarning, InvalidInputError  # noqa: E402
from dkernel.metrics import clustering_accuracy  # noqa: E402

# ---------------------------------------------------------------- NumPy references of the paper


def _softmax_rows(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    z = rng.normal(size=(n, k)) * 2.0
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _ref_kernel(H: np.ndarray, fraction: float) -> np.ndarray:
    """k_{q,l} = exp(-d(h_q, h_l)² / (2σ²)), σ = fraction × median pairwise distance (Sec. 4.6)."""
    n = len(H)
    d = np.array([[np.linalg.norm(H[q] - H[l]) for l in range(n)] for q in range(n)])
    sigma = fraction * np.median([d[q, l] for q, l in combinations(range(n), 2)])
    return np.exp(-(d**2) / (2 * sigma**2))


def _ref_d(A: np.ndarray, K: np.ndarray) -> float:
    """Eq. 3 as printed: 1/k Σ_{i<j} α_iᵀKα_j / sqrt(α_iᵀKα_i α_jᵀKα_j)."""
    k = A.shape[1]
    total = 0.0
    for i in range(k - 1):
        for j in range(i + 1, k):
            a_i, a_j = A[:, i], A[:, j]
            total += (a_i @ K @ a_j) / np.sqrt((a_i @ K @ a_i) * (a_j @ K @ a_j))
    return total / k


def _ref_triu(A: np.ndarray) -> float:
    """triu(AAᵀ): the sum of the strictly upper triangular elements of A Aᵀ (Sec. 3.1.2)."""
    n = len(A)
    return sum(float(A[q] @ A[l]) for q in range(n) for l in range(q + 1, n))


def _ref_m(A: np.ndarray) -> np.ndarray:
    """m_{q,i} = exp(-||α_q - e_i||²)."""
    n, k = A.shape
    E = np.eye(k)
    return np.array([[np.exp(-np.sum((A[q] - E[i]) ** 2)) for i in range(k)] for q in range(n)])


@pytest.mark.parametrize(("n", "k"), [(12, 2), (30, 4), (25, 7)])
def test_loss_terms_match_the_papers_equations(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    H = rng.normal(size=(n, 5))
    A = _softmax_rows(rng, n, k)
    K = _ref_kernel(H, 0.15)
    Ht, At = torch.from_numpy(H), torch.from_numpy(A)
    np.testing.assert_allclose(gaussian_kernel(Ht, 0.15).numpy(), K, rtol=1e-10, atol=1e-14)
    Kt = torch.from_numpy(K)
    # the implementation's terms are means: eq. 3 × 2/(k-1), triu × 2/(n(n-1))
    d_alpha = _ref_d(A, K) * 2 / (k - 1)
    np.testing.assert_allclose(float(cs_divergence_term(At, Kt)), d_alpha, rtol=1e-10)
    triu = _ref_triu(A) * 2 / (n * (n - 1))
    np.testing.assert_allclose(float(orthogonality_term(At)), triu, rtol=1e-10)
    M = _ref_m(A)
    np.testing.assert_allclose(simplex_corner_similarity(At).numpy(), M, rtol=1e-12)
    d_m = _ref_d(M, K) * 2 / (k - 1)
    loss = ddc_loss(Ht, At, 0.15)
    np.testing.assert_allclose(float(loss.divergence), d_alpha, rtol=1e-9)
    np.testing.assert_allclose(float(loss.orthogonality), triu, rtol=1e-10)
    np.testing.assert_allclose(float(loss.simplex), d_m, rtol=1e-9)
    np.testing.assert_allclose(float(loss.total), d_alpha + triu + d_m, rtol=1e-9)


def test_loss_rewards_separated_crisp_balanced_clusters() -> None:
    """The paper's reading of each term: crisp assignments that follow well separated groups
    score lower than the same assignments shuffled, and than uniform assignments."""
    rng = np.random.default_rng(0)
    k, per = 3, 10
    H = np.vstack([rng.normal(10 * c, 0.3, size=(per, 4)) for c in range(k)])
    good = np.repeat(np.eye(k), per, axis=0)
    shuffled = good[rng.permutation(len(good))]
    uniform = np.full_like(good, 1 / k)
    Ht = torch.from_numpy(H)
    scores = [float(ddc_loss(Ht, torch.from_numpy(a)).total) for a in (good, shuffled, uniform)]
    assert scores[0] < scores[1] and scores[0] < scores[2]
    # crisp, balanced: the orthogonality term is the share of same-cluster pairs
    orth = float(orthogonality_term(torch.from_numpy(good)))
    assert orth == pytest.approx(k * per * (per - 1) / (k * per * (k * per - 1)))


def loss_rule(h, z):
    return ddc_loss(h, torch.softmax(z, dim=1), 0.15).total


def test_gradients_by_finite_differences() -> None:
    rng = np.random.default_rng(1)
    n, k = 9, 3
    H = torch.tensor(rng.normal(size=(n, 4)), requires_grad=True)
    Z = torch.tensor(rng.normal(size=(n, k)), requires_grad=True)

    def loss(h, z):
        return ddc_loss(h, torch.softmax(z, dim=1), sigma=1.3).total

    assert torch.autograd.gradcheck(loss, (H, Z), eps=1e-6, atol=1e-6)
    # with the width rule, σ is held constant for the gradient (re-estimated per batch, not
    # optimized): the assignments' gradient is exact
    H.requires_grad_(False)
    assert torch.autograd.gradcheck(lambda z: loss_rule(H, z), (Z,), eps=1e-6, atol=1e-6)
    A = torch.tensor(_softmax_rows(rng, n, k), requires_grad=True)
    K = torch.tensor(_ref_kernel(rng.normal(size=(n, 4)), 0.3), requires_grad=True)
    assert torch.autograd.gradcheck(cs_divergence_term, (A, K), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(orthogonality_term, (A,), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradcheck(simplex_corner_similarity, (A,), eps=1e-6, atol=1e-6)


# ---------------------------------------------------------------- batches


def test_batches_visit_every_row_once_and_the_short_tail_joins_the_last() -> None:
    X = np.arange(100, dtype=np.float32)[:, None]
    Xd = da.from_array(X, chunks=((37, 50, 13), 1))
    batches = list(mini_batches(Xd, 20, np.random.default_rng(0), merge_tail=True))
    seen = np.concatenate([idx for idx, _ in batches])
    assert sorted(seen.tolist()) == list(range(100))
    for idx, rows in batches:
        np.testing.assert_array_equal(rows[:, 0], X[idx, 0])
    lengths = [len(idx) for idx, _ in batches]
    assert lengths == [20] * 5  # 100 rows: no tail
    lengths = [
        len(i) for i, _ in mini_batches(Xd[:90], 20, np.random.default_rng(0), merge_tail=True)
    ]
    assert lengths == [20, 20, 20, 30]


# ---------------------------------------------------------------- the estimator


def _blobs(n_per: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.array([[-4.0, 0.0, 0.0], [4.0, 0.0, 0.0], [0.0, 6.0, 0.0]])
    X = np.vstack([rng.normal(c, 0.7, size=(n_per, 3)) for c in centres])
    return X.astype(np.float32), np.repeat(np.arange(3), n_per)


def _fast(**params) -> DeepDivergenceClustering:
    base = dict(n_clusters=3, max_iter=15, batch_size=60, learning_rate_init=1e-3, random_state=0)
    return DeepDivergenceClustering(**{**base, **params})


def test_separated_blobs_are_found_from_random_weights() -> None:
    X, y = _blobs()
    model = _fast(max_iter=40, init="random").fit(X)
    assert clustering_accuracy(y, model.labels_) >= 0.95
    assert len(model.loss_curve_) == 40 and model.loss_curve_[-1] < model.loss_curve_[0]


def test_the_spectral_start_trains_on_spectral_partitions_of_the_input_then_hidden_layer() -> None:
    from dkernel import SpectralClustering
    from dkernel.deep import _ddc_init
    from dkernel.deep._ddc_training import Architecture, build_network

    X, y = _blobs()
    net = build_network(Architecture((3,), 3), torch.Generator().manual_seed(0))
    partitions = _ddc_init.spectral_init(net, X, (3,), 3, 60, seed=5)
    assert len(partitions) == _ddc_init.INIT_ROUNDS
    first = SpectralClustering(
        n_clusters=3,
        n_components=_ddc_init.init_components(3),
        random_state=_derive_seed(5, "ddc-init-spectral", 0),
    )
    np.testing.assert_array_equal(partitions[0], first.fit(X.astype(np.float64)).labels_)
    for labels in partitions:
        assert clustering_accuracy(y, labels) == 1.0
    proba = predict_proba_array(net, X)  # the network reproduces the partition before DDC
    assert clustering_accuracy(y, proba.argmax(axis=1)) == 1.0
    # DDC from that start keeps the blobs after one epoch
    assert clustering_accuracy(y, _fast(max_iter=1).fit(X).labels_) == 1.0


def test_the_spectral_partition_joins_the_graph_as_spectral_clustering_does() -> None:
    # five separate blobs, four clusters: the graph's pieces are joined down to n_clusters,
    # not to the wider embedding's dimension
    from dkernel import SpectralClustering
    from dkernel.deep import _ddc_init

    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0], [12.0, 12.0], [30.0, 30.0]])
    X = np.vstack([rng.normal(c, 0.5, size=(40, 2)) for c in centres])
    labels = _ddc_init.spectral_partition(X, 4, seed=2)
    sc = SpectralClustering(n_clusters=4, n_components=_ddc_init.init_components(4), random_state=2)
    np.testing.assert_array_equal(labels, sc.fit(X).labels_)


def test_the_spectral_start_samples_large_data_and_skips_tiny_data(monkeypatch) -> None:
    from dkernel.deep import _ddc_init

    monkeypatch.setattr(_ddc_init, "INIT_MAX_SAMPLES", 50)
    rows = _ddc_init.init_rows(np.zeros((180, 2)), seed=1)
    assert rows.size == 50 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(rows, _ddc_init.init_rows(np.zeros((180, 2)), seed=1))
    called = []
    monkeypatch.setattr("dkernel.deep.ddc.spectral_init", lambda *a: called.append(a))
    X, _ = _blobs(15)  # 45 rows: below INIT_MIN_SAMPLES, random weights
    _fast(max_iter=1).fit(X)
    assert not called


def test_auto_chooses_the_number_spectral_clustering_chooses() -> None:
    from dkernel import SpectralClustering

    X, y = _blobs()
    model = _fast(n_clusters="auto", max_iter=5).fit(X)
    reference = SpectralClustering(n_clusters="auto", random_state=_derive_seed(0, "ddc-auto")).fit(
        X.astype(np.float64)
    )
    assert model.n_clusters_ == reference.n_clusters_ == 3
    np.testing.assert_allclose(model.model_order_.scores, reference.n_clusters_scores_)
    assert model.predict_proba(X).shape == (len(X), 3)
    assert clustering_accuracy(y, model.labels_) >= 0.95
    assert _fast().fit(X).model_order_ is None and _fast().fit(X).n_clusters_ == 3


def test_predict_on_training_rows_equals_labels() -> None:
    X, _ = _blobs()
    model = _fast().fit(X)
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    proba = model.predict_proba(X)
    assert proba.shape == (len(X), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)


def test_same_seed_same_labels_and_restarts_ranked_by_loss() -> None:
    X, _ = _blobs()
    a = _fast(n_init=2).fit(X)
    b = _fast(n_init=2).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.losses_, b.losses_)
    assert a.loss_ == a.losses_.min() and a.losses_[0] != a.losses_[1]


def test_weights_round_trip_to_an_estimator_that_predicts_the_same() -> None:
    X, _ = _blobs()
    model = _fast().fit(X)
    weights = model.network_weights()
    assert "output.0.weight" in weights and weights["output.0.weight"].shape == (3, 500)
    copy = DeepDivergenceClustering.from_weights(weights, model.input_shape_, 3)
    np.testing.assert_array_equal(copy.predict_proba(X), model.predict_proba(X))
    with pytest.raises(InvalidInputError, match=r"do not fit a DeepDivergenceClustering network"):
        DeepDivergenceClustering.from_weights(weights, model.input_shape_, 4)


def test_a_ddc_job_stores_its_network_and_from_results_predicts_with_it(tmp_path) -> None:
    import yaml

    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results, read_model_order

    X, _ = _blobs()
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    spec = tmp_path / "ddc.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "ddc",
                "seed": 0,
                "data": {"reader": "csv", "path": str(tmp_path / "x.csv")},
                "method": "ddc",
                "params": {"n_clusters": 3, "max_iter": 3, "batch_size": 60},
                "output": str(tmp_path / "ddc.zarr"),
            }
        )
    )
    tree = open_results(run_job(spec, progress=False, quiet=True))
    model = DeepDivergenceClustering.from_results(tree)
    assert model.input_shape_ == (3,) and model.loss_ == tree["network"].attrs["loss"]
    np.testing.assert_allclose(
        model.predict_proba(X), tree["assignments"]["proba"].values, rtol=1e-6, atol=1e-7
    )
    with pytest.raises(InvalidInputError, match=r"takes the results tree .* got str"):
        DeepDivergenceClustering.from_results(str(tmp_path))
    # missing values: the job's estimator fills them (handles_missing), the labels come out
    X[5, 1] = X[17, 0] = np.nan
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    holed = open_results(run_job(spec, progress=False, quiet=True, overwrite=True))
    assert holed["assignments"]["labels"].values.shape == (len(X),)
    assert "model_order" not in holed.children
    spec.write_text(spec.read_text().replace("n_clusters: 3", "n_clusters: auto"))
    auto_store = run_job(spec, progress=False, quiet=True, overwrite=True)
    assert read_model_order(auto_store).n_clusters == 3  # the evidence, stored
    assert DeepDivergenceClustering.from_results(open_results(auto_store)).n_clusters_ == 3
    restored = DeepDivergenceClustering.from_results(holed)  # with its missing-value model
    np.testing.assert_allclose(
        restored.predict_proba(X), holed["assignments"]["proba"].values, rtol=1e-6, atol=1e-7
    )
    with pytest.raises(InvalidInputError, match=r"no /network group"):
        DeepDivergenceClustering.from_results(tree["assignments"])


def test_dask_input_trains_and_predicts_chunk_by_chunk() -> None:
    X, _ = _blobs()
    one = _fast().fit(da.from_array(X, chunks=len(X)))
    np.testing.assert_array_equal(one.labels_, _fast().fit(X).labels_)
    two = _fast().fit(da.from_array(X, chunks=70))  # other chunks: other shuffles, still fits
    assert two.labels_.shape == (len(X),)
    p1 = one.predict(da.from_array(X, chunks=len(X)))
    p2 = one.predict(da.from_array(X, chunks=(45, 3)))
    assert isinstance(p2, da.Array) and p2.numblocks == (4,)
    np.testing.assert_array_equal(p1.compute(), p2.compute())
    np.testing.assert_array_equal(p2.compute(), one.labels_)
    np.testing.assert_allclose(
        one.predict_proba(da.from_array(X, chunks=50)).compute(), one.predict_proba(X), atol=1e-6
    )


def test_missing_values_enter_at_their_conditional_means() -> None:
    from dkernel.kernels.missing_model import MissingValueModel

    rng = np.random.default_rng(3)
    X, y = _blobs()
    X = np.c_[X, X[:, :2] + rng.normal(0, 0.1, (len(X), 2))].astype(np.float32)
    holed = X.copy()
    holed[rng.random(X.shape) < 0.2] = np.nan
    empty = np.isnan(holed).all(axis=1)
    holed[empty, 0] = X[empty, 0]
    model = _fast(max_iter=20).fit(holed)
    missing = model.missing_model_
    reference = MissingValueModel.fit(holed.astype(np.float64))
    np.testing.assert_allclose(missing.mean, reference.mean)
    rows = np.flatnonzero(np.isnan(holed).any(axis=1))[:5]
    # the model's fill (tested against the textbook formula in tests/kernels)
    model_filled = missing.fill(holed[rows].astype(np.float64))[0]
    np.testing.assert_allclose(
        model.predict_proba(holed[rows]), model.predict_proba(model_filled.astype(np.float32)),
        atol=1e-5,
    )  # fmt: skip
    np.testing.assert_array_equal(model.predict(holed), model.labels_)
    assert clustering_accuracy(y, model.labels_) >= 0.95
    lazy = model.predict(da.from_array(holed, chunks=(50, 5)))
    np.testing.assert_array_equal(lazy.compute(), model.labels_)


def test_dask_rows_with_missing_values_are_filled_once_not_every_epoch(monkeypatch) -> None:
    """The fill solves for each row's missing block; a Dask input's filled rows are persisted
    (up to FILLED_CACHE_BYTES) so that the epochs' passes do not repeat it."""
    from dkernel.deep import _missing

    rng = np.random.default_rng(1)
    X, _ = _blobs()
    X[rng.random(X.shape) < 0.1] = np.nan
    X[np.isnan(X).all(axis=1), 0] = 0.0
    calls = []
    fill = _missing._fill_block
    monkeypatch.setattr(_missing, "_fill_block", lambda b, m: calls.append(len(b)) or fill(b, m))
    # this process's threads count the calls (not a distributed client another test left)
    monkeypatch.setitem(dask.config.config, "scheduler", "threads")
    lazy = _fast(max_iter=4).fit(da.from_array(X, chunks=(90, 3)))
    assert sum(calls) == len(X)  # each row filled once, for the four epochs and the labels
    calls.clear()
    monkeypatch.setattr(_missing, "FILLED_CACHE_BYTES", 0)  # too large to keep: filled per pass
    again = _fast(max_iter=4).fit(da.from_array(X, chunks=(90, 3)))
    assert sum(calls) > 4 * len(X)
    np.testing.assert_array_equal(again.labels_, lazy.labels_)  # the same fill either way


def test_images_with_missing_pixels_train_and_predict() -> None:
    rng = np.random.default_rng(0)
    imgs = rng.normal(0, 0.1, (60, 16, 16)).astype(np.float32)
    imgs[::2, 4:12, 4:12] += 1  # a bright square on every other image
    holed = imgs.copy()
    rows, cols = rng.integers(0, 9, (2, 60))
    for i in range(60):
        holed[i, rows[i] : rows[i] + 8, cols[i] : cols[i] + 8] = np.nan  # a quarter missing
    model = DeepDivergenceClustering(n_clusters=2, max_iter=2, random_state=0).fit(holed)
    assert model.labels_.shape == (60,)
    assert np.isfinite(model.predict_proba(holed)).all()
    assert model.missing_model_.mean.shape == (256,)
    np.testing.assert_array_equal(model.predict(holed), model.labels_)
    bad = holed.copy()
    bad[0, 0, 0] = np.inf
    with pytest.raises(InvalidInputError, match="infinite"):
        model.predict(bad)
    copy = DeepDivergenceClustering.from_weights(model.network_weights(), model.input_shape_, 2)
    np.testing.assert_array_equal(copy.predict(imgs), model.predict(imgs))
    with pytest.raises(InvalidInputError, match="no model to fill them"):
        copy.predict(holed)
    with pytest.raises(InvalidInputError, match="NaN in every sample"):
        empty = holed.copy()
        empty[:, 0, 0] = np.nan
        DeepDivergenceClustering(n_clusters=2, max_iter=1).fit(empty)


def test_images_go_through_the_cnn() -> None:
    rng = np.random.default_rng(0)
    imgs = np.zeros((40, 16, 16), dtype=np.float32)
    imgs[:20, :8] = 1.0  # top half lit
    imgs[20:, 8:] = 1.0  # bottom half lit
    imgs += rng.normal(0, 0.05, imgs.shape).astype(np.float32)
    model = DeepDivergenceClustering(n_clusters=2, max_iter=10, batch_size=20, random_state=0)
    model.fit(imgs)
    assert model.input_shape_ == (1, 16, 16) and model.n_features_in_ == 256
    assert clustering_accuracy(np.repeat([0, 1], 20), model.labels_) == 1.0
    np.testing.assert_array_equal(model.predict(imgs[:, None]), model.labels_)
    lazy = model.predict(da.from_array(imgs, chunks=(15, 16, 16)))
    np.testing.assert_array_equal(lazy.compute(), model.labels_)


class _Interrupted(Exception):
    pass


def _watch_epochs(monkeypatch, stop_after: int | None = None) -> list[tuple[int, int]]:
    """The ``(restart, epoch)`` of every epoch DDC starts (seen through its ``epoch_rng``);
    with ``stop_after``, the training is interrupted as the epoch after the first
    ``stop_after`` starts: killed mid-way, with the checkpoint of ``stop_after`` epochs."""
    import dkernel.deep.ddc as ddc_module
    from dkernel.deep._ddc_training import epoch_rng as real

    seen: list[tuple[int, int]] = []

    def watched(seed, run, epoch):
        if stop_after is not None and len(seen) == stop_after:
            raise _Interrupted
        seen.append((run, epoch))
        return real(seed, run, epoch)

    monkeypatch.setattr(ddc_module, "epoch_rng", watched)
    return seen


def test_resume_after_interruption_gives_the_uninterrupted_result(tmp_path, monkeypatch) -> None:
    X, _ = _blobs()
    params = dict(n_clusters=3, max_iter=6, batch_size=60, learning_rate_init=1e-3, n_init=2)
    reference = DeepDivergenceClustering(random_state=3, **params).fit(X)
    path = tmp_path / "ddc.pt"
    _watch_epochs(monkeypatch, 8)  # the second restart's 2nd epoch
    with pytest.raises(_Interrupted):
        DeepDivergenceClustering(random_state=3, checkpoint=path, **params).fit(X)
    assert path.exists()
    seen = _watch_epochs(monkeypatch)
    resumed = DeepDivergenceClustering(random_state=3, checkpoint=path, **params).fit(X)
    assert seen == [(1, e) for e in range(2, 6)]  # only what was left
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)
    np.testing.assert_allclose(resumed.losses_, reference.losses_, rtol=1e-12)
    np.testing.assert_allclose(resumed.loss_curve_, reference.loss_curve_, rtol=1e-12)
    with pytest.raises(InvalidInputError, match="belongs to another training"):
        DeepDivergenceClustering(random_state=4, checkpoint=path, **params).fit(X)


def test_resume_without_a_seed_continues_with_the_recorded_one(tmp_path, monkeypatch) -> None:
    X, _ = _blobs()
    params = dict(n_clusters=3, max_iter=3, batch_size=60, learning_rate_init=1e-3)
    path = tmp_path / "ddc.pt"
    _watch_epochs(monkeypatch, 1)
    with pytest.raises(_Interrupted):
        DeepDivergenceClustering(checkpoint=path, **params).fit(X)
    seed = torch.load(path, weights_only=True)["seed"]
    seen = _watch_epochs(monkeypatch)
    resumed = DeepDivergenceClustering(checkpoint=path, **params).fit(X)
    assert seen == [(0, 1), (0, 2)]
    reference = DeepDivergenceClustering(random_state=seed, **params).fit(X)
    np.testing.assert_array_equal(resumed.labels_, reference.labels_)


def test_missing_torch_names_the_extra() -> None:
    # a finder that refuses torch (sys.modules['torch'] = None would break SciPy's array-API
    # probe, which looks torch up in sys.modules)
    code = (
        "import sys, importlib.abc\n"
        "class NoTorch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "import numpy as np\n"
        "from dkernel import DeepDivergenceClustering\n"
        "from dkernel.errors import InvalidInputError\n"
        "try:\n"
        "    DeepDivergenceClustering(n_clusters=2).fit(np.zeros((4, 2)))\n"
        "except InvalidInputError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "dkernel[deep]" in out.stdout and "PyTorch" in out.stdout


@pytest.mark.parametrize(
    ("X", "params", "match"),
    [
        (np.zeros((10, 2, 2, 2, 2)), {}, "got a 5-D array"),
        (np.zeros((10, 8, 8)), {}, "at least 16 x 16"),
        (np.zeros((10, 28, 28, 3)), {}, "channels-last"),
        (np.array([[1.0, np.nan]] * 10), {}, "NaN in every sample"),
        (np.zeros((1, 3)), {}, "minimum of 2"),
        (np.zeros((5, 3)), {"n_clusters": 8}, "at least n_clusters=8"),
        (np.zeros((10, 3)), {"n_clusters": "auto"}, "at least 50 samples"),
        (np.zeros((10, 3)), {"n_clusters": 0}, "n_clusters"),
        (np.zeros((10, 3)), {"batch_size": 1}, "batch_size"),
        (np.zeros((10, 3)), {"sigma_fraction": 0}, "sigma_fraction"),
    ],
)
def test_bad_input_raises_a_clear_error(X, params, match) -> None:
    with pytest.raises(InvalidInputError, match=match):
        DeepDivergenceClustering(**params).fit(X)


def test_predict_refuses_other_shapes() -> None:
    X, _ = _blobs(10)
    model = _fast(max_iter=1).fit(X)
    with pytest.raises(InvalidInputError, match="3 features"):
        model.predict(np.zeros((4, 5)))
    imgs = np.zeros((12, 16, 16), dtype=np.float32)
    imgs[::2] = 1
    cnn = DeepDivergenceClustering(n_clusters=2, max_iter=1, random_state=0).fit(imgs)
    with pytest.raises(InvalidInputError, match="shape"):
        cnn.predict(np.zeros((3, 20, 20)))


def test_corrupt_checkpoint_is_refused(tmp_path) -> None:
    path = tmp_path / "ddc.pt"
    path.write_bytes(b"not a checkpoint")
    X, _ = _blobs(10)
    with pytest.raises(InvalidInputError, match="cannot read the checkpoint"):
        _fast(checkpoint=path).fit(X)


def test_progress_shows_the_epochs_and_verbose_is_its_former_name(capsys) -> None:
    X, _ = _blobs()
    params = dict(n_clusters=3, max_iter=2, batch_size=60, n_init=2, random_state=0)
    shown = DeepDivergenceClustering(progress=True, **params).fit(X)
    err = capsys.readouterr().err
    assert "DDC epochs (2 restarts): epoch 4/4" in err, err
    DeepDivergenceClustering(**params).fit(X)
    assert capsys.readouterr().err == ""  # silent by default
    with pytest.warns(DKernelDeprecationWarning, match="verbose.*progress"):
        former = DeepDivergenceClustering(verbose=1, **params).fit(X)
    assert "DDC epochs (2 restarts): epoch 4/4" in capsys.readouterr().err
    np.testing.assert_array_equal(former.labels_, shown.labels_)
