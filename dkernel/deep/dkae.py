"""``dkernel.DeepKernelizedAutoencoder``: an autoencoder whose codes' inner products are aligned
with a prior kernel ([Kampffmeyer2018], Paper III of [Lokse2020]).

The numerics are split by job: the losses in :mod:`dkernel.deep._alignment`, the tied network
in :mod:`dkernel.deep._tied`, the prior's mini-batch blocks in :mod:`dkernel.deep._prior`, the
batches, checkpoints and progress in :mod:`dkernel.deep._training`. This module validates,
runs the epochs and maps new rows (chunk by chunk for Dask input).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from dkernel._random import derive_seed, seed_from_random_state
from dkernel._validation import (
    ParameterConstraintsMixin,
    check_2d_array,
    check_is_fitted,
    is_dask_array,
    validate_input,
)
from dkernel.deep import _tied
from dkernel.deep._alignment import dkae_loss
from dkernel.deep._missing import (
    fill_or_refuse,
    filled,
    fit_missing_model,
    missing_model_of,
    training_rows,
    with_observed,
)
from dkernel.deep._prior import (
    HELD_OUT_ROWS,
    PriorBlocks,
    chooses_floor,
    fit_prior,
    held_out_sample,
    prior_sample,
)
from dkernel.deep._torch import require_torch
from dkernel.deep._training import (
    CHECKPOINT_CONSTRAINT,
    Checkpoint,
    EpochProgress,
    check_fingerprint,
    epoch_rng,
    load_checkpoint,
    mini_batches,
    network_of_results,
    save_checkpoint,
)
from dkernel.errors import InvalidInputError
from dkernel.kernels.input_policy import kernel_allows_nan
from dkernel.rows import holds_nan

logger = logging.getLogger(__name__)

_OWNER = "DeepKernelizedAutoencoder"
#: Rows encoded or decoded per forward pass (bounds the memory of the hidden layers).
FORWARD_ROWS = 4096
#: Every forward pass runs on a multiple of this many rows (zero rows padded): BLAS takes
#: another path for few rows (one row is a matrix-vector product), whose rounding differs, and
#: a row's code would then depend on how many rows came with it (the chunking of Dask input).
PAD_ROWS = 64


def _forward_blocks(torch: Any, fn: Any, A: np.ndarray, width: int) -> np.ndarray:
    """``fn`` over ``A`` (float32) in blocks of ``FORWARD_ROWS`` rows, without gradients."""
    A = np.ascontiguousarray(A, dtype=np.float32)
    out = [np.empty((0, width), np.float32)]
    with torch.no_grad():
        for s in range(0, len(A), FORWARD_ROWS):
            block = A[s : s + FORWARD_ROWS]
            padded = np.zeros((-(-len(block) // PAD_ROWS) * PAD_ROWS, A.shape[1]), np.float32)
            padded[: len(block)] = block
            out.append(fn(torch.from_numpy(padded)).numpy()[: len(block)])
    return np.concatenate(out)


def encode_rows(A: np.ndarray, params: dict, activation: str) -> np.ndarray:
    """The codes of the rows ``A``: one chunk's task for Dask input."""
    torch = require_torch(_OWNER)
    p = _tied.to_torch(torch, params, grad=False)
    width = int(params["weights"][-1].shape[0])
    return _forward_blocks(torch, lambda x: _tied.encode(torch, p, x, activation), A, width)


def decode_rows(Z: np.ndarray, params: dict, activation: str) -> np.ndarray:
    """The reconstructions (pre-images) of the codes ``Z``: one chunk's task for Dask input."""
    torch = require_torch(_OWNER)
    p = _tied.to_torch(torch, params, grad=False)
    width = int(params["weights"][0].shape[1])
    return _forward_blocks(torch, lambda z: _tied.decode(torch, p, z, activation), Z, width)


def _check_rows(X: Any) -> None:
    """Refuse images and other arrays of more than two dimensions, with the fix."""
    ndim = getattr(X, "ndim", None)
    if ndim is not None and ndim > 2:
        raise InvalidInputError(
            f"{_OWNER} takes a 2-D array of shape (n_samples, n_features); got {ndim}-D with "
            f"shape {tuple(X.shape)}. Flatten images first: X.reshape(len(X), -1)."
        )


