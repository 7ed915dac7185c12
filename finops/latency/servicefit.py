"""The service-time fit: ``y ≈ a + b·x1 + c·x2`` by least squares with every term ≥ 0, from sums.

Two analyses fit a model's service time on its input (x1) and output (x2) tokens: the routing
economics (:func:`finops.spend.routing.latency_rates`) and the slow-path diagnosis
(:func:`finops.latency.diagnose.service_fit`). Both let SQL sum over the rows and solve the normal
equations here::

    [ n     Σx1     Σx2   ] [a]   [ Σy   ]
    [ Σx1   Σx1²    Σx1x2 ] [b] = [ Σx1y ]
    [ Σx2   Σx1x2   Σx2²  ] [c]   [ Σx2y ]

A coefficient that comes out negative is dropped (held at 0) and the others refitted, until every
term is ≥ 0: a token never makes a request faster.
"""
from __future__ import annotations

import numpy as np

__all__ = ["nonneg_fit"]


def nonneg_fit(r) -> tuple[float, float, float]:
    """Least squares ``y = a + b x1 + c x2`` from sums (fields n, s1, s2, s11, s22, s12, sy, s1y, s2y),
    with any negative coefficient dropped and the rest refitted, so every term is >= 0.

    >>> from types import SimpleNamespace as S
    >>> # y = 5 + 2 x1 + 1 x2 through (x1, x2) = (0, 0), (1, 0), (2, 1): an exact fit
    >>> [round(v, 9) for v in nonneg_fit(S(n=3, s1=3, s2=1, s11=5, s22=1, s12=2, sy=22, s1y=27, s2y=10))]
    [5.0, 2.0, 1.0]
    >>> # y = 10 − x1 through (0, 0), (1, 0), (2, 0): the slope is negative, so only the constant stays
    >>> [round(v, 9) for v in nonneg_fit(S(n=3, s1=3, s2=0, s11=5, s22=0, s12=0, sy=27, s1y=25, s2y=0))]
    [9.0, 0.0, 0.0]
    """
    gram = np.array([[r.n, r.s1, r.s2], [r.s1, r.s11, r.s12], [r.s2, r.s12, r.s22]], dtype=float)
    rhs = np.array([r.sy, r.s1y, r.s2y], dtype=float)
    active = [0, 1, 2]
    while active:
        g = gram[np.ix_(active, active)]
        sol = np.linalg.lstsq(g, rhs[active], rcond=None)[0]
        if (sol >= 0).all() or len(active) == 1:
            coef = [0.0, 0.0, 0.0]
            for i, v in zip(active, sol, strict=True):
                coef[i] = max(float(v), 0.0)
            return coef[0], coef[1], coef[2]
        active = [a for a, v in zip(active, sol, strict=True) if v >= 0] or [0]
    return 0.0, 0.0, 0.0
