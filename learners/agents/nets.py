"""Network building blocks: MLP, batched-weight critic ensembles, soft target updates.

The critic ensemble keeps every member's weights in one tensor of shape (N, in, out) and runs all members with
one `torch.baddbmm`; every layer is per member, the output layer included (HIL-SERL's port shares its output
layer across members by mistake). A subset of members runs by indexing the weight tensors (`members=`), so the
REDQ/RLPD target min over M random members costs M members, not N.

Usage::

    q = EnsembleMLP(n=10, in_dim=26, hidden_dims=(256, 256), out_dim=1, layer_norm=True)
    all_q = q(x)                                  # (10, B, 1); x is (B, in) or (10, B, in)
    some_q = q(x, members=torch.tensor([3, 7]))   # (2, B, 1) from members 3 and 7 only
    soft_update(target, online, tau=0.005)

`HLGauss` is the categorical value support of the classification critic (AgentConfig.critic_loss='hl_gauss'): the
ensemble's output layer then has `bins` logits per member instead of one Q.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn


def activation_fn(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The hidden activation called `name` (silu, relu, tanh, gelu)."""
    table: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "silu": F.silu, "relu": F.relu, "tanh": torch.tanh, "gelu": F.gelu,
    }
    return table[name]


def xavier_linear(layer: nn.Linear, gain: float = 1.0) -> nn.Linear:
    """Xavier-uniform weights and zero bias (SERL's default_init), in place."""
    nn.init.xavier_uniform_(layer.weight, gain=gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Module):
    """Dense -> [LayerNorm] -> activation per hidden layer; optional linear output layer."""

    def __init__(self, in_dim: int, hidden_dims: Sequence[int], out_dim: int | None = None,
                 layer_norm: bool = False, activation: str = "relu") -> None:
        super().__init__()
        self.act = activation_fn(activation)
        self.hidden = nn.ModuleList()
        self.norms = nn.ModuleList()
        d = in_dim
        for h in hidden_dims:
            self.hidden.append(xavier_linear(nn.Linear(d, h)))
            self.norms.append(nn.LayerNorm(h) if layer_norm else nn.Identity())
            d = h
        self.out = xavier_linear(nn.Linear(d, out_dim)) if out_dim is not None else None
        self.out_dim = out_dim if out_dim is not None else d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for lin, norm in zip(self.hidden, self.norms, strict=True):
            x = self.act(norm(lin(x)))
        return self.out(x) if self.out is not None else x