class DeepKernelizedAutoencoder(
    ParameterConstraintsMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Deep kernelized autoencoder (dkAE): codes whose inner products follow a prior kernel.

    A stacked autoencoder ``d - h_1 - … - h_L - N_c`` with tied weights (the decoder runs the
    encoder's weights transposed) trained by Adam on mini-batches of ``k`` rows to minimise
    ([Kampffmeyer2018], Eq. 7)::

        (1 - λ) / (k d) Σ_i ||x_i - x̃_i||²  +  λ || C_k / ||C_k||_F - P_k / ||P_k||_F ||_F

    where ``C_k = Z Zᵀ`` are the inner products of the batch's codes and ``P_k`` the prior
    kernel on the batch's rows. The code space then carries the prior's similarities: ``transform``
    is an explicit, out-of-sample map into (an approximation of) the kernel's feature space,
    linear methods on the codes act like kernel methods, and ``inverse_transform`` maps codes
    back to input space (pre-images). ``kernel_weight=0`` is a plain tied autoencoder.

    Parameters
    ----------
    n_components : int, default=2000
        N_c, the size of the code layer (the paper's 2 000 on MNIST, chosen by its §4.2: both
        losses fall as N_c grows).
    hidden_layer_sizes : sequence of int, default=(500, 500, 2000)
        The encoder's hidden layers (the decoder mirrors them), the paper's d-500-500-2000-N_c.
    kernel_weight : float, default=0.1
        λ in [0, 1], the weight of the alignment term (the reconstruction gets 1 - λ). 0
        trains a plain autoencoder and fits no prior. The paper's 0.1 (it found both losses
        nearly constant for λ in [0.1, 0.9] after its long schedule; its Fig. 3a). On
        ``bench_dkae.py``'s MNIST split after 60 epochs (N_c = 2 000, one thread, seeds
        0, 1, 2), 1-NN on a 2-D PCA of the codes (the paper's Table 3) scores 39.6, 40.7 and
        41.5 % at 0.1, 32.1, 38.7 and 40.8 % at 0.5 and 36.7, 37.9 and 35.9 % for the plain
        autoencoder; a linear SVM on the standardised codes (C = 0.01) 92.7, 94.0 and 93.3 %
        at 0.1, 92.1, 91.9 and 92.4 % at 0.5 (the plain autoencoder 92.0, 93.9, 94.4 %): a
        heavier alignment pulls the codes towards the prior's coarser, cluster-like geometry
        (``benchmarks/results/dkae.md``).
    prior : str, callable or transformer, default='pck'
        The prior kernel P. 'pck': a :class:`~dkernel.ProbabilisticClusterKernel` (the paper's;
        its defaults are the paper's Q = G = 30) fitted on ``prior_samples`` rows, every GMM
        on all of them as in the paper (``max_samples=1.0``; the PCK's own default, 0.5, is
        PCKID's subsampling). Its variance floor (``reg_covar``) is chosen by the mean
        log-likelihood of up to 1 000 other training rows, among the PCK's own and fractions
        of the sample's mean column variance: 200 rows in 784 dimensions overfit at the PCK's
        own floor (``benchmarks/results/dkae.md``). A ``reg_covar`` in ``prior_params`` is
        taken as given. Columns constant on the sample (the digits' blank borders) are left
        out of the PCK without the PCK's warning. Any other kernel of the registry
        (:func:`dkernel.kernels.registry.make_kernel`: 'rbf', 'cosine', 'local_scaling', 'knn',
        ...), fitted on the same rows (widths, radii), a function ``f(X, Y)`` returning the
        kernel block, or a transformer γ (``k(x, y) = γ(x)·γ(y)``).
    prior_params : dict, optional
        Parameters of the prior: the PCK's (``{'n_estimators': 10}``, or ``{'model': fitted_pck}``),
        the registry kernel's (``{'sigma': 2.0}``).
    prior_samples : int, default=200
        Rows, drawn uniformly, that the prior is fitted on (the paper's 200); the fitted prior
        is then evaluated on every mini-batch.
    activation : {'relu', 'sigmoid', 'tanh'}, default='relu'
        Hidden layers' activation. The code layer and the output are linear.
    batch_size : int, default=200
        k, rows per mini-batch (the paper's 200); at least 2 (one code has nothing to align).
    max_iter : int, default=50
        Epochs (passes over the training rows), as scikit-learn's ``MLPRegressor`` with Adam.
    learning_rate_init : float, default=1e-3
        Adam's step size.
    checkpoint : str, path or checkpoint target, optional
        A file where the weights, Adam's state and the loss curves are saved after every
        epoch. When it holds one at ``fit``, training resumes after its last epoch (a killed
        training continues; a run of ``max_iter`` epochs resumed from epoch ``e`` equals one
        that never stopped); one from other parameters or data is refused. Instead of a file,
        any object with ``exists()``, ``read_bytes()`` and ``write_bytes(data)`` (the last
        replacing what it held in one step): a ``dkae`` job keeps its checkpoint in its
        results store that way, and ``dkernel run --resume`` continues a killed training.
    max_memory : str or float, optional
        The memory limit (default ``DKERNEL_MAX_MEMORY`` or 4 GiB): the prior's feature map
        of the training rows is kept in memory when it takes at most a quarter of it, and
        evaluated per mini-batch otherwise.
    progress : bool, default=False
        Show the epochs (with the last loss): a bar on a terminal or in Jupyter, a line per
        epoch in a log.
    random_state : int, optional
        Seed of the weights, the prior's sample and model, and every epoch's order.

    Attributes
    ----------
    coefs_ : list of ndarray
        ``coefs_[i]`` (h_i, h_{i+1}), float32: encoder layer ``i``'s weights, as scikit-learn's
        MLP stores them; the decoder uses their transposes.
    intercepts_ : list of ndarray
        The encoder's biases.
    decoder_intercepts_ : list of ndarray
        The decoder's biases; ``decoder_intercepts_[i]`` (h_i,) is that of the layer that
        outputs h_i units (``[0]``: the reconstruction's).
    prior_kernel_ : dkernel.kernels.registry.Kernel or None
        The fitted prior (None when ``kernel_weight`` is 0).
    prior_indices_ : ndarray of int64 or None
        Training rows it was fitted on.
    prior_floor_scores_ : dict of float to float or None
        The default PCK prior's candidate variance floors (``reg_covar``) and the mean
        held-out log-likelihood of each; the prior has the best. None when no floor was
        chosen (another prior, a ``reg_covar`` given, or no training row left to hold out).
    loss_curve_ : list of float
        Mean loss (Eq. 7) of every epoch.
    reconstruction_curve_, alignment_curve_ : list of float
        Its two terms, L_r and L_c, per epoch.
    n_iter_ : int
        Epochs trained (including those of a checkpoint resumed from).
    missing_model_ : dkernel.kernels.missing_model.MissingValueModel
        The Gaussian of the training rows (fitted on at most 2 000 evenly spaced rows; a full
        covariance up to 1 000 features) that fills missing values (NaN): the network takes
        each row, in ``fit`` and ``transform``, with its missing entries at their conditional
        means given its observed ones, and ``fit`` scores the reconstruction on the observed
        entries only. A prior that models missing entries takes the rows as they are (the
        default PCK: the synergy of Papers I and III that [Lokse2020] names, §1.4; the rbf
        and k-NN kernels by expected distances), any other prior the filled rows.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        When X had string column names.

    See Also
    --------
    dkernel.ProbabilisticClusterKernel : The default prior.
    dkernel.KernelPCAEmbedding : Kernel PCA of the same kernels: exact, but O(N²) and with no
        pre-images.
    sklearn.neural_network.MLPRegressor : scikit-learn's dense network (no alignment term).

    Notes
    -----
    Deviations from the paper: no layer-wise pretraining (the whole network is trained end to
    end from Glorot-uniform weights; the paper pretrains each layer for 30 epochs and
    fine-tunes for 100), and an epoch is one pass over the rows (the paper's is (n/k)²
    batches). Mini-batches are a shuffle of all rows for NumPy input; for Dask input the
    chunks are visited in a random order and shuffled within, one chunk in memory at a time.

    Cost per epoch O(N · W) for W = Σ h_i h_{i+1} weights, plus O(N k N_c) for the code
    kernels and the prior blocks; memory O(W + k · max h_i) and the prior's cached features
    (the PCK's: ~Q (G - 1) nonzeros per training row, 12 kB at the defaults). ``transform``
    and ``inverse_transform`` run per chunk (``map_blocks``) for Dask input; their rows do not
    depend on the other rows of the call.

    PyTorch is the optional ``deep`` extra (``pip install "dkernel[deep]"``); it is imported by
    ``fit``, ``transform`` and ``inverse_transform``. Training is deterministic for one
    ``random_state`` on one machine and thread count.

    References
    ----------
    - Kampffmeyer, Løkse, Bianchi, Jenssen & Livi (2018), "The deep kernelized autoencoder",
      *Applied Soft Computing* 71 [Kampffmeyer2018]: Eqs. 2 and 4-7, §3.1 (mini-batches),
      §4.1 (architecture, λ, the PCK prior on 200 samples); Paper III of [Lokse2020].
    - Glorot & Bengio (2010), "Understanding the difficulty of training deep feedforward
      neural networks", AISTATS [Glorot2010] (the initial weights).

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> X = load_digits().data / 16
    >>> ae = DeepKernelizedAutoencoder(
    ...     n_components=16, hidden_layer_sizes=(64,), prior="rbf", max_iter=3, random_state=0
    ... ).fit(X)
    >>> ae.transform(X).shape, ae.inverse_transform(ae.transform(X[:2])).shape
    ((1797, 16), (2, 64))
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "hidden_layer_sizes": [HasMethods(["__iter__", "__len__"])],
        "kernel_weight": [Interval(Real, 0, 1, closed="both")],
        # names are checked by make_kernel, whose message lists the registered ones
        "prior": [str, callable, HasMethods(["transform"])],
        "prior_params": [dict, None],
        "prior_samples": [Interval(Integral, 2, None, closed="left")],
        "activation": [StrOptions(set(_tied.ACTIVATIONS))],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
        "checkpoint": CHECKPOINT_CONSTRAINT,
        "max_memory": [str, Real, None],
        "progress": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        n_components: int = 2000,
        *,
        hidden_layer_sizes: Sequence[int] = (500, 500, 2000),
        kernel_weight: float = 0.1,
        prior: Any = "pck",
        prior_params: dict | None = None,
        prior_samples: int = 200,
        activation: str = "relu",
        batch_size: int = 200,
        max_iter: int = 50,
        learning_rate_init: float = 1e-3,
        checkpoint: Checkpoint | None = None,
        max_memory: str | float | None = None,
        progress: bool = False,
        random_state: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.hidden_layer_sizes = hidden_layer_sizes
        self.kernel_weight = kernel_weight
        self.prior = prior
        self.prior_params = prior_params
        self.prior_samples = prior_samples
        self.activation = activation
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.checkpoint = checkpoint
        self.max_memory = max_memory
        self.progress = progress
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float32"]
        tags.input_tags.allow_nan = True  # filled with their conditional means
        return tags

    @property
    def _n_features_out(self) -> int:
        return int(self.n_components)

    def _hidden(self) -> list[int]:
        sizes = list(self.hidden_layer_sizes)
        if isinstance(self.hidden_layer_sizes, str) or not all(
            isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in sizes
        ):
            raise InvalidInputError(
                f"The 'hidden_layer_sizes' parameter of {_OWNER} must be a sequence of ints >= 1 "
                f"(possibly empty). Got {self.hidden_layer_sizes!r} instead."
            )
        return [int(h) for h in sizes]

    def _fingerprint(self, X: Any, seed: int | None) -> dict[str, Any]:
        """What a checkpoint must match to be resumed: the model, the data's shape, the seed."""
        prior = self.prior if isinstance(self.prior, str) else type(self.prior).__name__
        return {
            "n_samples": int(X.shape[0]),
            "n_features": int(X.shape[1]),
            "layers": str(_tied.layer_sizes(X.shape[1], self._hidden(), self.n_components)),
            "kernel_weight": float(self.kernel_weight),
            "prior": str(prior),
            "prior_params": repr(sorted((self.prior_params or {}).items())),
            "prior_samples": int(self.prior_samples),
            "activation": str(self.activation),
            "batch_size": int(self.batch_size),
            "learning_rate_init": float(self.learning_rate_init),
            "seed": -1 if seed is None else int(seed),
        }

    # -- fit -------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> DeepKernelizedAutoencoder:
        """Fit the prior on a sample, then train the network for ``max_iter`` epochs.

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)
            Training rows (read one chunk at a time when a Dask array).
        y : ignored

        Returns
        -------
        self
        """
        hidden = self._hidden()
        _check_rows(X)
        X = validate_input(self, X, reset=True, allow_nan=True, min_samples=2)
        torch = require_torch(_OWNER)
        seed = seed_from_random_state(self.random_state)
        n = int(X.shape[0])
        fingerprint = self._fingerprint(X, seed)
        saved = None
        if self.checkpoint is not None:
            saved = load_checkpoint(torch, self.checkpoint, _OWNER)
            if saved is not None:
                check_fingerprint(saved["fingerprint"], fingerprint, self.checkpoint, _OWNER)

        # missing values: a prior that models them takes the rows as they are (PCKID, the
        # rbf kernel's expected distances), any other the filled rows; the network takes them
        # filled with their conditional means and is scored on the observed entries
        self.missing_model_ = fit_missing_model(X)
        incomplete = holds_nan(X)
        train = training_rows(with_observed(X, self.missing_model_), True) if incomplete else X
        prior_takes_nan = kernel_allows_nan(self.prior)
        prior_X = X if prior_takes_nan or not incomplete else filled(X, self.missing_model_)
        d = int(X.shape[1])
        self.prior_kernel_ = self.prior_indices_ = self.prior_floor_scores_ = None
        blocks = None
        if self.kernel_weight > 0:
            self.prior_indices_, sample = prior_sample(prior_X, self.prior_samples, seed)
            held_out = None
            if chooses_floor(self.prior, self.prior_params):
                held_out = held_out_sample(prior_X, self.prior_indices_, HELD_OUT_ROWS, seed)[1]
            self.prior_kernel_, self.prior_floor_scores_ = fit_prior(
                self.prior, self.prior_params, sample, seed, held_out
            )
            blocks = PriorBlocks(self.prior_kernel_, prior_X, self.max_memory)

        generator = torch.Generator().manual_seed(derive_seed(seed, "dkae-weights"))
        sizes = _tied.layer_sizes(X.shape[1], hidden, self.n_components)
        params = _tied.init_weights(torch, sizes, generator)
        for t in _tied.flat(params):
            t.requires_grad_(True)
        optimizer = torch.optim.Adam(_tied.flat(params), lr=float(self.learning_rate_init))
        curves: dict[str, list[float]] = {"loss": [], "reconstruction": [], "alignment": []}
        start = 0
        if saved is not None:
            with torch.no_grad():
                for t, s in zip(_tied.flat(params), saved["params"], strict=True):
                    t.copy_(s)
            optimizer.load_state_dict(saved["optimizer"])
            curves = {k: list(v) for k, v in saved["curves"].items()}
            start = int(saved["epoch"])
            logger.info(
                "%s resumes after epoch %d of %d from %s", _OWNER, start, self.max_iter,
                self.checkpoint,
            )  # fmt: skip

        report = EpochProgress(
            "dkAE epochs", int(self.max_iter), min(start, self.max_iter), show=self.progress
        )
        weight = float(self.kernel_weight)
        for epoch in range(start, int(self.max_iter)):
            sums = np.zeros(3)
            rng = epoch_rng(seed, "dkae", epoch)
            for idx, rows in mini_batches(train, int(self.batch_size), rng):
                observed = None
                prior_rows = rows
                if incomplete:
                    mask = rows[:, d:]
                    rows, observed = np.ascontiguousarray(rows[:, :d]), torch.from_numpy(mask)
                    prior_rows = np.where(mask > 0, rows, np.nan) if prior_takes_nan else rows
                xb = torch.from_numpy(rows)
                P = None if blocks is None else torch.from_numpy(blocks.block(idx, prior_rows))
                codes = _tied.encode(torch, params, xb, self.activation)
                rec = _tied.decode(torch, params, codes, self.activation)
                total, lr, lc = dkae_loss(xb, rec, codes, P, weight, observed=observed)
                optimizer.zero_grad(set_to_none=True)
                total.backward()
                optimizer.step()
                sums += len(idx) * np.array([total.item(), lr.item(), lc.item()])
            for key, value in zip(curves, sums / n, strict=True):
                curves[key].append(float(value))
            if self.checkpoint is not None:
                save_checkpoint(
                    torch,
                    self.checkpoint,
                    {
                        "fingerprint": fingerprint,
                        "epoch": epoch + 1,
                        "params": [t.detach().clone() for t in _tied.flat(params)],
                        "optimizer": optimizer.state_dict(),
                        "curves": curves,
                    },
                )
            report.epoch_done(curves["loss"][-1])
        report.close()

        weights = _tied.to_numpy(params)
        self.coefs_ = [W.T.copy() for W in weights["weights"]]
        self.intercepts_ = weights["encoder_biases"]
        self.decoder_intercepts_ = weights["decoder_biases"]
        self.loss_curve_ = curves["loss"]
        self.reconstruction_curve_ = curves["reconstruction"]
        self.alignment_curve_ = curves["alignment"]
        self.n_iter_ = max(start, int(self.max_iter))
        return self

    # -- out of sample ---------------------------------------------------------------------
    @classmethod
    def from_results(cls, store: Any) -> DeepKernelizedAutoencoder:
        """The autoencoder a ``dkae`` job trained, from its results store (the tree
        :func:`dkernel.open_results` returns): ``transform`` gives new samples their codes
        and ``inverse_transform`` decodes codes, as the job's network did (the prior and the
        training curves are not restored).

        Raises
        ------
        InvalidInputError
            A store without a ``/network`` group (not a ``dkae`` job's).
        """
        ds = network_of_results(store, "dkae")
        depth = int(ds.attrs["n_layers"])
        coefs = [np.asarray(ds[f"coef_{i}"].values, dtype=np.float32) for i in range(depth)]
        est = cls(
            n_components=int(coefs[-1].shape[1]),
            hidden_layer_sizes=tuple(int(c.shape[1]) for c in coefs[:-1]),
            activation=str(ds.attrs["activation"]),
        )
        est.coefs_ = coefs
        est.intercepts_ = [np.asarray(ds[f"intercept_{i}"].values) for i in range(depth)]
        est.decoder_intercepts_ = [
            np.asarray(ds[f"decoder_intercept_{i}"].values) for i in range(depth)
        ]
        est.n_features_in_ = int(coefs[0].shape[0])
        est.missing_model_ = missing_model_of(ds)
        return est

    def _params(self) -> dict[str, list[np.ndarray]]:
        return {
            "weights": [W.T for W in self.coefs_],
            "encoder_biases": self.intercepts_,
            "decoder_biases": self.decoder_intercepts_,
        }

    def _map(self, A: Any, fn: Any, width: int) -> Any:
        if is_dask_array(A):
            from dkernel.runtime.shared import share, with_shared

            return A.map_blocks(
                with_shared(fn),
                share(self._params(), "dkae-weights"),
                self.activation,
                chunks=(A.chunks[0], (width,)),
                dtype=np.float32,
                meta=np.empty((0, width), dtype=np.float32),
            )
        return fn(A, self._params(), self.activation)

    def transform(self, X: Any) -> Any:
        """The codes of ``X``: the encoder's output (the out-of-sample kernel map).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray (n_samples, n_components), float32, or a lazy dask array for Dask input
        """
        check_is_fitted(self, "coefs_")
        _check_rows(X)
        X = validate_input(self, X, reset=False, allow_nan=True)
        X = fill_or_refuse(X, getattr(self, "missing_model_", None), _OWNER)
        return self._map(X, encode_rows, int(self.n_components))

    def inverse_transform(self, X: Any) -> Any:
        """The decoder's reconstructions of codes ``X`` (pre-images in input space).

        Parameters
        ----------
        X : array-like or dask array of shape (n_samples, n_components)
            Codes (of ``transform``, or points of code space: interpolations, projections).

        Returns
        -------
        ndarray (n_samples, ``n_features_in_``), float32, or a lazy dask array for Dask input
        """
        check_is_fitted(self, "coefs_")
        Z = check_2d_array(X, _OWNER, min_samples=0)
        if Z.shape[1] != self.n_components:
            raise InvalidInputError(
                f"{_OWNER}.inverse_transform takes codes of n_components = {self.n_components} "
                f"columns; got {Z.shape[1]}. Pass the output of transform."
            )
        return self._map(Z, decode_rows, int(self.n_features_in_))
