"""DeepKernelizedAutoencoder ([Kampffmeyer2018]): the losses against NumPy references of the
paper's equations, gradients by finite differences, out-of-sample = in-sample, determinism
(one seed; Dask chunkings), resume after an interrupted fit, missing PyTorch, bad input."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import dask.array as da
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.utils._param_validation import InvalidParameterError  # noqa: E402

from dkernel import DeepKernelizedAutoencoder  # noqa: E402
from dkernel._random import derive_seed  # noqa: E402
from dkernel.deep import _training  # noqa: E402
from dkernel.deep._alignment import (  # noqa: E402
    alignment_loss,
    code_kernel,
    dkae_loss,
    reconstruction_loss,
)
from dkernel.deep._prior import (  # noqa: E402
    FLOOR_SCORING_ESTIMATORS,
    HELD_OUT_ROWS,
    PRIOR_FLOOR_FRACTIONS,
    PriorBlocks,
    choose_pck_floor,
    fit_prior,
    held_out_sample,
)
from dkernel.errors import InvalidInputError, NotFittedError, NumericalWarning  # noqa: E402


def _data(n: int = 120, p: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, size=(3, p))
    return (centres[rng.integers(0, 3, n)] + rng.normal(size=(n, p))).astype(np.float32)


def _model(**kw) -> DeepKernelizedAutoencoder:
    params = dict(
        n_components=4,
        hidden_layer_sizes=(16,),
        prior="rbf",
        prior_samples=50,
        batch_size=32,
        max_iter=3,
        random_state=0,
    )
    params.update(kw)
    return DeepKernelizedAutoencoder(**params)


# -- losses -----------------------------------------------------------------------------------
def _np_alignment(Z: np.ndarray, P: np.ndarray) -> float:
    """Eq. 5 written out: C_ij = E(x_i)·E(x_j), Frobenius norms by sums of squares."""
    C = np.array([[Z[i] @ Z[j] for j in range(len(Z))] for i in range(len(Z))])
    fro = lambda A: np.sqrt((A**2).sum())  # noqa: E731
    return float(fro(C / fro(C) - P / fro(P)))


def test_alignment_loss_matches_equation_5_and_6():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(7, 3))
    G = rng.normal(size=(7, 5))
    P = G @ G.T
    got = alignment_loss(code_kernel(torch.tensor(Z)), torch.tensor(P)).item()
    assert got == pytest.approx(_np_alignment(Z, P), rel=1e-12)
    C = Z @ Z.T
    A = (C * P).sum() / (np.linalg.norm(C) * np.linalg.norm(P))  # kernel alignment (Eq. 6)
    assert got == pytest.approx(np.sqrt(2 - 2 * A), rel=1e-10)
    # a positive multiple of the prior is perfectly aligned
    assert alignment_loss(torch.tensor(3.0 * P), torch.tensor(P)).item() == pytest.approx(
        0, abs=1e-7
    )


def test_batch_loss_matches_equation_7():
    rng = np.random.default_rng(2)
    X, R = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    Z, P = rng.normal(size=(6, 3)), np.abs(rng.normal(size=(6, 6)))
    P = P + P.T
    lam = 0.3
    total, lr, lc = dkae_loss(*(torch.tensor(a) for a in (X, R, Z, P)), lam)
    expected_lr = sum(((X[i] - R[i]) ** 2).sum() for i in range(6)) / (6 * 4)
    assert lr.item() == pytest.approx(expected_lr, rel=1e-12)
    assert lc.item() == pytest.approx(_np_alignment(Z, P), rel=1e-12)
    assert total.item() == pytest.approx((1 - lam) * expected_lr + lam * lc.item(), rel=1e-12)
    # no prior: the plain autoencoder's loss
    total0, _, lc0 = dkae_loss(*(torch.tensor(a) for a in (X, R, Z)), None, 0.0)
    assert lc0.item() == 0 and total0.item() == pytest.approx(expected_lr)
    assert reconstruction_loss(torch.tensor(X), torch.tensor(X)).item() == 0
    # missing entries: the reconstruction is scored on the observed ones only
    observed = (rng.random((6, 4)) > 0.3).astype(np.float64)
    _, lr_obs, _ = dkae_loss(*(torch.tensor(a) for a in (X, R, Z, P)), lam, torch.tensor(observed))
    kept = [(X[i, j] - R[i, j]) ** 2 for i in range(6) for j in range(4) if observed[i, j]]
    assert lr_obs.item() == pytest.approx(sum(kept) / len(kept), rel=1e-12)


def test_loss_gradients_by_finite_differences():
    rng = np.random.default_rng(3)
    Z = torch.tensor(rng.normal(size=(5, 3)), requires_grad=True)
    G = rng.normal(size=(5, 4))
    P = torch.tensor(G @ G.T)
    assert torch.autograd.gradcheck(lambda z: alignment_loss(code_kernel(z), P), (Z,))
    X = torch.tensor(rng.normal(size=(5, 2)))
    R = torch.tensor(rng.normal(size=(5, 2)), requires_grad=True)
    assert torch.autograd.gradcheck(lambda r, z: dkae_loss(X, r, z, P, 0.4)[0], (R, Z))


# -- the model -------------------------------------------------------------------------------
def test_tied_network_matches_a_numpy_forward_pass():
    X = _data()
    m = _model().fit(X)
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    W, b, c = m.coefs_, m.intercepts_, m.decoder_intercepts_
    Z = relu(X @ W[0] + b[0]) @ W[1] + b[1]
    np.testing.assert_allclose(m.transform(X), Z, rtol=1e-5, atol=1e-5)
    R = relu(Z @ W[1].T + c[1]) @ W[0].T + c[0]  # the same weights, transposed
    np.testing.assert_allclose(m.inverse_transform(Z), R, rtol=1e-4, atol=1e-4)
    assert [w.shape for w in W] == [(8, 16), (16, 4)]
    assert len(m.loss_curve_) == m.n_iter_ == 3


def test_out_of_sample_equals_in_sample():
    X = _data()
    m = _model()
    Z = m.fit_transform(X)
    np.testing.assert_array_equal(Z, m.transform(X))
    # a row's code does not depend on the other rows of the call
    np.testing.assert_array_equal(m.transform(X[17:40]), Z[17:40])
    np.testing.assert_array_equal(m.transform(X[5:6]), Z[5:6])


def test_a_dkae_job_stores_its_network_and_from_results_encodes_and_decodes(tmp_path):
    import yaml

    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results

    X = _data()
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    spec = tmp_path / "dkae.yaml"
    params = {"n_components": 4, "hidden_layer_sizes": [16], "prior": "rbf", "max_iter": 2}
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "dkae",
                "seed": 0,
                "data": {"reader": "csv", "path": str(tmp_path / "x.csv")},
                "method": "dkae",
                "params": {**params, "batch_size": 32},
                "output": str(tmp_path / "dkae.zarr"),
            }
        )
    )
    tree = open_results(run_job(spec, progress=False, quiet=True))
    model = DeepKernelizedAutoencoder.from_results(tree)
    assert model.hidden_layer_sizes == (16,) and model.n_components == 4
    codes = model.transform(X)
    np.testing.assert_allclose(codes, tree["codes"]["codes"].values, rtol=1e-5, atol=1e-6)
    assert model.inverse_transform(codes).shape == X.shape
    with pytest.raises(InvalidInputError, match=r"takes the results tree .* got str"):
        DeepKernelizedAutoencoder.from_results(str(tmp_path))
    with pytest.raises(InvalidInputError, match=r"no /network group"):
        DeepKernelizedAutoencoder.from_results(tree["codes"])
    # missing values: the job trains on them (handles_missing) and the store fills new ones
    X[3, 1] = X[40, 5] = np.nan
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    holed = open_results(run_job(spec, progress=False, quiet=True, overwrite=True))
    restored = DeepKernelizedAutoencoder.from_results(holed)
    np.testing.assert_allclose(
        restored.transform(X), holed["codes"]["codes"].values, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("prior", ["rbf", "pck", "cosine"])
def test_missing_values_are_encoded_at_their_conditional_means(prior):
    rng = np.random.default_rng(4)
    X = _data(n=150)
    holed = X.copy()
    holed[rng.random(X.shape) < 0.15] = np.nan
    empty = np.isnan(holed).all(axis=1)
    holed[empty, 0] = X[empty, 0]
    params = {"prior_params": {"n_estimators": 3}} if prior == "pck" else {}
    model = _model(prior=prior, max_iter=2, **params).fit(holed)
    codes = model.transform(holed)
    assert np.isfinite(codes).all() and np.isfinite(model.loss_curve_).all()
    missing = model.missing_model_
    rows = np.flatnonzero(np.isnan(holed).any(axis=1))[:5]
    # the model's fill (tested against the textbook formula in tests/kernels)
    model_filled = missing.fill(holed[rows].astype(np.float64))[0]
    np.testing.assert_allclose(
        codes[rows], model.transform(model_filled.astype(np.float32)), rtol=1e-5, atol=1e-6
    )
    lazy = model.transform(da.from_array(holed, chunks=(40, 8))).compute()
    np.testing.assert_allclose(lazy, codes, rtol=1e-5, atol=1e-6)
    again = _model(prior=prior, max_iter=2, **params).fit(da.from_array(holed, chunks=(150, 8)))
    np.testing.assert_allclose(again.transform(holed), codes, rtol=1e-5, atol=1e-6)
    copy = DeepKernelizedAutoencoder(n_components=4, hidden_layer_sizes=(16,))
    copy.coefs_, copy.intercepts_ = model.coefs_, model.intercepts_
    copy.decoder_intercepts_, copy.n_features_in_ = model.decoder_intercepts_, 8
    with pytest.raises(InvalidInputError, match="no model to fill them"):
        copy.transform(holed)


def test_dask_transform_equals_numpy_for_any_chunking():
    X = _data()
    m = _model().fit(X)
    Z = m.transform(X)
    one = m.transform(da.from_array(X, chunks=(120, 8)))
    two = m.transform(da.from_array(X, chunks=(50, 8)))
    assert isinstance(two, da.Array) and two.numblocks == (3, 1)
    np.testing.assert_array_equal(one.compute(), Z)
    np.testing.assert_array_equal(two.compute(), Z)
    back = m.inverse_transform(da.from_array(Z, chunks=(40, 4))).compute()
    np.testing.assert_array_equal(back, m.inverse_transform(Z))


def test_one_seed_one_model():
    X = _data()
    a, b = _model().fit(X), _model().fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    assert a.loss_curve_ == b.loss_curve_
    c = _model(random_state=1).fit(X)
    assert not np.array_equal(a.transform(X), c.transform(X))


def test_dask_training_reads_chunks_and_is_deterministic():
    X = _data()
    Xd = da.from_array(X, chunks=(45, 8))
    a, b = _model().fit(Xd), _model().fit(Xd)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    seen = []
    for idx, rows in _training.mini_batches(Xd, 32, np.random.default_rng(0)):
        np.testing.assert_array_equal(rows, X[idx])
        seen.append(idx)
    assert sorted(np.concatenate(seen)) == list(range(120))
    assert [len(s) for s in seen[:-1]] == [32] * (len(seen) - 1)


def test_alignment_term_pulls_the_codes_towards_the_prior():
    X = _data(200)
    dkae = _model(kernel_weight=0.5, max_iter=15).fit(X)
    ae = _model(kernel_weight=0.0, max_iter=15).fit(X)
    assert ae.prior_kernel_ is None and ae.alignment_curve_ == [0.0] * 15
    assert dkae.alignment_curve_[-1] < dkae.alignment_curve_[0]
    P = torch.tensor(dkae.prior_kernel_(X.astype(np.float64)))

    def lc(model):
        Z = torch.tensor(model.transform(X), dtype=torch.float64)
        return alignment_loss(code_kernel(Z), P).item()

    assert lc(dkae) < lc(ae)


def test_pck_prior_blocks_cached_equal_evaluated():
    X = _data(80).astype(np.float64)
    kernel = fit_prior("pck", {"n_estimators": 3, "max_components": 4}, X[:40], 0)[0]
    cached = PriorBlocks(kernel, X)
    assert cached.features is not None
    direct = PriorBlocks(kernel, X, max_memory=1)  # no room: evaluated per batch
    assert direct.features is None
    idx = np.array([3, 70, 11, 42])
    np.testing.assert_allclose(cached.block(idx, X[idx]), direct.block(idx, X[idx]), atol=1e-5)


def test_fit_with_the_default_pck_prior():
    X = _data(90)
    m = _model(prior="pck", prior_params={"n_estimators": 3, "max_components": 4}).fit(X)
    assert m.prior_kernel_.name == "pck" and len(m.prior_indices_) == 50
    assert np.isfinite(m.loss_curve_).all()
    # the paper's prior: every GMM on all the prior's rows, the same kernel as a PCK told so
    pck = m.prior_kernel_.feature_map
    assert pck.max_samples == 1.0
    sample = X[m.prior_indices_].astype(np.float64)
    again = fit_prior("pck", {"n_estimators": 3, "max_components": 4}, sample, 0)[0]
    told = fit_prior(
        "pck", {"n_estimators": 3, "max_components": 4, "max_samples": 1.0}, sample, 0
    )[0]
    half = fit_prior(
        "pck", {"n_estimators": 3, "max_components": 4, "max_samples": 0.5}, sample, 0
    )[0]
    np.testing.assert_array_equal(again(sample), told(sample))
    assert not np.allclose(again(sample), half(sample))


@pytest.mark.parametrize("held_out", [True, False])
def test_the_pck_prior_drops_constant_columns_without_a_warning(held_out):
    """A pixel blank in every image (the digits' borders) is the PCK's to drop, not the
    autoencoder's user's to hear about; the fit equals the one on the varying columns."""
    X = _data(90)
    blank = np.column_stack([np.zeros(len(X), np.float32), X])
    params = {"n_estimators": 3, "max_components": 4}
    kw = {} if held_out else {"prior_samples": 90}  # all rows sampled: no floor to choose
    with warnings.catch_warnings():
        warnings.simplefilter("error", NumericalWarning)
        m = _model(prior="pck", prior_params=params, **kw).fit(blank)
    pck = m.prior_kernel_.feature_map
    assert not pck.feature_mask_[0] and pck.feature_mask_[1:].all()
    assert (m.prior_floor_scores_ is not None) == held_out


def test_the_pck_prior_floor_is_chosen_on_held_out_rows():
    X = _data(200, p=20)
    params = {"n_estimators": FLOOR_SCORING_ESTIMATORS + 2, "max_components": 6}
    m = _model(prior="pck", prior_params=params).fit(X)
    idx, held = held_out_sample(X, m.prior_indices_, HELD_OUT_ROWS, 0)
    assert idx.size == 150 and not np.isin(idx, m.prior_indices_).any()
    np.testing.assert_array_equal(held, X[idx].astype(np.float64))
    sample = X[m.prior_indices_].astype(np.float64)
    told = {**params, "max_samples": 1.0, "random_state": derive_seed(0, "dkae-pck")}
    best, scores = choose_pck_floor(told, sample, held)
    assert len(scores) == 1 + len(PRIOR_FLOOR_FRACTIONS) and m.prior_floor_scores_ == scores
    assert m.prior_kernel_.feature_map.reg_covar == best.reg_covar == max(scores, key=scores.get)
    assert m.prior_kernel_.feature_map.n_estimators == FLOOR_SCORING_ESTIMATORS + 2
    scoring = {**told, "n_estimators": FLOOR_SCORING_ESTIMATORS}
    for floor, score in scores.items():  # each candidate: a PCK of that floor, scored
        with warnings.catch_warnings():  # the large floors are large on purpose
            warnings.simplefilter("ignore", NumericalWarning)
            pck = fit_prior("pck", {**scoring, "reg_covar": floor}, sample, 0)[0].feature_map
        assert pck.score(held) == pytest.approx(score, rel=1e-12)
    # a floor given is taken as given; no held-out rows: the PCK's own
    given = _model(prior="pck", prior_params={**params, "reg_covar": 1e-3}).fit(X)
    assert given.prior_kernel_.feature_map.reg_covar == 1e-3 and given.prior_floor_scores_ is None
    none_left = _model(prior="pck", prior_params=params, prior_samples=200).fit(X)
    assert none_left.prior_kernel_.feature_map.reg_covar == 1e-6


# -- resume -----------------------------------------------------------------------------------
def _fit_killed_in_epoch(model, X, epoch, monkeypatch):
    """``model.fit(X)`` interrupted (KeyboardInterrupt) as epoch ``epoch`` (from 0) starts."""
    real = _training.epoch_rng

    def killed(seed, what, e):
        if e == epoch:
            raise KeyboardInterrupt
        return real(seed, what, e)

    monkeypatch.setattr("dkernel.deep.dkae.epoch_rng", killed)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    monkeypatch.setattr("dkernel.deep.dkae.epoch_rng", real)


def test_resume_continues_an_interrupted_fit(tmp_path, monkeypatch):
    X = _data()
    path = tmp_path / "dkae.pt"
    full = _model(max_iter=4).fit(X)
    _fit_killed_in_epoch(_model(max_iter=4, checkpoint=path), X, 2, monkeypatch)
    assert torch.load(path, weights_only=True)["epoch"] == 2

    resumed = _model(max_iter=4, checkpoint=path).fit(X)
    np.testing.assert_array_equal(resumed.transform(X), full.transform(X))
    assert resumed.loss_curve_ == full.loss_curve_ and resumed.n_iter_ == 4
    # 2 epochs, then 2 more from the checkpoint == 4 epochs
    path2 = tmp_path / "again.pt"
    _model(max_iter=2, checkpoint=path2).fit(X)
    again = _model(max_iter=4, checkpoint=path2).fit(X)
    np.testing.assert_array_equal(again.transform(X), full.transform(X))


def test_resume_from_a_checkpoint_kept_in_a_results_store(tmp_path, monkeypatch, caplog):
    """What a ``dkae`` job hands the estimator: a StoreCheckpoint, not a file."""
    from dkernel.storage.store import ResultsStore

    X = _data()
    full = _model(max_iter=3).fit(X)
    store = ResultsStore.create(tmp_path / "s.zarr", job={"name": "t"}, seed=0)
    _fit_killed_in_epoch(_model(max_iter=3, checkpoint=store.checkpoint("dkae")), X, 1, monkeypatch)
    assert store.checkpoint("dkae").exists()
    with caplog.at_level("INFO", logger="dkernel.deep.dkae"):
        resumed = _model(max_iter=3, checkpoint=store.checkpoint("dkae")).fit(X)
    assert "resumes after epoch 1 of 3 from the checkpoint 'dkae' in the results store" in (
        caplog.text
    )
    np.testing.assert_array_equal(resumed.transform(X), full.transform(X))
    assert resumed.loss_curve_ == full.loss_curve_
    with pytest.raises(InvalidParameterError, match="'checkpoint' parameter"):
        _model(checkpoint=object()).fit(X)


def test_a_checkpoint_of_another_training_is_refused(tmp_path):
    X = _data()
    path = tmp_path / "dkae.pt"
    _model(max_iter=1, checkpoint=path).fit(X)
    with pytest.raises(InvalidInputError, match="kernel_weight.*delete it"):
        _model(max_iter=2, kernel_weight=0.2, checkpoint=path).fit(X)
    with pytest.raises(InvalidInputError, match="n_samples"):
        _model(max_iter=2, checkpoint=path).fit(X[:100])
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(InvalidInputError, match="cannot read the checkpoint"):
        _model(max_iter=2, checkpoint=path).fit(X)


# -- errors -----------------------------------------------------------------------------------
def test_missing_torch_is_a_clear_error():
    code = textwrap.dedent(
        """
        import sys

        class NoTorch:  # torch not installed (sys.modules["torch"] = None trips SciPy)
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ModuleNotFoundError("No module named 'torch'")

        sys.meta_path.insert(0, NoTorch())
        import numpy as np
        from dkernel import DeepKernelizedAutoencoder
        from dkernel.errors import InvalidInputError
        m = DeepKernelizedAutoencoder(2, hidden_layer_sizes=(4,), prior="rbf")
        try:
            m.fit(np.random.default_rng(0).normal(size=(20, 3)))
        except InvalidInputError as exc:
            print("ERROR:", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ERROR: DeepKernelizedAutoencoder needs PyTorch" in out.stdout
    assert 'pip install "dkernel[deep]"' in out.stdout


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"hidden_layer_sizes": (16, 0)}, "hidden_layer_sizes"),
        ({"hidden_layer_sizes": "16"}, "hidden_layer_sizes"),
        ({"kernel_weight": 1.5}, "kernel_weight"),
        ({"batch_size": 1}, "batch_size"),
        ({"n_components": 0}, "n_components"),
        ({"prior": "no-such-kernel"}, "no-such-kernel"),
        ({"activation": "gelu"}, "activation"),
    ],
)
def test_bad_parameters_are_clear_errors(params, match):
    with pytest.raises(InvalidInputError, match=match):
        _model(**params).fit(_data())


def test_bad_shapes_are_clear_errors():
    X = _data()
    with pytest.raises(InvalidInputError, match="2-D array"):
        _model().fit(X.reshape(120, 2, 4))
    m = _model(max_iter=1).fit(X)
    with pytest.raises(InvalidInputError, match="8 features"):
        m.transform(X[:, :5])
    with pytest.raises(InvalidInputError, match="n_components = 4"):
        m.inverse_transform(np.zeros((3, 5)))
    with pytest.raises(NotFittedError, match="not fitted"):
        _model().transform(X)
