from pathlib import Path

import yaml

from dkernel.jobs.demo import LANDSAT_DEMO, demo_spec

REPO = Path(__file__).resolve().parents[2]


def test_demo_spec_equals_the_example_job():
    example = yaml.safe_load((REPO / "jobs" / "demo-landsat-mssc.yaml").read_text())
    assert example == LANDSAT_DEMO


def test_demo_needs_no_data_directory(monkeypatch):
    monkeypatch.delenv("DKERNEL_DATA", raising=False)
    spec = demo_spec()
    assert spec.method == "mssc" and spec.reader == "demo-landsat"
