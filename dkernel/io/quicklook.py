"""Drawing the quick-look PNG from what :func:`dkernel.io.quicklook_plan.quicklook_plan`
prepared.

NumPy and matplotlib only, so that the helper process (:mod:`dkernel._helper`) can draw it
after importing little more than matplotlib: a job's map files hand it a
:class:`QuickLook` (:func:`draw_in_helper`) and go on writing the COG and the segments while
it draws. :func:`prefetch_plotting` starts the helper and its imports ahead of time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "OrderEvidence",
    "QuickLook",
    "draw_in_helper",
    "draw_quicklook",
    "import_plotting",
    "label_rgba",
    "prefetch_plotting",
    "quicklook_figure",
]


@dataclass(frozen=True)
class OrderEvidence:
    """The evidence of a number of clusters chosen by ``n_clusters: auto`` (the store's
    ``/model_order``), drawn as a panel of score against k.

    Attributes
    ----------
    candidates : ndarray of int
    scores : ndarray of float
    chosen : int
    rule : str
    higher_is_better : bool
    """

    candidates: np.ndarray
    scores: np.ndarray
    chosen: int
    rule: str
    higher_is_better: bool = True

    @classmethod
    def from_dataset(cls, ds) -> OrderEvidence:
        """From a ``/model_order`` dataset (``dkernel.storage.layout.model_order``)."""
        return cls(
            candidates=np.asarray(ds["n_clusters"].values, dtype=np.int64),
            scores=np.asarray(ds["score"].values, dtype=np.float64),
            chosen=int(ds.attrs["n_clusters_chosen"]),
            rule=str(ds.attrs["rule"]),
            higher_is_better=bool(ds.attrs.get("higher_is_better", True)),
        )


@dataclass(frozen=True)
class QuickLook:
    """What the quick-look shows, in arrays and strings (picklable, small).

    Attributes
    ----------
    views : tuple of (str, ndarray (rows, cols, 3) of uint8)
        Titled RGB panels, nodata already painted.
    labels : ndarray (rows, cols) of int
        The cluster map; negative values have no label.
    extent : tuple of 4 float
        ``(left, right, bottom, top)`` in map coordinates.
    colors : ndarray (n, 4)
        RGBA colour of each label.
    nodata_color : tuple of 4 float
    legend : tuple of str
        One entry per label, then one for the pixels without a label when there are any.
    legend_title, map_title, title : str
    axis_labels : tuple of (str, str)
    model_order : OrderEvidence or None
        Drawn as a last, narrower panel (score against k, the chosen k marked) when given.
    """

    views: tuple[tuple[str, np.ndarray], ...]
    labels: np.ndarray
    extent: tuple[float, float, float, float]
    colors: np.ndarray
    nodata_color: tuple[float, float, float, float]
    legend: tuple[str, ...]
    legend_title: str
    map_title: str
    axis_labels: tuple[str, str]
    title: str = ""
    model_order: OrderEvidence | None = None


def import_plotting() -> None:
    """Import what :func:`draw_quicklook` needs (a helper process does it ahead of time)."""
    import matplotlib.figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401
    from matplotlib.patches import Patch  # noqa: F401


def prefetch_plotting() -> bool:
    """Start this process's helper (``dkernel._helper.shared_helper``) and have it import
    the plotting library in the background; False when there is no helper. Importing again
    in a helper that has done it is a lookup, so every job that draws may call this."""
    from dkernel._helper import HelperUnavailable, shared_helper

    helper = shared_helper()
    if helper is None:
        return False
    try:
        helper.submit(import_plotting)
    except HelperUnavailable:
        return False
    return True


def draw_in_helper(path: str | os.PathLike, look: QuickLook) -> Path:
    """:func:`draw_quicklook` in the helper process that :func:`prefetch_plotting` started,
    or in this process when there is none, it died, or it did not reply within
    ``dkernel._helper.REPLY_TIMEOUT_S``."""
    from dkernel import _helper

    helper = _helper.shared_helper(start=False)
    if helper is not None:
        try:  # a helper that does not reply in time (stopped, stuck) is killed
            return helper.call_within(_helper.REPLY_TIMEOUT_S, draw_quicklook, path, look)
        except _helper.HelperUnavailable:
            pass  # drawn here
    return draw_quicklook(path, look)


def label_rgba(
    labels: np.ndarray, colors: np.ndarray, nodata_color: tuple[float, ...]
) -> np.ndarray:
    """A label map as RGBA bytes: label ``i`` in ``colors[i]``, negative labels in
    ``nodata_color``, each rounded as matplotlib rounds a colormap's colours. Drawn with
    nearest-neighbour interpolation it gives the pixels of the masked map through a
    ``ListedColormap`` of ``colors``, with one lookup instead of a masked array through the
    colormap's normalisation."""
    table = (np.vstack([colors, nodata_color]) * 255).astype(np.uint8)
    return table[np.where(labels >= 0, labels, len(colors))]


