"""The DDC networks as a module-level ``torch.nn.Module`` class (so fitted estimators pickle).

Imported only after :func:`dkernel.deep._torch.require_torch` has found PyTorch.
"""

from __future__ import annotations

from typing import Any

from dkernel.deep._torch import require_torch

torch = require_torch("DeepDivergenceClustering")
nn = torch.nn

#: Section 3.3's layer sizes.
CNN_FILTERS = (32, 64)
CNN_KERNEL = 5
CNN_HIDDEN = 100
MLP_HIDDEN = (200, 200, 500)


class DDCNetwork(nn.Module):
    """Input → hidden representation (last hidden layer, batch-normalized) → softmax.

    ``input_shape`` ``(channels, height, width)``: two 5 × 5 convolutions (32, 64 filters), each
    followed by 2 × 2 max pooling and ReLU, then 100 units; ``(n_features,)``: fully connected
    200-200-500. ``forward`` returns ``(hidden, assignments)``.
    """

    def __init__(self, input_shape: tuple[int, ...], n_clusters: int) -> None:
        super().__init__()
        layers: list[Any] = []
        if len(input_shape) == 3:
            channels = input_shape[0]
            for filters in CNN_FILTERS:
                layers += [nn.Conv2d(channels, filters, CNN_KERNEL), nn.MaxPool2d(2), nn.ReLU()]
                channels = filters
            layers.append(nn.Flatten())
            with torch.no_grad():
                size = int(nn.Sequential(*layers)(torch.zeros(1, *input_shape)).shape[1])
            hidden = CNN_HIDDEN
        else:
            size = input_shape[0]
            for width_ in MLP_HIDDEN[:-1]:
                layers += [nn.Linear(size, width_), nn.ReLU()]
                size = width_
            hidden = MLP_HIDDEN[-1]
        layers += [nn.Linear(size, hidden), nn.ReLU(), nn.BatchNorm1d(hidden)]
        self.encoder = nn.Sequential(*layers)
        self.output = nn.Sequential(nn.Linear(hidden, n_clusters), nn.Softmax(dim=1))

    def forward(self, x: Any) -> tuple[Any, Any]:
        hidden = self.encoder(x)
        return hidden, self.output(hidden)

    def he_init(self, generator: Any) -> DDCNetwork:
        """He-normal weights and zero biases (Section 4.6), drawn from ``generator``."""
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Conv2d | nn.Linear):
                    nn.init.kaiming_normal_(module.weight, nonlinearity="relu", generator=generator)
                    nn.init.zeros_(module.bias)
        return self
