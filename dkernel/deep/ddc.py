"""``dkernel.DeepDivergenceClustering``: deep divergence-based clustering ([Kampffmeyer2019],
Paper IV of [Lokse2020]).

A network ending in a softmax is trained end to end by the Cauchy–Schwarz-divergence loss of
:mod:`dkernel.deep._cs_divergence`, by default from a start trained on spectral partitions of
the data (:mod:`dkernel.deep._ddc_init`); its argmax is the cluster. Several restarts are trained and the one of lowest unsupervised loss kept (Section
4.6). Training reads NumPy or Dask input chunk by chunk and can be checkpointed every epoch
and resumed; ``predict`` of a Dask array runs per chunk with ``map_blocks``.
"""

from __future__ import annotations

import hashlib
import logging
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_is_fitted,
    is_dask_array,
    validate_input,
)
from dkernel.deep._ddc_init import (
    INIT_MIN_SAMPLES,
    init_rows,
    spectral_init,
    spectral_model_order,
)
from dkernel.deep._ddc_training import (
    Architecture,
    all_rows,
    build_network,
    cnn_feature_size,
    epoch_rng,
    evaluate_loss,
    predict_proba_array,
    train_epoch,
)
from dkernel.deep._missing import (
    fill_or_refuse,
    filled,
    fit_missing_model,
    missing_model_of,
    training_rows,
)
from dkernel.deep._torch import require_torch
from dkernel.deep._training import (
    CHECKPOINT_CONSTRAINT,
    Checkpoint,
    EpochProgress,
    check_fingerprint,
    load_checkpoint,
    network_of_results,
    save_checkpoint,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.aliases import resolve_renamed
from dkernel.kernels.widths import DDC_SIGMA_FRACTION
from dkernel.rows import holds_nan, take_rows

logger = logging.getLogger(__name__)

#: Section 4.6's learning rates of Adam: 1e-3 for the CNN, 1e-5 for the fully connected network
#: (which the paper trains for 70 000 iterations).
LEARNING_RATE_CNN = 1e-3
LEARNING_RATE_MLP = 1e-5


class DeepDivergenceClustering(ParameterConstraintsMixin, ClusterMixin, BaseEstimator):
    """Deep divergence-based clustering (DDC): a network trained by a Cauchy–Schwarz loss.

    The network maps each sample to a soft assignment ``α`` on the simplex (softmax) through a
    hidden layer ``h``. Each mini-batch is scored by eq. 4 of [Kampffmeyer2019]: the
    Cauchy–Schwarz divergence argument between the clusters' kernel means (a Gaussian kernel
    on ``h``, σ = ``sigma_fraction`` × the batch's median distance), the mean inner product
    of the assignment vectors of distinct samples, and the divergence argument once more with
    the assignments' closeness to the simplex corners (see ``dkernel.deep._cs_divergence``).
    The loss favours compact, separated and balanced clusters. The cluster of a sample is the
    argmax of its assignment.

    Parameters
    ----------
    n_clusters : int or 'auto'
        Number of clusters (the softmax width). 'auto': the number
        :class:`~dkernel.SpectralClustering` ``(n_clusters='auto')`` chooses on the rows the
        spectral start clusters (at most 10 000; the timescale-gap rule of
        :mod:`dkernel.model_order` on the exact path's graph, candidates 2 .. round(√n)
        clipped to [10, 50]), whatever ``init``; the evidence is ``model_order_``. It needs
        50 samples. On the MNIST subset it chooses 3 (ACC 0.30 / NMI 0.54, seed 0; the true
        10 gives 0.84 / 0.83): the rule is weak on digits (issue 52).
    max_iter : int
        Training epochs (passes over the data) of each restart. The paper trains for 70 000
        iterations of 100 samples. The default, 50 epochs (2 500 iterations on 5 000 samples,
        about 115 s of one CPU core for the CNN on 28 x 28 images with the spectral start),
        gave ACC 0.84–0.88 / NMI 0.83–0.87 on the MNIST subset over seeds 0–4 (from random
        weights 0.53 / 0.57; ``benchmarks/results/ddc.md``).
    batch_size : int
        Mini-batch size (Section 4.6: 100). The last, short remainder of an epoch joins the
        previous batch.
    learning_rate_init : float or 'auto'
        Adam's learning rate. 'auto': Section 4.6's choices, 1e-3 for the CNN and 1e-5 for the
        fully connected network.
    sigma_fraction : float
        The kernel width σ as a fraction of the batch's median pairwise distance of the hidden
        representation. The default, √0.15 ≈ 0.387, is the rule of the authors' group's
        PyTorch code (σ² = 0.15 × the median squared distance); Section 4.6's text reads
        σ = 0.15 × the median distance, a kernel so narrow on the 100 batch-normalized hidden
        units that most pairs weigh e^-20: on the MNIST subset it gave ACC 0.55 after 25 epochs
        where the default gave 0.59 after 15 (one seed each, ``benchmarks/results/ddc.md``).
    n_init : int
        Restarts with different initializations and shuffles; the one of lowest unsupervised
        loss over the training data is kept (the paper trains 20).
    init : {'spectral', 'random'}
        How each restart's network starts. 'random': He-initialized weights, as in the paper
        (Section 4.6). 'spectral' (default): then trained to reproduce
        :class:`~dkernel.SpectralClustering`'s partition of (a sample of at most 10 000 of)
        the rows in 1.5 × ``n_clusters`` dimensions, re-clustered spectrally in its hidden
        layer and trained again, three partitions of three epochs each
        (``dkernel.deep._ddc_init``), before the DDC loss takes over; 'random' below 50 rows.
        From random weights the network settles within a few epochs on a partition that
        differs with the seed: ACC 0.53 to 0.74 on the MNIST subset after ten epochs over nine
        seeds, where the spectral start reaches 0.84–0.88 (NMI 0.83–0.87) after 50 on seeds
        0–4 (``benchmarks/results/ddc.md``).
    checkpoint : str, path, checkpoint target or None
        File to save the training state to after every epoch (weights, Adam's state, the
        restarts done). When it holds one, ``fit`` resumes from it; a checkpoint written for
        other data or parameters is refused. Instead of a file, any object with ``exists()``,
        ``read_bytes()`` and ``write_bytes(data)`` (the last replacing what it held in one
        step): a ``ddc`` job keeps its checkpoint in its results store that way, and
        ``dkernel run --resume`` continues a killed training. None: no checkpoint.
    random_state : int, numpy Generator or None
        Seed of the initializations and shuffles. An int gives identical results on identical
        input (PyTorch's CPU kernels are deterministic for these layers).
    progress : bool, default=False
        Show the epochs done (of all restarts) with the last epoch's loss: a bar on a terminal
        or in Jupyter, a line at most every few seconds in a log (what a ``ddc`` job shows).
    verbose : int or None
        Former name of ``progress`` (deprecated; one more release).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training sample.
    loss_ : float
        Unsupervised loss of the kept restart over the training data.
    losses_ : ndarray of shape (n_init,)
        That loss for every restart.
    loss_curve_ : list of float
        Mean batch loss of every epoch of the kept restart.
    network_ : torch.nn.Module
        The trained network of the kept restart (eval mode).
    input_shape_ : tuple of int
        Shape of one sample as the network sees it: ``(n_features,)`` or ``(channels, height,
        width)``.
    n_features_in_ : int
        Values per sample.
    n_clusters_ : int
        The number of clusters (``n_clusters``, or the one 'auto' chose).
    model_order_ : dkernel.model_order.ModelOrder or None
        The evidence of ``n_clusters='auto'`` (candidates, scores, rule); None otherwise.
    missing_model_ : dkernel.kernels.missing_model.MissingValueModel
        The Gaussian model of the training samples (their pixels or features as one vector)
        that fills missing values (NaN): each sample enters the network, in ``fit`` and in
        ``predict``, with its missing values at their conditional means given its observed
        ones (``dkernel.deep._missing``). Fitted on at most 2 000 evenly spaced training
        samples; a full covariance up to 1 000 values per sample, their means above. On the
        MNIST subset with a random quarter of each image missing: ACC 0.59 / NMI 0.56 over
        seeds 0–2, against 0.42 / 0.33 for k-means on mean-imputed pixels
        (``benchmarks/results/ddc_holes.md``).

    See Also
    --------
    SpectralClustering : Clusters from the kernel matrix's leading eigenvectors (no training).
    KernelKMeans : Compact clusters in a kernel's feature space.

    Notes
    -----
    Input: ``(n_samples, n_features)`` vectors go through fully connected layers
    200-200-500-C; ``(n_samples, height, width)`` or ``(n_samples, channels, height, width)``
    images (at least 16 × 16) through the paper's CNN. Scale the inputs to about unit range
    (images: grey levels / 255). The loss's orthogonality term assumes clusters of similar
    sizes (Section 3.1.2). Missing values (NaN) are filled with their conditional means
    (``missing_model_``), infinite ones refused; ``from_results`` restores the model from a
    ``ddc`` job's store, and an estimator rebuilt by ``from_weights`` has none and refuses NaN.

    References
    ----------
    - Kampffmeyer, Løkse, Bianchi, Livi, Salberg & Jenssen (2019), "Deep divergence-based
      approach to clustering", Neural Networks 113, 91-101 [Kampffmeyer2019]; Paper IV of
      [Lokse2020].

    Examples
    --------
    >>> import numpy as np
    >>> from dkernel import DeepDivergenceClustering
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-3, 1, (100, 4)), rng.normal(3, 1, (100, 4))])
    >>> ddc = DeepDivergenceClustering(
    ...     n_clusters=2, max_iter=20, learning_rate_init=1e-3, random_state=0
    ... ).fit(X)
    >>> ddc.labels_.shape
    (200,)
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "sigma_fraction": [Interval(Real, 0, None, closed="neither")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"spectral", "random"})],
        "checkpoint": CHECKPOINT_CONSTRAINT,
        "random_state": ["random_state", np.random.Generator],
        "progress": ["boolean"],
        "verbose": ["verbose", None],
    }

    def __init__(
        self,
        n_clusters: int | str = 2,
        *,
        max_iter: int = 50,
        batch_size: int = 100,
        learning_rate_init: float | str = "auto",
        sigma_fraction: float = DDC_SIGMA_FRACTION,
        n_init: int = 1,
        init: str = "spectral",
        checkpoint: Checkpoint | None = None,
        random_state: int | np.random.Generator | None = None,
        progress: bool = False,
        verbose: int | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.learning_rate_init = learning_rate_init
        self.sigma_fraction = sigma_fraction
        self.n_init = n_init
        self.init = init
        self.checkpoint = checkpoint
        self.random_state = random_state
        self.progress = progress
        self.verbose = verbose

    # ------------------------------------------------------------------ input

    def _check_X(self, X: Any, *, reset: bool) -> tuple[Any, tuple[int, ...]]:
        """``X`` validated, and the per-sample shape the network takes."""
        owner = type(self).__name__
        ndim = getattr(X, "ndim", None)
        if ndim is None:
            X = np.asarray(X)
            ndim = X.ndim
        if ndim > 4:
            raise InvalidInputError(
                f"{owner} takes vectors of shape (n_samples, n_features) or images of shape "
                f"(n_samples, height, width) or (n_samples, channels, height, width); got a "
                f"{ndim}-D array of shape {tuple(X.shape)}."
            )
        if ndim <= 2:  # scikit-learn's checks and messages ("Reshape your data")
            X = validate_input(self, X, reset=reset, allow_nan=True, min_samples=2 if reset else 1)
            return X, (int(X.shape[1]),)
        X = _check_images(X, owner, min_samples=2 if reset else 1)
        shape = (1, *X.shape[1:]) if ndim == 3 else tuple(X.shape[1:])
        if cnn_feature_size(shape[1], shape[2]) == 0:
            raise InvalidInputError(
                f"{owner}'s CNN needs images of at least 16 x 16 pixels (two 5 x 5 convolutions "
                f"and 2 x 2 poolings); got {shape[1]} x {shape[2]}. Pass the pixels as vectors, "
                f"X.reshape(len(X), -1), for the fully connected network."
            )
        if reset:
            self.n_features_in_ = int(np.prod(shape))
        elif tuple(shape) != tuple(self.input_shape_):
            raise InvalidInputError(
                f"X has samples of shape {tuple(X.shape[1:])}, but {owner} was fitted on "
                f"samples of shape {self.input_shape_}."
            )
        return X, tuple(int(s) for s in shape)

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> DeepDivergenceClustering:
        """Train ``n_init`` networks on ``X`` and keep the one of lowest loss.

        Parameters
        ----------
        X : array-like or Dask array of shape (n_samples, n_features), (n_samples, height,
            width) or (n_samples, channels, height, width)
            Training data; a Dask array is read one chunk (along the first axis) at a time.
        y : None
            Ignored.

        Returns
        -------
        self : DeepDivergenceClustering
        """
        torch = require_torch(type(self).__name__)
        X, shape = self._check_X(X, reset=True)
        n = int(X.shape[0])
        auto = self.n_clusters == "auto"
        if auto and n < INIT_MIN_SAMPLES:
            raise InvalidInputError(
                f"DeepDivergenceClustering(n_clusters='auto') chooses k on a spectral graph of "
                f"at least {INIT_MIN_SAMPLES} samples; got {n}. Pass an integer n_clusters."
            )
        if not auto and n < int(self.n_clusters):
            raise InvalidInputError(
                f"DeepDivergenceClustering needs at least n_clusters={self.n_clusters} "
                f"samples; got {n}."
            )
        lr = self.learning_rate_init
        if lr == "auto":
            lr = LEARNING_RATE_CNN if len(shape) == 3 else LEARNING_RATE_MLP
        fixed = seed_from_random_state(self.random_state)
        batch_size = min(int(self.batch_size), n)
        # random_state=None: a resumed fit continues with the seed the checkpoint recorded
        fingerprint = self._fingerprint(X, shape, float(lr), fixed)
        self.missing_model_ = fit_missing_model(X)
        X = training_rows(filled(X, self.missing_model_), holds_nan(X))
        state = None
        if self.checkpoint is not None:
            state = load_checkpoint(torch, self.checkpoint, type(self).__name__)
            if state is not None:
                check_fingerprint(
                    state["fingerprint"], fingerprint, self.checkpoint, type(self).__name__
                )
        partial = state.get("current") if state is not None else None
        if state is not None:
            seed = int(state["seed"])
            logger.info(
                "%s resumes restart %d of %d after epoch %d of %d from %s",
                type(self).__name__, len(state["runs"]) + (partial is not None), self.n_init,
                len(partial["curve"]) if partial is not None else self.max_iter, self.max_iter,
                self.checkpoint,
            )  # fmt: skip
        elif fixed is not None:
            seed = fixed
        else:
            seed = int(np.random.default_rng().integers(0, 2**31 - 1))
        self.model_order_ = None
        if auto:
            rows = take_rows(X, init_rows(X, seed), np.float64)
            features = rows.reshape(len(rows), -1)
            self.model_order_ = spectral_model_order(features, derive_seed(seed, "ddc-auto"))
        k = self.model_order_.n_clusters if auto else int(self.n_clusters)
        self.n_clusters_ = k
        arch = Architecture(shape, k)

        def save(runs: list[dict[str, Any]], current: dict[str, Any] | None) -> None:
            if self.checkpoint is not None:
                save_checkpoint(
                    torch,
                    self.checkpoint,
                    {"fingerprint": fingerprint, "seed": seed, "runs": runs, "current": current},
                )

        runs: list[dict[str, Any]] = state["runs"] if state else []
        done = len(runs) * self.max_iter + (len(partial["curve"]) if partial else 0)
        what = "DDC epochs" if self.n_init == 1 else f"DDC epochs ({self.n_init} restarts)"
        report = EpochProgress(
            what, self.n_init * self.max_iter, done, show=bool(resolve_renamed(self, "progress"))
        )
        for run in range(len(runs), self.n_init):
            net = build_network(arch, torch.Generator().manual_seed(derive_seed(seed, "ddc", run)))
            optimizer = torch.optim.Adam(net.parameters(), lr=float(lr))
            curve: list[float] = []
            if state and state.get("current") is not None:
                net.load_state_dict(state["current"]["network"])
                optimizer.load_state_dict(state["current"]["optimizer"])
                curve = list(state["current"]["curve"])
                state = None
            elif self.init == "spectral" and n >= INIT_MIN_SAMPLES:
                run_seed = derive_seed(seed, "ddc-init", run)
                spectral_init(net, X, shape, k, batch_size, run_seed)
            for epoch in range(len(curve), self.max_iter):
                loss = train_epoch(
                    net, optimizer, X, shape, batch_size, epoch_rng(seed, run, epoch),
                    self.sigma_fraction,
                )  # fmt: skip
                curve.append(loss)
                current = {
                    "network": net.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "curve": curve,
                }
                save(runs, current)
                report.epoch_done(loss)
            final = evaluate_loss(net, X, shape, batch_size, seed, self.sigma_fraction)
            runs.append({"network": net.state_dict(), "curve": curve, "loss": final})
            save(runs, None)

        report.close()
        losses = np.array([r["loss"] for r in runs], dtype=np.float64)
        best = int(np.argmin(losses))
        net = build_network(arch, torch.Generator().manual_seed(0))
        net.load_state_dict(runs[best]["network"])
        net.eval()
        self.network_ = net
        self.input_shape_ = shape
        self.losses_ = losses
        self.loss_ = float(losses[best])
        self.loss_curve_ = list(runs[best]["curve"])
        self.n_iter_ = len(self.loss_curve_)
        self.labels_ = np.argmax(_proba_of(net, X, shape), axis=1)
        return self

    def _fingerprint(
        self, X: Any, shape: tuple[int, ...], lr: float, seed: int | None
    ) -> dict[str, Any]:
        """What a checkpoint must have been written for: the data's shape and chunks, a sample
        of its values, the architecture and every training parameter."""
        chunks = tuple(int(c) for c in X.chunks[0]) if is_dask_array(X) else (int(X.shape[0]),)
        head = np.asarray(X[: min(8, X.shape[0])], dtype=np.float32)
        return {
            "n": int(X.shape[0]),
            "shape": list(shape),
            "chunks": list(chunks),
            "head": hashlib.sha256(head.tobytes()).hexdigest(),
            "n_clusters": "auto" if self.n_clusters == "auto" else int(self.n_clusters),
            "max_iter": int(self.max_iter),
            "batch_size": int(self.batch_size),
            "lr": lr,
            "sigma_fraction": float(self.sigma_fraction),
            "n_init": int(self.n_init),
            "init": self.init,
            "seed": seed,
        }

    # ------------------------------------------------------------------ predict

    def predict_proba(self, X: Any) -> Any:
        """Soft assignments (the network's softmax output) of the rows of ``X``.

        Parameters
        ----------
        X : array-like or Dask array
            Samples shaped like the training data.

        Returns
        -------
        proba : ndarray or Dask array of shape (n_samples, n_clusters)
            Lazy (one task per chunk) for Dask input.
        """
        check_is_fitted(self, "network_")
        X, shape = self._check_X(X, reset=False)
        X = fill_or_refuse(X, getattr(self, "missing_model_", None), type(self).__name__)
        if is_dask_array(X):
            X = X.rechunk({i: -1 for i in range(1, X.ndim)})
            k = int(self.n_clusters_)
            return X.map_blocks(
                _proba_block,
                self.network_,
                shape,
                dtype=np.float64,
                chunks=(X.chunks[0], (k,)),
                drop_axis=list(range(2, X.ndim)) if X.ndim > 2 else None,
                meta=np.empty((0, k), dtype=np.float64),
            )
        return _proba_of(self.network_, X, shape)

    def predict(self, X: Any) -> Any:
        """Cluster of each row of ``X``: the argmax of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like or Dask array
            Samples shaped like the training data.

        Returns
        -------
        labels : ndarray or Dask array of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return proba.argmax(axis=1)

    def fit_predict(self, X: Any, y: Any = None, **kwargs: Any) -> np.ndarray:
        """Fit and return ``labels_``."""
        return self.fit(X, y, **kwargs).labels_

    # ------------------------------------------------------------------ weights

    def network_weights(self) -> dict[str, np.ndarray]:
        """The trained network's parameters and batch-normalization statistics as NumPy
        arrays, named as in its ``state_dict`` (what a ``ddc`` job writes to ``/network``).

        Returns
        -------
        weights : dict of str to ndarray
        """
        check_is_fitted(self, "network_")
        return {
            name: tensor.detach().cpu().numpy().copy()
            for name, tensor in self.network_.state_dict().items()
        }

    @classmethod
    def from_weights(
        cls,
        weights: dict[str, Any],
        input_shape: tuple[int, ...],
        n_clusters: int,
        **params: Any,
    ) -> DeepDivergenceClustering:
        """A fitted estimator from :meth:`network_weights`: it predicts as the one that wrote
        them (``labels_`` and the training curves are not restored).

        Parameters
        ----------
        weights : dict of str to array
            The network's ``state_dict`` as arrays.
        input_shape : tuple of int
            The per-sample shape the network takes (``input_shape_`` of the fitted estimator).
        n_clusters : int
        **params
            Other constructor parameters (for the record; prediction does not use them).

        Raises
        ------
        InvalidInputError
            Weights that do not fit the network of ``input_shape`` and ``n_clusters``.
        """
        torch = require_torch(cls.__name__)
        est = cls(n_clusters=int(n_clusters), **params)
        shape = tuple(int(s) for s in input_shape)
        net = build_network(Architecture(shape, int(n_clusters)), torch.Generator().manual_seed(0))
        try:
            net.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in weights.items()})
        except (RuntimeError, KeyError) as exc:
            raise InvalidInputError(
                f"the weights do not fit a {cls.__name__} network for samples of shape {shape} "
                f"and {n_clusters} clusters: {str(exc)[:300]}"
            ) from None
        net.eval()
        est.network_, est.input_shape_ = net, shape
        est.n_clusters_ = int(n_clusters)
        est.n_features_in_ = int(np.prod(shape))
        return est

    @classmethod
    def from_results(cls, store: Any) -> DeepDivergenceClustering:
        """The network a ``ddc`` job trained, from its results store (the tree
        :func:`dkernel.open_results` returns), ready to predict new samples.

        Raises
        ------
        InvalidInputError
            A store without a ``/network`` group (not a ``ddc`` job's).
        """
        ds = network_of_results(store, "ddc")
        weights = {
            ds[v].attrs["parameter"]: ds[v].values
            for v in ds.data_vars
            if "parameter" in ds[v].attrs
        }
        est = cls.from_weights(weights, tuple(ds.attrs["input_shape"]), ds.attrs["n_clusters"])
        est.loss_ = float(ds.attrs["loss"])
        est.missing_model_ = missing_model_of(ds)
        return est

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        tags.input_tags.allow_nan = True  # filled with their conditional means
        return tags


