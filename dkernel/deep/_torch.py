"""PyTorch, imported on first use: the ``deep`` extra is optional."""

from __future__ import annotations

from types import ModuleType

from dkernel.errors import InvalidInputError

INSTALL_HINT = 'pip install "dkernel[deep]"'


def require_torch(what: str) -> ModuleType:
    """``torch``, or an :class:`~dkernel.errors.InvalidInputError` naming the extra to install.

    Parameters
    ----------
    what : str
        What needs PyTorch (named in the message), for example ``"DeepKernelizedAutoencoder"``.
    """
    try:
        import torch
    except ImportError:
        raise InvalidInputError(
            f"{what} needs PyTorch, which is not installed; install the deep extra: {INSTALL_HINT} "
            "(a CPU build is enough)."
        ) from None
    return torch
