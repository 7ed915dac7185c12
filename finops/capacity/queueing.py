"""Queueing maths for capacity planning: M/M/c (Erlang C), G/G/c (Allen–Cunneen), sizing.

Every function is pure and vectorised: arguments broadcast like numpy ufuncs, so one
call can evaluate 100,000 scenarios. Scalars in give Python floats out; arrays in give
numpy arrays out.

Notation (rates in any one unit; waits come out in its reciprocal, so seconds for
per-second rates, which is what the ``_s`` field names assume):

* λ ``arrival_rate`` (requests/s), μ ``service_rate`` (requests/s one server completes),
  c ``servers`` (replicas, or replicas × concurrent slots).
* A = λ/μ, the offered load in erlangs; ρ = A/c = λ/(cμ), the utilisation.

Degenerate inputs are answers, not NaN (``MMCResult.state``):

========== ============================== ====================================================
state      when                           figures
========== ============================== ====================================================
ok         λ > 0, μ > 0, c > 0, ρ < 1     the M/M/c formulas below
no_traffic λ = 0                          nothing waits: ρ, P(wait), waits, L, Lq are 0;
                                          ``w_s`` = 1/μ, the stay of a lone request
                                          (inf if μ = 0)
no_servers λ > 0, c = 0                   nothing is served: ρ = inf, P(wait) = 1, waits and
                                          queue lengths inf
no_service λ > 0, μ = 0 (c > 0)           as no_servers
unstable   ρ ≥ 1                          ρ as computed, P(wait) = 1, waits and queue lengths
                                          inf: the queue grows without bound
========== ============================== ====================================================

``inf`` is used only for a quantity that really diverges (a wait with no steady state);
:meth:`MMCResult.to_dict` turns it into JSON ``null`` next to the state and its message.
Negative or NaN inputs are not answers but mistakes: they raise :class:`~finops.errors.InputError`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
from scipy import special

from finops.errors import InputError
from finops.jsonutil import jsonable

__all__ = [
    "STATE_MESSAGES", "MMCResult", "SizingResult", "erlang_b", "erlang_c", "mmc", "ggc",
    "wait_quantile", "service_level", "halfin_whitt_p_wait", "sqrt_staffing", "required_servers",
]

#: Human sentence for each ``state`` code.
STATE_MESSAGES = {
    "ok": "ok: stable queue",
    "no_traffic": "no traffic: nothing waits",
    "no_servers": "no servers: requests are never served",
    "no_service": "no service: a service rate of 0 never completes a request",
    "unstable": "unstable: the queue grows without bound (utilisation >= 1)",
}

# Percentiles of the queue wait reported by mmc(): field name -> p.
#: the largest coefficient of variation taken (std / mean of inter-arrival or service times): the Capacity page's
#: bound; a larger one squared overflowed the wait factor to inf
MAX_CV = 10.0

WAIT_PERCENTILES = (("wait_p50_s", 0.50), ("wait_p90_s", 0.90), ("wait_p95_s", 0.95),
                    ("wait_p99_s", 0.99))


# --------------------------------------------------------------------------- helpers

def _check(name: str, value, *, allow_zero: bool = True) -> np.ndarray:
    """Float array of ``value``; InputError if negative, NaN or infinite."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"must be a number, got {value!r}", field=name) from None
    if not np.all(np.isfinite(arr)):
        raise InputError(f"must be a finite number, got {arr[~np.isfinite(arr)].flat[0]:g}", field=name)
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        what = ">= 0" if allow_zero else "> 0"
        first = arr[bad].flat[0] if arr.ndim else float(arr)
        raise InputError(f"must be {what}, got {first:g}", field=name)
    return arr


def _out(x, scalar: bool):
    """Python scalar when the inputs were scalars, else the numpy array."""
    if not scalar:
        return x
    x = np.asarray(x).reshape(-1)[0]
    if x.dtype.kind == "b":
        return bool(x)
    if x.dtype.kind in "US":
        return str(x)
    if x.dtype.kind in "iu":
        return int(x)
    return float(x)