def _check_images(X: Any, owner: str, *, min_samples: int) -> Any:
    """A 3-D or 4-D numeric NumPy or Dask array of images, float32."""
    if not is_dask_array(X):
        X = np.asarray(X)
    dtype = X.dtype
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)) or np.issubdtype(
        dtype, np.complexfloating
    ):
        raise InvalidInputError(f"{owner} needs real numeric images; got dtype {dtype}.")
    if any(np.isnan(c) for c in X.shape):
        raise InvalidInputError(
            f"{owner} needs a Dask array with known chunk sizes; call X.compute_chunk_sizes() first."
        )
    if X.shape[0] < min_samples:
        raise InvalidInputError(f"{owner} needs at least {min_samples} samples; got {X.shape[0]}.")
    if X.ndim == 4 and X.shape[1] > 16 and X.shape[3] <= 4:
        raise InvalidInputError(
            f"{owner} takes images as (n_samples, channels, height, width); got shape {X.shape}, "
            "which looks channels-last. Use X.transpose(0, 3, 1, 2)."
        )
    X = X.astype(np.float32)
    if not is_dask_array(X) and np.isinf(X).any():
        raise InvalidInputError(
            f"{owner} got infinite values in X; replace them (or mark them NaN: missing)."
        )
    return X


def _proba_of(net: Any, X: Any, shape: tuple[int, ...]) -> np.ndarray:
    parts = [predict_proba_array(net, block) for block in all_rows(X, shape)]
    return np.concatenate(parts) if parts else np.zeros((0, net.output[0].out_features))


def _proba_block(block: np.ndarray, net: Any, shape: tuple[int, ...]) -> np.ndarray:
    rows = np.asarray(block, dtype=np.float32).reshape((-1, *shape))
    return predict_proba_array(net, rows)
