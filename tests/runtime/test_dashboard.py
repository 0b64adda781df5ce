"""The dashboard link that ``dkernel.connect()`` prints serves Dask's Bokeh dashboard (bokeh is
a dependency), not distributed's "needs bokeh" placeholder."""

from __future__ import annotations

import contextlib
import io
import re
import urllib.error
import urllib.request

import pytest

import dkernel


@pytest.fixture(scope="module")
def client_and_link():
    """An embedded cluster and what ``connect()`` printed to stderr."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        client = dkernel.connect(n_workers=1, threads_per_worker=1)
    try:
        yield client, printed.getvalue()
    finally:
        client.close()


def fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
            return response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url}: HTTP {exc.code}: {exc.read()[:300]!r}") from exc


def assert_bokeh_document(page: str, url: str) -> None:
    assert "needs bokeh" not in page.lower(), f"{url} serves distributed's bokeh placeholder"
    assert re.search(r'<script[^>]+src="[^"]*static/js/bokeh\.min\.js', page), page[:500]
    assert "Bokeh.embed.embed_items" in page, page[:500]


def test_printed_link_is_the_clients_dashboard(client_and_link):
    client, printed = client_and_link
    match = re.search(r"Dask dashboard: (http://127\.0\.0\.1:\d+/status)", printed)
    assert match, printed
    assert match.group(1) == client.dashboard_link


@pytest.mark.parametrize("page", ["status", "individual-progress"])
def test_dashboard_pages_are_bokeh_documents(client_and_link, page):
    client, _ = client_and_link
    base = client.dashboard_link.rsplit("/", 1)[0]
    url = f"{base}/{page}"
    assert_bokeh_document(fetch(url), url)
