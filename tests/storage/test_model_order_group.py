"""The ``/model_order`` group: the evidence of ``n_clusters: auto`` round-trips through a store."""

from __future__ import annotations

import dask
import numpy as np
import pytest

from dkernel.model_order import ModelOrder, information_criterion_model_order
from dkernel.storage import ResultsStore, describe_store, open_results, read_model_order
from dkernel.storage.attributes import lookup
from dkernel.storage.layout import GROUPS, model_order_dataset, model_order_from_dataset


def _spectral_order() -> ModelOrder:
    spectrum = np.array([1.0, 0.99, 0.98, 0.97, 0.5, 0.45, 0.4, 0.3])
    candidates = np.arange(2, 7)
    scores = np.array([0.1, 0.2, 2.5, np.nan, 0.3])
    return ModelOrder(4, candidates, scores, "timescale-gap", details={"spectrum": spectrum})


def test_builder_variables_dims_and_attrs():
    ds = model_order_dataset(_spectral_order())
    assert {str(n): v.dims for n, v in ds.data_vars.items()} == {
        "n_clusters": ("candidate",),
        "score": ("candidate",),
        "spectrum": ("rank",),
    }
    assert ds["n_clusters"].dtype == np.int64 and ds["score"].dtype == np.float64
    assert ds.attrs == {
        "rule": "timescale-gap",
        "n_clusters_chosen": 4,
        "higher_is_better": True,
        "details": {},
    }
    assert "model_order" in GROUPS
    assert all(lookup("model_order", str(n)) is not None for n in ds.data_vars)


def test_builder_without_spectrum_keeps_scalar_details():
    order = ModelOrder(
        3,
        np.arange(2, 5),
        np.array([0.5, 0.9, 0.4]),
        "stability",
        details={"n_subsamples": 4, "fraction": np.float64(0.8)},
    )
    ds = model_order_dataset(order)
    assert set(ds.data_vars) == {"n_clusters", "score"}
    assert ds.attrs["details"] == {"n_subsamples": 4, "fraction": 0.8}
    back = model_order_from_dataset(ds)
    assert back.details == {"n_subsamples": 4, "fraction": 0.8}


@pytest.mark.parametrize(
    "order",
    [
        _spectral_order(),
        information_criterion_model_order(np.array([10.0, 7.0, 8.0]), np.arange(2, 5), "bic"),
    ],
    ids=["timescale-gap", "bic"],
)
def test_round_trip_through_a_store(tmp_path, order):
    store = ResultsStore.create(tmp_path / "s.zarr", job={"method": "test"}, seed=0)
    with dask.config.set(scheduler="sync"):
        store.write("model_order", model_order_dataset(order))
    store.mark_complete()
    group = open_results(store.path)["model_order"]
    assert group["score"].attrs["long_name"] == "model-order score"
    back = read_model_order(store.path)
    assert back is not None
    assert back.n_clusters == order.n_clusters and back.rule == order.rule
    assert back.higher_is_better == order.higher_is_better
    np.testing.assert_array_equal(back.candidates, order.candidates)
    np.testing.assert_array_equal(back.scores, order.scores)  # NaN where NaN
    assert back.candidates.dtype == np.int64
    assert set(back.details) == set(order.details)
    for name, value in order.details.items():
        np.testing.assert_array_equal(back.details[name], value)
    assert back.summary() == order.summary()
    info = describe_store(store.path)["model_order"]
    assert info["rule"] == order.rule and info["n_clusters_chosen"] == order.n_clusters
    assert info["n_clusters"] == order.candidates.tolist()


def test_a_store_without_evidence_reads_none(tmp_path):
    store = ResultsStore.create(tmp_path / "s.zarr", job={"method": "test"}, seed=0)
    store.mark_complete()
    assert read_model_order(store.path) is None
    assert "model_order" not in describe_store(store.path)
