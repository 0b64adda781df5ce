"""The spectral-clustering job method end to end, and the SIPU shapes reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dkernel.errors import InvalidInputError, SpecError
from dkernel.io.registry import get_reader
from dkernel.io.shapes import SHAPE_SETS, load_shapes
from dkernel.jobs.registry import get_method

REPO = Path(__file__).resolve().parents[2]

COUNTS = {
    "jain": (373, 2),
    "Aggregation": (788, 7),
    "Compound": (399, 6),
    "pathbased": (300, 3),
    "spiral": (312, 3),
    "flame": (240, 2),
    "R15": (600, 15),
    "D31": (3100, 31),
}


@pytest.mark.parametrize("name", SHAPE_SETS)
def test_shapes_reader(data_dir, name):
    data = load_shapes(name, data_dir)
    n, k = COUNTS[name]
    assert data.X.shape == (n, 2) and data.y.shape == (n,)
    assert np.unique(data.y).tolist() == list(range(k))
    assert get_reader("shapes").load is load_shapes


def test_shapes_reader_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="Valid sets"):
        load_shapes("moons")
    with pytest.raises(InvalidInputError, match="not found"):
        load_shapes("jain", tmp_path)


def test_method_is_registered_with_schema():
    method = get_method("spectral-clustering")
    names = [p.name for p in method.params]
    assert {"n_clusters", "embedding", "n_landmarks", "landmarks", "kernel"} <= set(names)
    with pytest.raises(SpecError, match="Valid methods"):
        get_method("spectral-clusterin")


def test_job_end_to_end(tmp_path, client, data_dir):
    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results

    out = run_job(
        REPO / "jobs" / "spectral-shapes-jain.yaml",
        output=tmp_path / "jain.zarr",
        client=client,
        progress=False,
    )
    tree = open_results(out)
    assert tree.attrs["status"] == "complete"
    emb = tree["embedding"]
    assert emb["embedding"].dims == ("sample", "component")
    assert emb["embedding"].shape == (373, 2)
    assert emb.attrs["n_landmarks"] == 373 and emb.attrs["eigengap_hint"] >= 1
    assert tree["labels"]["labels"].shape == (373,)
    assert tree["landmarks"]["index"].size == 373
    assert float(tree["metrics"].attrs["ari"]) == pytest.approx(1.0)


def test_job_rejects_bad_params(tmp_path):
    from dkernel.jobs.runner import prepare_job
    from dkernel.jobs.spec import load_spec

    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: bad\nseed: 0\ndata:\n  reader: sklearn\n  name: iris\nmethod: spectral-clustering\n"
        "params:\n  n_clusters: 3\n  n_landmarks: 2\noutput: out.zarr\n"
    )
    with pytest.raises(InvalidInputError, match="n_components"):
        prepare_job(spec)
    spec.write_text(spec.read_text().replace("n_landmarks: 2", "embedding: laplacian"))
    with pytest.raises(SpecError, match="embedding"):
        load_spec(spec)


def test_job_refuses_fewer_rows_than_the_scale_rank_before_running(tmp_path):
    """Five rows and the width's rank 7: the estimator's error came from the running job,
    in its own words ('The 'scale_neighbors' parameter of SpectralClustering')."""
    from dkernel.jobs.runner import prepare_job

    table = tmp_path / "t.csv"
    np.savetxt(table, np.random.default_rng(0).normal(size=(5, 3)), delimiter=",")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: tiny\nseed: 0\ndata:\n  reader: csv\n  path: {table}\n"
        "method: spectral-clustering\nparams:\n  n_clusters: 2\noutput: out.zarr\n"
    )
    with pytest.raises(InvalidInputError, match=r"params.scale_neighbors \(7\) must be < .* \(5\)"):
        prepare_job(spec)
    spec.write_text(
        spec.read_text().replace("n_clusters: 2", "n_clusters: 2\n  scale_neighbors: 3")
    )
    prepare_job(spec)


def test_job_defaults_equal_the_estimator_defaults():
    import inspect

    from dkernel.jobs.steps.spectral_clustering import PARAMS
    from dkernel.spectral.clustering import SpectralClustering

    defaults = {
        name: p.default
        for name, p in inspect.signature(SpectralClustering).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    shared = [p for p in PARAMS if p.name in defaults]
    assert len(shared) >= 10
    for param in shared:
        assert param.default == defaults[param.name], param.name


def test_job_above_the_exact_size_runs_the_landmark_bipartite_graph(tmp_path, client):
    from sklearn.datasets import make_moons

    from dkernel.jobs.runner import run_job
    from dkernel.storage import open_results

    X, y = make_moons(8000, noise=0.07, random_state=0)
    np.save(tmp_path / "moons.npy", X)
    np.save(tmp_path / "labels.npy", y)
    spec = tmp_path / "moons.yaml"
    spec.write_text(
        "name: moons\nseed: 0\ndata:\n  reader: npy\n"
        f"  path: {tmp_path / 'moons.npy'}\n  labels_path: {tmp_path / 'labels.npy'}\n"
        "method: spectral-clustering\nparams:\n  n_clusters: 2\n"
        "output: moons.zarr\n"
    )
    tree = open_results(
        run_job(spec, output=tmp_path / "moons.zarr", client=client, progress=False)
    )
    assert tree.attrs["status"] == "complete"
    emb = tree["embedding"]
    assert emb.attrs["solver"] == "landmark-bipartite-graph"
    p = emb.attrs["n_landmarks"]  # at most 1000: isolated sample points hold no landmark
    assert 900 <= p <= 1000 and emb.attrs["landmark_neighbors"] == 3
    assert tree["landmarks"]["coordinates"].shape == (p, 2)
    assert "index" not in tree["landmarks"]
    assert float(tree["metrics"].attrs["ari"]) > 0.99
