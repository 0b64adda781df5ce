"""Feature maps by name: a transformer one estimator family lends another.

The ranking estimators accept ``kernel='pck'``: the explicit feature map ``γ`` of a
:class:`~dkernel.gmm.pck.ProbabilisticClusterKernel` (``κ(x, y) = γ(x)·γ(y)``), fitted on the
training data. That estimator belongs to the ``gmm`` family, which ``ranking`` does not import
(families import no other family's estimators; ``tests/test_layers.py``). The package root,
``dkernel/__init__.py``, which sits above every family, registers it here by name (importing
``gmm`` only when the map is made), and ranking asks for it by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dkernel.errors import InvalidInputError
from dkernel.registry import Registry

#: name -> factory(**params) returning an unfitted transformer whose ``transform`` is γ.
FEATURE_MAPS: Registry[Callable[..., Any]] = Registry("feature map", error=InvalidInputError)


def register_feature_map(name: str, factory: Callable[..., Any]) -> None:
    """Make ``factory(**params)``, an unfitted transformer, available as ``name``.

    Parameters
    ----------
    name : str
        The name estimators accept (``kernel='pck'``).
    factory : callable
        Returns an unfitted transformer with ``fit(X)`` and ``transform(X)``, the feature map
        ``γ(X)`` with ``κ(x, y) = γ(x)·γ(y)``; takes keyword parameters (``random_state``).
        Registering the same factory again changes nothing.

    Raises
    ------
    ValueError
        When another factory is registered under ``name``.
    """
    if FEATURE_MAPS.get(name) is not factory:
        FEATURE_MAPS.register(name, factory)


def make_feature_map(name: str, **params: Any) -> Any:
    """A new, unfitted transformer of the feature map registered as ``name``.

    Raises
    ------
    InvalidInputError
        When no feature map is registered as ``name`` (the message lists those that are).
    """
    return FEATURE_MAPS.lookup(name)(**params)
