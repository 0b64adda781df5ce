"""Echo state networks regularised by dimensionality reduction (Paper V of [Lokse2020],
[Lokse2017]): a fixed random reservoir, PCA or Nyström kernel PCA of its states, a ridge
readout; the Mackey–Glass, NARMA and multiple-superimposed-oscillator series it is measured on.
NumPy numerics; many series in parallel on Dask."""

from dkernel._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "esn": ["EchoStateNetwork", "predict_series"],
        "series": [
            "first_autocorrelation_zero",
            "forecast_pairs",
            "mackey_glass",
            "mso",
            "narma",
            "nrmse",
        ],
    },
)