class EnsembleLinear(nn.Module):
    """N independent linear layers as one (N, in, out) weight; input (K, B, in) -> (K, B, out)."""

    def __init__(self, n: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.n, self.in_dim, self.out_dim = n, in_dim, out_dim
        bound = math.sqrt(6.0 / (in_dim + out_dim))  # xavier uniform, drawn independently per member
        self.weight = nn.Parameter(torch.empty(n, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(n, 1, out_dim))

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        w: torch.Tensor = self.weight
        b: torch.Tensor = self.bias
        if members is not None:
            w, b = w.index_select(0, members), b.index_select(0, members)
        return torch.baddbmm(b, x, w)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine (scale, shift) per ensemble member."""

    def __init__(self, n: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(n, 1, dim))
        self.bias = nn.Parameter(torch.zeros(n, 1, dim))

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        w: torch.Tensor = self.weight
        b: torch.Tensor = self.bias
        if members is not None:
            w, b = w.index_select(0, members), b.index_select(0, members)
        return torch.addcmul(b, F.layer_norm(x, (self.dim,), eps=self.eps), w)


class EnsembleMLP(nn.Module):
    """N fully independent MLPs (hidden layers, norms and output layer all per member) with batched weights."""

    def __init__(self, n: int, in_dim: int, hidden_dims: Sequence[int], out_dim: int = 1,
                 layer_norm: bool = False, activation: str = "relu") -> None:
        super().__init__()
        self.n = n
        self.act = activation_fn(activation)
        self.hidden = nn.ModuleList()
        self.norms = nn.ModuleList()
        d = in_dim
        for h in hidden_dims:
            self.hidden.append(EnsembleLinear(n, d, h))
            self.norms.append(EnsembleLayerNorm(n, h) if layer_norm else nn.Identity())
            d = h
        self.out = EnsembleLinear(n, d, out_dim)

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, in) shared by all members, or (K, B, in) per member -> (K, B, out); K = N or len(members)."""
        k = self.n if members is None else int(members.shape[0])
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(k, *x.shape)
        for lin, norm in zip(self.hidden, self.norms, strict=True):
            h = lin(x, members)
            h = norm(h, members) if isinstance(norm, EnsembleLayerNorm) else h
            x = self.act(h)
        return self.out(x, members)


class HLGauss:
    """A categorical value support for classification critics (HL-Gauss: Farebrother et al. 2024, "Stop Regressing:
    Training Value Functions via Classification for Scalable Deep RL").

    `bins` equal bins over [v_min, v_max]; a scalar target t becomes the distribution of N(clip(t), sigma) over the
    bins (the Gaussian's mass in each bin, CDF differences via erf, renormalised to the mass inside the support);
    a critic's logits give Q = sum(softmax(logits) x bin centres). sigma = sigma_ratio x bin width. The projection
    keeps the target's mean to within a small fraction of a bin unless the target is within ~1.5 sigma of an edge,
    where the cut pulls the mean inward (tests/test_hl_gauss.py measures both).

    Usage::

        hl = HLGauss(-1.0, 10.0, bins=101, sigma_ratio=0.75, device="cpu")
        q = hl.expected(logits)                  # (..., bins) -> (...)
        loss = hl.cross_entropy(logits, target)  # logits (N, B, bins), target (B,) -> (N, B)
    """

    def __init__(self, v_min: float, v_max: float, bins: int, sigma_ratio: float,
                 device: torch.device | str = "cpu") -> None:
        if not (math.isfinite(v_min) and math.isfinite(v_max) and v_min < v_max and bins >= 2 and sigma_ratio > 0):
            raise ValueError(f"HLGauss: need finite v_min < v_max, bins >= 2, sigma_ratio > 0; got "
                             f"({v_min}, {v_max}), {bins}, {sigma_ratio}")
        self.v_min, self.v_max, self.bins = float(v_min), float(v_max), int(bins)
        self.bin_width = (self.v_max - self.v_min) / self.bins
        self.sigma = float(sigma_ratio) * self.bin_width
        self.edges = torch.linspace(self.v_min, self.v_max, self.bins + 1, device=device)  # (bins + 1,)
        self.centres = (self.edges[:-1] + self.edges[1:]) / 2  # (bins,)

    def project(self, target: torch.Tensor) -> torch.Tensor:
        """target (...) -> probabilities (..., bins), each row summing to 1; targets clipped into the support."""
        t = target.clamp(self.v_min, self.v_max).unsqueeze(-1)
        cdf = torch.erf((self.edges - t) / (math.sqrt(2.0) * self.sigma))  # (..., bins + 1), 2 x CDF - 1
        mass = cdf[..., 1:] - cdf[..., :-1]
        return mass / (cdf[..., -1:] - cdf[..., :1])

    def expected(self, logits: torch.Tensor) -> torch.Tensor:
        """Q = sum(softmax(logits) x bin centres): logits (..., bins) -> (...)."""
        return torch.softmax(logits, -1) @ self.centres

    def cross_entropy(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """-sum(project(target) x log_softmax(logits)) over the bins: logits (..., B, bins), target (B,) ->
        (..., B)."""
        return -(self.project(target) * torch.log_softmax(logits, -1)).sum(-1)

    def initial_bias(self, value: float = 0.0, floor: float = 1e-5) -> torch.Tensor:
        """Output-layer bias (bins,) whose softmax is the projection of `value` (clipped into the support; bins
        below `floor` probability raised to it): a fresh critic then starts near Q = value, not at the support's
        midpoint."""
        p = self.project(torch.tensor(float(value), device=self.edges.device)).clamp_min(floor)
        return p.log()


@torch.no_grad()
def soft_update(target: Iterable[torch.Tensor], online: Iterable[torch.Tensor], tau: float) -> None:
    """target <- tau * online + (1 - tau) * target, in place, pairwise over the two parameter lists."""
    t_list, o_list = list(target), list(online)
    if len(t_list) != len(o_list):
        raise ValueError(f"soft_update: {len(t_list)} target tensors vs {len(o_list)} online tensors")
    if not t_list:
        return
    torch._foreach_lerp_(t_list, o_list, tau)