def _stirlerr(n: np.ndarray) -> np.ndarray:
    """log(n!) - [(n + 1/2) log n - n + log(2π)/2], accurate for n >= 1 (Loader 2000)."""
    n = np.asarray(n, dtype=float)
    out = np.empty_like(n)
    small = n < 16
    ns = n[small]
    out[small] = special.gammaln(ns + 1) - (ns + 0.5) * np.log(ns) + ns - 0.5 * np.log(2 * np.pi)
    nl = n[~small]
    inv2 = 1.0 / (nl * nl)
    out[~small] = (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188)))) / nl
    return out


def _bd0(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """x log(x/m) + m - x without cancellation (Loader's deviance term), x > 0, m > 0."""
    out = np.empty_like(x)
    near = np.abs(x - m) < 0.1 * (x + m)
    xn, mn = x[near], m[near]
    v = (xn - mn) / (xn + mn)
    v2 = v * v
    s = np.zeros_like(v)                        # Σ_{j>=1} v^(2j) / (2j + 1) by Horner;
    for j in range(9, 0, -1):                   # |v| < 0.1: v^20 < 1e-20, converged
        s = v2 * (1.0 / (2 * j + 1) + s)
    out[near] = (xn - mn) * v + 2 * xn * v * s
    xf, mf = x[~near], m[~near]
    out[~near] = xf * (np.log(xf) - np.log(mf)) + mf - xf
    return out


def _log_poisson_pmf(k: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log(mu^k e^-mu / k!) for real k >= 0, mu > 0, without the cancellation of the naive form."""
    out = np.empty_like(mu)
    small = k < 16
    ks, ms = k[small], mu[small]
    out[small] = special.xlogy(ks, ms) - ms - special.gammaln(ks + 1)
    kl, ml = k[~small], mu[~small]
    out[~small] = -_stirlerr(kl) - _bd0(kl, ml) - 0.5 * np.log(2 * np.pi * kl)
    return out


def _inv_erlang_b_cf(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """1/B(c, A) = A · Γ(c+1, A) / (e^-A A^(c+1)) by Legendre's continued fraction (A > c + 1).

    Modified Lentz; used only where the Poisson CDF underflows (A far above c), where the
    fraction converges in a few dozen terms.
    """
    tiny = 1e-300
    aa = c + 1.0
    b = a + 1.0 - aa
    cc = np.full_like(a, 1.0 / tiny)
    d = 1.0 / b
    h = d.copy()
    active = np.ones(a.shape, dtype=bool)
    for i in range(1, 2000):
        an = -i * (i - aa[active])
        b[active] += 2.0
        d_a = an * d[active] + b[active]
        d_a = np.where(np.abs(d_a) < tiny, tiny, d_a)
        c_a = b[active] + an / cc[active]
        c_a = np.where(np.abs(c_a) < tiny, tiny, c_a)
        d_a = 1.0 / d_a
        delta = d_a * c_a
        h[active] *= delta
        d[active], cc[active] = d_a, c_a
        done = np.abs(delta - 1.0) < 1e-15
        idx = np.flatnonzero(active)
        active[idx[done]] = False
        if not active.any():
            break
    return a * h


# --------------------------------------------------------------------------- Erlang B and C

def erlang_b(offered_load, servers):
    """Erlang B blocking probability B(c, A) of an M/M/c/c loss system.

    B(c, A) = (A^c / c!) / Σ_{k=0..c} A^k / k!  =  P(X = c) / P(X ≤ c),  X ~ Poisson(A)

    For whole c ≤ 64 it runs the classic recursion B_k = A·B_{k−1} / (k + A·B_{k−1});
    otherwise it is
    computed as ``exp(log pmf) / gammaincc(c + 1, A)`` with the log-pmf in Loader's
    saddle-point form (no factorials, no overflow; accurate to ~1e-13 for c up to 10^6 and
    beyond); the CDF is taken as 1 without calling gammaincc where a geometric bound puts
    the upper tail under 1e-17. Where the Poisson CDF underflows (A far above c) it uses Legendre's continued
    fraction for the incomplete gamma function instead. Real (non-integer) ``servers`` give
    the usual continuous extension.

    >>> round(erlang_b(10.0, 14), 6)
    0.056819
    >>> erlang_b(np.array([0.0, 5.0]), 0).tolist()
    [1.0, 1.0]
    """
    a = _check("offered_load", offered_load)
    c = _check("servers", servers)
    scalar = a.ndim == 0 and c.ndim == 0
    a, c = (np.array(x, dtype=float, ndmin=1) for x in np.broadcast_arrays(a, c))
    out = np.ones_like(a)                           # c = 0: every arrival is blocked
    out[(a == 0) & (c > 0)] = 0.0
    m = (a > 0) & (c > 0)
    if m.any():
        out[m] = _erlang_b_core(a[m], c[m])
    return _out(out, scalar)


SMALL_C = 64      # whole c up to this: the Erlang B recursion beats the gamma-function path


def _erlang_b_core(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Erlang B for 1-D float arrays with a > 0, c > 0 (no validation)."""
    small = (c <= SMALL_C) & (c == np.floor(c))
    if small.any():
        out = np.empty_like(a)
        out[small] = _erlang_b_recursion(a[small], c[small])
        if not small.all():
            out[~small] = _erlang_b_gamma(a[~small], c[~small])
        return out
    return _erlang_b_gamma(a, c)


def _erlang_b_recursion(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """B_0 = 1, B_k = A·B_{k-1} / (k + A·B_{k-1}) for whole c: stable, max c vectorised steps.

    Sorted by c descending, step k updates only the prefix with c ≥ k.
    """
    order = np.argsort((SMALL_C - c).astype(np.int16), kind="stable")    # radix sort: c descending
    a_s, c_s = a[order], c[order]
    b = np.ones_like(a_s)
    c_max = int(c_s[0])
    active = np.searchsorted(-c_s, -np.arange(1, c_max + 1), side="right")   # #{c >= k}
    for k in range(1, c_max + 1):
        n = active[k - 1]
        ab = a_s[:n] * b[:n]
        b[:n] = ab / (k + ab)
    out = np.empty_like(b)
    out[order] = b
    return out


def _erlang_b_gamma(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """B = pmf(c) / cdf(c) of Poisson(A), via Loader's log-pmf and gammaincc."""
    with np.errstate(under="ignore", divide="ignore"):
        res = np.exp(_log_poisson_pmf(c, a))
        # P(X > c) <= pmf(c)·A/(c+1) / (1 - A/(c+2)): pmf ratios beyond c are below A/(c+2).
        # Under 1e-17 the CDF is 1.0 to double precision and gammaincc can be skipped.
        tail = np.where(a < c + 2, res * a / (c + 1) / (1 - a / (c + 2)), np.inf)
    cdf = np.ones_like(a)
    need = ~(tail < 1e-17)
    with np.errstate(under="ignore"):
        cdf[need] = special.gammaincc(c[need] + 1.0, a[need])     # P(Poisson(A) <= c)
    ok = cdf > 1e-250
    if ok.all():
        res /= cdf
    else:
        res[ok] /= cdf[ok]
        res[~ok] = 1.0 / _inv_erlang_b_cf(c[~ok], a[~ok])
    return np.clip(res, 0.0, 1.0, out=res)


def _erlang_c_core(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Erlang C for 1-D float arrays with 0 < a < c (no validation)."""
    b = _erlang_b_core(a, c)
    rho = a / c
    return np.clip(b / (1.0 - rho * (1.0 - b)), 0.0, 1.0)


def erlang_c(offered_load, servers):
    """Erlang C: the probability P(wait) that an arrival to an M/M/c queue must wait.

    C(c, A) = B / (1 - ρ (1 - B)),  B = Erlang B(c, A),  ρ = A / c < 1

    and 1 when ρ ≥ 1 or c = 0 (everyone waits); 0 when A = 0 and c > 0.

    >>> round(erlang_c(10.0, 14), 4)          # 100 calls / 30 min, 3 min each, 14 agents
    0.1741
    >>> round(erlang_c(0.5, 2), 12)           # λ = 5, μ = 10, c = 2
    0.1
    """
    a = _check("offered_load", offered_load)
    c = _check("servers", servers)
    scalar = a.ndim == 0 and c.ndim == 0
    a, c = (np.array(x, dtype=float, ndmin=1) for x in np.broadcast_arrays(a, c))
    out = np.ones_like(a)
    out[(a == 0) & (c > 0)] = 0.0
    stable = (a > 0) & (a < c)
    if stable.any():
        out[stable] = _erlang_c_core(a[stable], c[stable])
    return _out(out, scalar)


# --------------------------------------------------------------------------- M/M/c, G/G/c

@dataclass(frozen=True)
class MMCResult:
    """Steady-state figures of an M/M/c (or Allen–Cunneen G/G/c) queue.

    Fields are floats (bools / str for ``stable`` / ``state``) for scalar inputs and numpy
    arrays for array inputs. Times are in the reciprocal of the rates' unit (seconds for
    per-second rates); ``lq`` and ``l`` are numbers of requests.
    """

    utilization: object   #: ρ = λ / (cμ)
    p_wait: object        #: P(wait > 0), Erlang C
    wq_s: object          #: mean wait in queue
    w_s: object           #: mean time in system, wq + 1/μ
    lq: object            #: mean queue length, λ·wq (Little)
    l: object             #: mean number in system, λ·w (Little)  # noqa: E741
    wait_p50_s: object    #: median queue wait
    wait_p90_s: object
    wait_p95_s: object
    wait_p99_s: object
    stable: object        #: True when the queue has a steady state
    state: object         #: "ok", "no_traffic", "no_servers", "no_service" or "unstable"

    @property
    def message(self):
        """The state as a sentence (see :data:`STATE_MESSAGES`)."""
        if isinstance(self.state, str):
            return STATE_MESSAGES[self.state]
        return np.vectorize(STATE_MESSAGES.__getitem__, otypes=[object])(self.state)

    def to_dict(self) -> dict:
        """JSON-ready dict: every field, inf as ``None``, plus ``message``."""
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
        out["message"] = jsonable(self.message)
        return out


STATE_CODES = np.array(["ok", "no_traffic", "no_servers", "no_service", "unstable"])


def _queue(arrival_rate, service_rate, servers, wait_factor) -> MMCResult:
    lam = _check("arrival_rate", arrival_rate)
    mu = _check("service_rate", service_rate)
    c = _check("servers", servers)
    k = _check("wait_factor", wait_factor)
    scalar = lam.ndim == 0 and mu.ndim == 0 and c.ndim == 0 and k.ndim == 0
    shape = np.broadcast_shapes(lam.shape, mu.shape, c.shape, k.shape) or (1,)
    lam, mu, c, k = (np.broadcast_to(x, shape).ravel() for x in (lam, mu, c, k))

    # state codes index STATE_CODES; later rules win, so they run from weakest to strongest
    cap = c * mu                                  # cμ, the fleet's service rate
    code = np.zeros(lam.shape, dtype=np.int8)
    code[lam >= cap] = 4                          # unstable (also catches c = 0 or μ = 0)
    code[mu == 0] = 3
    code[c == 0] = 2
    code[lam == 0] = 1
    ok = code == 0
    all_ok = bool(ok.all())
    idx = slice(None) if all_ok else np.flatnonzero(ok)
    no_traffic = code == 1

    def spread(values, if_no_traffic, otherwise):
        """Stable-subset ``values`` into a full array: the fast path when every scenario is ok."""
        if all_ok:
            return values
        out = np.full(lam.shape, otherwise)
        out[no_traffic] = if_no_traffic
        out[idx] = values
        return out

    la, ka = lam[idx], k[idx]
    gap = cap[idx] - la                           # cμ − λ > 0 on the stable subset
    pa = _erlang_c_core(la / mu[idx], c[idx])
    wqa = ka * pa / gap
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = lam / cap                           # inf for c = 0 or μ = 0 with traffic
        if not all_ok:
            rho[no_traffic] = 0.0
        w = spread(wqa, 0.0, np.inf) + 1.0 / mu   # 1/0 = inf where μ = 0
    p_wait = spread(pa, 0.0, 1.0)
    wq = spread(wqa, 0.0, np.inf)
    lq = spread(la * wqa, 0.0, np.inf)
    ll = spread(la * w[idx], 0.0, np.inf)

    scale = ka / gap                              # t_p = max(0, k·(ln C − ln(1 − p)) / (cμ − λ))
    with np.errstate(divide="ignore"):
        base = np.log(pa) * scale                 # −inf where C underflows to 0: t_p = 0
    percentiles = {name: _out(spread(np.maximum(0.0, base - math.log1p(-p) * scale), 0.0, np.inf), scalar)
                   for name, p in WAIT_PERCENTILES}
    state = np.broadcast_to(STATE_CODES[0], lam.shape) if all_ok else STATE_CODES[code]

    def shaped(x):
        return _out(x, True) if scalar else x.reshape(shape)

    return MMCResult(
        utilization=shaped(rho), p_wait=shaped(p_wait), wq_s=shaped(wq), w_s=shaped(w), lq=shaped(lq),
        l=shaped(ll), **{n: v if scalar else v.reshape(shape) for n, v in percentiles.items()},
        stable=shaped(ok | no_traffic), state=shaped(state))


def mmc(arrival_rate, service_rate, servers) -> MMCResult:
    """M/M/c steady state: Poisson arrivals λ, exponential service μ, c servers, FIFO.

    ρ = λ/(cμ);  C = Erlang C(c, λ/μ);  Wq = C / (cμ − λ);  W = Wq + 1/μ;
    Lq = λ·Wq and L = λ·W (Little's law);
    P(Wq > t) = C·e^{−(cμ−λ)t}, so the p-quantile of the queue wait is
    t_p = max(0, ln(C / (1 − p)) / (cμ − λ)).

    See the module docstring for λ = 0, μ = 0, c = 0 and ρ ≥ 1.

    >>> r = mmc(10, 2, 8)
    >>> r.state, round(r.utilization, 3), round(r.p_wait, 4), round(r.wq_s, 4)
    ('ok', 0.625, 0.1673, 0.0279)
    >>> round(r.wait_p99_s, 3), round(r.l, 3)
    (0.47, 5.279)
    >>> mmc(30, 2, 8).state, mmc(30, 2, 8).wq_s
    ('unstable', inf)
    >>> mmc(np.array([5.0, 0.0]), 10, 2).wq_s.round(6).tolist()
    [0.006667, 0.0]
    """
    return _queue(arrival_rate, service_rate, servers, 1.0)


def ggc(arrival_rate, service_rate, servers, cv_arrival=1.0, cv_service=1.0) -> MMCResult:
    """G/G/c (and M/G/c with ``cv_arrival=1``) by the Allen–Cunneen approximation.

    Wq ≈ Wq(M/M/c) · (ca² + cs²) / 2

    with ca, cs the coefficients of variation (std / mean) of inter-arrival and service
    times. P(wait) is kept at Erlang C; the conditional wait is taken as exponential with
    the scaled mean, so every wait percentile is scaled by the same factor (a heuristic:
    Allen–Cunneen itself only gives the mean). ``ca = cs = 1`` is exactly :func:`mmc`.

    >>> round(ggc(10, 2, 8, cv_service=0.0).wq_s, 4)     # M/D/c: half the M/M/c wait
    0.0139
    """
    ca = _check("cv_arrival", cv_arrival)
    cs = _check("cv_service", cv_service)
    for name, cv in (("cv_arrival", ca), ("cv_service", cs)):
        if np.any(cv > MAX_CV):
            raise InputError(f"must be at most {MAX_CV:g} (a standard deviation {MAX_CV:g} times the mean), "
                             f"got {cv[cv > MAX_CV].flat[0]:,.6g}", field=name)
    return _queue(arrival_rate, service_rate, servers, (ca * ca + cs * cs) / 2.0)


def wait_quantile(arrival_rate, service_rate, servers, p):
    """The p-quantile of the M/M/c queue wait: t_p = max(0, ln(C / (1 − p)) / (cμ − λ)).

    inf when the queue is unstable, 0 with no traffic.

    >>> round(wait_quantile(10, 2, 8, 0.99), 3)
    0.47
    """
    prob = np.asarray(p, dtype=float)
    if np.any(~((prob >= 0) & (prob < 1))):
        raise InputError(f"must be in [0, 1), got {p!r}", field="p")
    r = mmc(arrival_rate, service_rate, servers)
    lam, mu, c = (np.asarray(x, dtype=float) for x in (arrival_rate, service_rate, servers))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(np.asarray(r.stable) & (lam > 0),
                     np.maximum(0.0, np.log(np.asarray(r.p_wait) / (1.0 - prob)) / (c * mu - lam)),
                     np.where(lam == 0, 0.0, np.inf))
    return _out(t, np.ndim(t) == 0)


def service_level(arrival_rate, service_rate, servers, wait_s):
    """P(Wq ≤ t) = 1 − C·e^{−(cμ−λ)t} for an M/M/c queue (0 when unstable, 1 with no traffic).

    >>> round(service_level(100 / 30, 1 / 3, 14, 0.33), 3)   # per-minute rates, t in minutes
    0.888
    """
    t = _check("wait_s", wait_s)
    r = mmc(arrival_rate, service_rate, servers)
    lam, mu, c = (np.asarray(x, dtype=float) for x in (arrival_rate, service_rate, servers))
    with np.errstate(invalid="ignore", over="ignore"):
        sl = np.where(lam == 0, 1.0,
                      np.where(np.asarray(r.state) == "ok",
                               1.0 - np.asarray(r.p_wait) * np.exp(-(c * mu - lam) * t), 0.0))
    return _out(sl, np.ndim(sl) == 0)


# --------------------------------------------------------------------------- square-root staffing

def halfin_whitt_p_wait(beta):
    """Halfin–Whitt limit of P(wait) for c = A + β√A:  α(β) = [1 + β Φ(β) / φ(β)]^{-1}.

    Computed as expit(−log(β Φ(β)/φ(β))) so large β does not overflow.

    >>> round(halfin_whitt_p_wait(1.0), 4)
    0.2234
    """
    b = np.asarray(beta, dtype=float)
    with np.errstate(divide="ignore"):
        log_ratio = np.log(np.maximum(b, 0.0)) + special.log_ndtr(b) + 0.5 * b * b \
            + 0.5 * np.log(2 * np.pi)
    return _out(special.expit(-log_ratio), b.ndim == 0)


def _halfin_whitt_beta(p_wait: np.ndarray) -> np.ndarray:
    """β with α(β) = p_wait, by bisection on [0, 40] (α is decreasing)."""
    lo, hi = np.zeros_like(p_wait), np.full_like(p_wait, 40.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        above = np.asarray(halfin_whitt_p_wait(mid)) > p_wait
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return hi


def sqrt_staffing(arrival_rate, service_rate, p_wait):
    """Square-root staffing: c ≈ A + β√A with β from α(β) = ``p_wait`` (Halfin–Whitt).

    A large-fleet rule of thumb, used as a cross-check of :func:`required_servers`.

    >>> sqrt_staffing(1000, 1, 0.2234)
    1032
    """
    lam = _check("arrival_rate", arrival_rate)
    mu = _check("service_rate", service_rate, allow_zero=False)
    p = _check("p_wait", p_wait)
    scalar = lam.ndim == 0 and mu.ndim == 0 and p.ndim == 0
    a, p = (np.array(x, dtype=float, ndmin=1) for x in np.broadcast_arrays(lam / mu, p))
    beta = _halfin_whitt_beta(np.clip(p, 1e-300, 1.0))
    return _out(np.ceil(a + beta * np.sqrt(a) - 1e-9).astype(np.int64), scalar)


# --------------------------------------------------------------------------- sizing

@dataclass(frozen=True)
class SizingResult:
    """Answer of :func:`required_servers` (ints / str for scalar inputs, arrays otherwise)."""

    servers: object                  #: smallest c meeting every constraint (before redundancy)
    servers_with_redundancy: object  #: ceil(servers · (1 + redundancy)) + cold_start_buffer
    offered_load_erlangs: object     #: A = λ/μ
    binding_constraint: object       #: "stability", "utilization", "p_wait", "wait_sla" or "no_traffic"
    sqrt_staffing_beta: object       #: β with Halfin–Whitt α(β) = P(wait) at ``servers``
    sqrt_staffing_servers: object    #: ceil(A + β√A): should be within a server or two of ``servers``
    mmc: MMCResult                   #: queue figures at ``servers``

    def to_dict(self) -> dict:
        out = {f.name: jsonable(getattr(self, f.name)) for f in fields(self) if f.name != "mmc"}
        out["mmc"] = self.mmc.to_dict()
        return out


def required_servers(arrival_rate, service_rate, *, target_utilization=None, wait_percentile=None,
                     wait_sla_s=None, max_p_wait=None, redundancy=0.0, cold_start_buffer=0,
                     cv_arrival=1.0, cv_service=1.0) -> SizingResult:
    """Smallest number of servers c meeting every constraint given, then headroom.

    Constraints (each optional; stability ρ < 1 always applies):

    * ``target_utilization``: ρ = λ/(cμ) ≤ target, i.e. c ≥ A / target;
    * ``max_p_wait``: Erlang C(c, A) ≤ max_p_wait;
    * ``wait_sla_s`` at ``wait_percentile`` (default 0.99): t_p ≤ wait_sla_s, with
      t_p = k · max(0, ln(C/(1−p)) / (cμ−λ)) and k = (ca² + cs²)/2 (Allen–Cunneen; k = 1 for M/M/c).

    All constraints are monotone in c, so the answer is found by exponential search up from
    the closed-form lower bound max(⌊A⌋ + 1, ⌈A/target⌉) and then bisection: O(log c)
    evaluations of Erlang C, each O(1). Then

    servers_with_redundancy = ⌈servers · (1 + redundancy)⌉ + cold_start_buffer.

    With no traffic the answer is 0 servers (``binding_constraint`` "no_traffic").

    >>> r = required_servers(50, 2, target_utilization=0.7)
    >>> r.servers, r.binding_constraint, round(r.mmc.utilization, 3)
    (36, 'utilization', 0.694)
    >>> required_servers(50, 2, target_utilization=0.7, redundancy=0.25, cold_start_buffer=2).servers_with_redundancy
    47
    >>> required_servers(50, 2, wait_sla_s=0.5, wait_percentile=0.99).servers
    29
    """
    lam = _check("arrival_rate", arrival_rate)
    mu = _check("service_rate", service_rate, allow_zero=False)
    scalar = lam.ndim == 0 and mu.ndim == 0
    lam, mu = (np.array(x, dtype=float, ndmin=1) for x in np.broadcast_arrays(lam, mu))
    if target_utilization is not None and not 0 < target_utilization <= 1:
        raise InputError(f"must be in (0, 1], got {target_utilization}",
                         field="target_utilization")
    if max_p_wait is not None and not 0 < max_p_wait <= 1:
        raise InputError(f"must be in (0, 1], got {max_p_wait}", field="max_p_wait")
    if wait_percentile is not None and wait_sla_s is None:
        raise InputError("wait_percentile needs wait_sla_s (the wait that percentile must stay under)",
                         field="wait_percentile")
    if wait_sla_s is not None:
        _check("wait_sla_s", wait_sla_s)
        wait_percentile = 0.99 if wait_percentile is None else wait_percentile
        if not 0 < wait_percentile < 1:
            raise InputError(f"must be in (0, 1), got {wait_percentile}",
                             field="wait_percentile")
    if redundancy < 0 or not math.isfinite(redundancy):
        raise InputError(f"must be >= 0, got {redundancy}", field="redundancy")
    if cold_start_buffer < 0 or int(cold_start_buffer) != cold_start_buffer:
        raise InputError(f"must be a whole number >= 0, got {cold_start_buffer}",
                         field="cold_start_buffer")
    ca, cs = _check("cv_arrival", cv_arrival), _check("cv_service", cv_service)
    scalar = scalar and ca.ndim == 0 and cs.ndim == 0
    lam, mu, k = (np.array(x, dtype=float, ndmin=1)
                  for x in np.broadcast_arrays(lam, mu, (ca * ca + cs * cs) / 2.0))

    a = lam / mu
    constraints = [("stability", np.floor(a) + 1)]
    if target_utilization is not None:
        constraints.append(("utilization", np.ceil(a / target_utilization * (1 - 1e-12))))
    start = np.maximum.reduce([lb for _, lb in constraints])

    def meets(c, idx):
        if max_p_wait is None and wait_sla_s is None:
            return np.ones(c.shape, dtype=bool)
        pw = np.asarray(erlang_c(a[idx], c))
        ok = np.ones(c.shape, dtype=bool)
        if max_p_wait is not None:
            ok &= pw <= max_p_wait
        if wait_sla_s is not None:
            with np.errstate(divide="ignore"):
                t = k[idx] * np.maximum(0.0, np.log(pw / (1 - wait_percentile)) / (c * mu[idx] - lam[idx]))
            ok &= t <= wait_sla_s
        return ok

    traffic = lam > 0
    servers = np.where(traffic, start, 0.0)
    idx = np.flatnonzero(traffic)
    good = meets(start[idx], idx)
    todo = idx[~good]
    lo = start[todo]                                  # infeasible
    step = np.maximum(1.0, np.ceil(np.sqrt(a[todo])))
    hi = lo + step
    cap = 1e12
    while todo.size:                                  # exponential search: double the step
        ok = meets(hi, todo)
        if ok.all():
            break
        if np.any(hi[~ok] > cap):
            raise InputError("no number of servers up to 10^12 meets these constraints")
        lo = np.where(ok, lo, hi)
        step = np.where(ok, step, 2 * step)
        hi = np.where(ok, hi, lo + step)
    while todo.size and np.any(hi - lo > 1):          # bisection: lo infeasible, hi feasible
        mid = np.floor((lo + hi) / 2)
        ok = meets(mid, todo)
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    servers[todo] = hi

    binding = np.full(lam.shape, "no_traffic", dtype=object)
    for name, lb in constraints:
        binding[traffic & (servers == lb)] = name
    if todo.size:
        binding[todo] = "wait_sla"
        if max_p_wait is not None:                    # which constraint fails one server lower
            below = np.asarray(erlang_c(a[todo], servers[todo] - 1))
            binding[todo[below > max_p_wait]] = "p_wait"
    servers_i = servers.astype(np.int64)
    with_red = (np.ceil(servers * (1.0 + redundancy) - 1e-9) + cold_start_buffer).astype(np.int64)

    q = _queue(lam[0], mu[0], servers[0], k[0]) if scalar else _queue(lam, mu, servers, k)
    pw = np.atleast_1d(np.asarray(q.p_wait, dtype=float))
    beta = np.where(traffic, _halfin_whitt_beta(np.clip(pw, 1e-300, 1.0)), 0.0)
    sqrt_c = np.where(traffic, np.ceil(a + beta * np.sqrt(a) - 1e-9), 0).astype(np.int64)
    return SizingResult(
        servers=_out(servers_i, scalar), servers_with_redundancy=_out(with_red, scalar),
        offered_load_erlangs=_out(a, scalar),
        binding_constraint=str(binding.item()) if scalar else binding.astype(str),
        sqrt_staffing_beta=_out(beta, scalar), sqrt_staffing_servers=_out(sqrt_c, scalar), mmc=q)