def draw_quicklook(path: str | os.PathLike, look: QuickLook) -> Path:
    """Draw ``look`` to a PNG at ``path``: the panels beside the cluster map, in map
    coordinates, with the legend to the right of the map (and the model-order evidence, when
    ``look`` has it, in a last panel)."""
    path = Path(path)
    fig = quicklook_figure(look)
    # zlib's fastest level: 0.035 of the demo's 0.37 s less, 8 % more bytes, the same pixels
    fig.savefig(path, dpi=90, pil_kwargs={"compress_level": 1})
    return path


def quicklook_figure(look: QuickLook):
    """The :class:`matplotlib.figure.Figure` that :func:`draw_quicklook` saves."""
    # a Figure of its own, not pyplot: a library must not switch the user's backend (that
    # silenced every later figure of a notebook) or leave figures open
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    n_lab = len(look.colors)
    order = look.model_order
    n_maps = len(look.views) + 1
    if order is None:
        fig = Figure(figsize=(6 * n_maps, 5))
        axes = fig.subplots(1, n_maps, sharex=True, sharey=True)
    else:
        fig = Figure(figsize=(6 * n_maps + 4, 5))
        grid = fig.add_gridspec(1, n_maps + 1, width_ratios=[1.0] * n_maps + [0.6])
        first = fig.add_subplot(grid[0, 0])
        axes = [first] + [
            fig.add_subplot(grid[0, i], sharex=first, sharey=first) for i in range(1, n_maps)
        ]
    for ax, (view_title, rgb) in zip(axes, look.views, strict=False):
        ax.imshow(rgb, extent=look.extent, interpolation="nearest")
        ax.set_title(view_title)
    axes[-1].imshow(
        label_rgba(look.labels, look.colors, look.nodata_color),
        extent=look.extent,
        interpolation="nearest",
    )
    axes[-1].set_title(look.map_title)
    handles = [Patch(color=look.colors[i], label=look.legend[i]) for i in range(n_lab)]
    for text in look.legend[n_lab:]:
        handles.append(Patch(facecolor=look.nodata_color, edgecolor="0.4", label=text))
    axes[-1].legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        ncols=1 if len(handles) <= 16 else 2,
        title=look.legend_title,
    )
    for ax in axes:
        ax.set_xlabel(look.axis_labels[0])
        ax.set_ylabel(look.axis_labels[1])
        ax.ticklabel_format(style="plain", useOffset=False)
        ax.tick_params(axis="x", labelrotation=30)
    if order is not None:
        _draw_model_order(fig.add_subplot(grid[0, n_maps]), order)
    if look.title:
        fig.suptitle(look.title)
    fig.tight_layout()
    # tight_layout leaves a placeholder layout engine behind, for which savefig draws the
    # whole figure once more before it renders it (0.4 of the demo quick-look's 1.5 s)
    fig.set_layout_engine(None)
    return fig


def _draw_model_order(ax, order: OrderEvidence) -> None:
    """Score against k, the chosen k marked (a red point and a dashed line)."""
    k, score = order.candidates, order.scores
    ax.plot(k, score, marker="o", markersize=3, color="0.3", linewidth=1)
    hit = np.flatnonzero(k == order.chosen)
    ax.axvline(order.chosen, color="tab:red", linestyle="--", linewidth=1)
    if hit.size:
        ax.plot(k[hit], score[hit], marker="o", color="tab:red", linestyle="none")
    better = "higher" if order.higher_is_better else "lower"
    ax.set_title(f"k = {order.chosen} ({order.rule})")
    ax.set_xlabel("number of clusters k")
    ax.set_ylabel(f"score ({better} is better)")
    ax.grid(True, linewidth=0.3)
