"""Edge vs cloud: when does sending a low-confidence edge request to the cloud pay?

The seed (000_b5db6f0ad1bec1d3.txt, problem 2) escalates iff::

    V_q * dQ  >  dC_infer + C_net + V_lat * (RTT + T_cloud - T_edge)

* ``V_q * dQ``: the money value of the quality gained. dQ is the gain in the
  probability of a right answer (0.80 -> 0.95 gives 0.15) and V_q the value of
  turning one wrong answer into a right one.
* ``dC_infer``: cloud minus edge inference cost per request; ``C_net``: uplink
  and downlink traffic cost.
* ``V_lat * (...)``: the extra latency priced at ``V_lat`` USD per second.

Reading the seed's numbers (the defaults of :class:`EdgeInputs`):

* "dQ = 0.15, each quality point worth 0.5 $ -> benefit 0.075 $": 0.075 is
  0.5 x 0.15, so the 0.5 $ is per unit of dQ (per wrong answer made right),
  not per percentage point (that would give 7.5 $). ``value_usd = 0.5``.
* "inference difference + traffic ~ 0.01 $": (8 - 1) $ per 1,000 requests is
  0.007 $, leaving 0.003 $ of traffic.
* "RTT 80 ms + cloud 300 ms priced ~ 0.03 $": 380 ms of extra latency (edge
  time taken as 0) cost 0.03 $, so ``V_lat = 0.03 / 0.38 = 0.0789 $/s``.

With these the default answer is "escalate": 0.075 $ > 0.04 $.

Where does the decision flip? Solving for the RTT that balances the two
sides gives ``(0.075 - 0.01) / 0.0789 - 0.3 = 0.523 s``: the break-even RTT
is about **520 ms**, not 1.5 s. The seed's own claim holds: at RTT = 1.5 s
the latency term is 0.0789 x 1.8 = 0.142 $ ("0.12 $ or more"; the seed's
0.12 is 0.03 x 1.5 / 0.38, i.e. it scaled by 1.5 s instead of 1.5 + 0.3 s),
the cost side is 0.152 $ (">= 0.13 $") > 0.075 $, and escalation no longer
pays. So "the decision has flipped by 1.5 s" is right, "it flips at 1.5 s" is
not: no reading of the seed's numbers puts the crossing there, because a flip
at 1.5 s needs V_lat = 0.065 / 1.8 = 0.036 $/s, which would price the base
case's latency at 0.014 $ instead of the seed's 0.03 $
(:func:`latency_value_for_break_even` computes such values).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import pandas as pd

from finops.errors import InputError
from finops.fmt import duration_ms, usd

SEED_LATENCY_VALUE_USD_PER_S = 0.03 / 0.380
"""The seed prices 80 ms RTT + 300 ms cloud time at about 0.03 $."""

#: the longest RTT (and cloud or edge time) taken, and the longest a curve is drawn to: ten minutes
MAX_RTT_MS = 600_000.0
#: the largest dollar input taken (a value, a cost per request, a value of a second): a million dollars
MAX_USD = 1_000_000.0
#: the most RTT draws a distribution gives (100,000 on the page: 8 bytes each)
MAX_SAMPLES = 1_000_000
_MS_FIELDS = ("rtt_ms", "cloud_ms", "edge_ms")
_USD_FIELDS = ("value_usd", "infer_cost_diff_usd", "network_cost_usd", "latency_value_usd_per_s")


@dataclass(frozen=True)
class EdgeInputs:
    """One request's escalation economics. Defaults: the seed's worked example."""

    quality_gain: float = 0.15
    """dQ: gain in the probability of a right answer (0-1), 0.80 -> 0.95."""
    value_usd: float = 0.5
    """V_q: USD value of turning one wrong answer into a right one (value of dQ = 1)."""
    infer_cost_diff_usd: float = 0.007
    """dC_infer: cloud minus edge inference cost per request ((8 - 1) $ per 1,000)."""
    network_cost_usd: float = 0.003
    """C_net: uplink + downlink traffic per request (so dC_infer + C_net = 0.01)."""
    rtt_ms: float = 80.0
    """Network round trip edge <-> cloud."""
    cloud_ms: float = 300.0
    """T_cloud: cloud inference time."""
    edge_ms: float = 0.0
    """T_edge: edge time the escalation saves (0: the edge attempt is already spent)."""
    latency_value_usd_per_s: float = SEED_LATENCY_VALUE_USD_PER_S
    """V_lat: USD per second of extra latency."""
    edge_quality: float = 0.80
    """Probability that the edge answer is right (for expected quality; cloud = edge + dQ)."""

    def validate(self) -> EdgeInputs:
        """Raise :class:`InputError` on non-finite or impossible values; return self."""
        for name, value in asdict(self).items():
            try:
                ok = np.isfinite(float(value))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise InputError(f"must be a finite number, got {value!r}", field=name)
        for name in (*_USD_FIELDS, *_MS_FIELDS):
            if getattr(self, name) < 0:
                raise InputError(f"must be >= 0, got {getattr(self, name)}", field=name)
        for names, most, what in ((_USD_FIELDS, MAX_USD, f"${MAX_USD:,.0f}"),
                                  (_MS_FIELDS, MAX_RTT_MS, f"{MAX_RTT_MS:,.0f} ms (ten minutes)")):
            for name in names:
                if getattr(self, name) > most:
                    raise InputError(f"must be at most {what}, got {getattr(self, name):,.6g}", field=name)
        if not 0 <= self.edge_quality <= 1:
            raise InputError(f"is a probability (0-1), got {self.edge_quality}", field="edge_quality")
        if not 0 <= self.edge_quality + self.quality_gain <= 1 + 1e-12:
            raise InputError(f"edge quality {self.edge_quality} + gain {self.quality_gain} must stay in 0-1",
                             field="quality_gain")
        return self

    @property
    def benefit_usd(self) -> float:
        """V_q * dQ."""
        return self.value_usd * self.quality_gain

    @property
    def money_cost_usd(self) -> float:
        """dC_infer + C_net."""
        return self.infer_cost_diff_usd + self.network_cost_usd


@dataclass(frozen=True)
class BreakEven:
    """The RTT below which escalation pays.

    ``rtt_ms`` is finite when RTT decides; ``None`` when it does not matter
    (V_lat = 0) or when escalation never pays even at zero RTT, with
    ``always_pays``/``never_pays`` and ``note`` saying which.
    """

    rtt_ms: float | None
    always_pays: bool
    never_pays: bool
    note: str


@dataclass(frozen=True)
class EdgeDecision:
    """The inequality evaluated for one RTT."""

    escalate: bool
    benefit_usd: float
    money_cost_usd: float
    latency_cost_usd: float
    cost_usd: float
    net_benefit_usd: float
    extra_latency_ms: float
    break_even: BreakEven
    verdict: str


def _rtt_array(rtt_ms) -> np.ndarray:
    arr = np.asarray(rtt_ms, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise InputError("RTT values must be finite numbers", field="rtt_ms")
    if np.any(arr < 0):
        raise InputError(f"RTT cannot be negative, got {arr[arr < 0].flat[0]}", field="rtt_ms")
    return arr


def latency_cost_usd(inputs: EdgeInputs, rtt_ms) -> np.ndarray:
    """``V_lat * (RTT + T_cloud - T_edge)``, vectorised over ``rtt_ms``.

    >>> round(float(latency_cost_usd(EdgeInputs(), 80.0)), 4)
    0.03
    """
    return inputs.latency_value_usd_per_s * (_rtt_array(rtt_ms) + inputs.cloud_ms - inputs.edge_ms) / 1000.0


def net_benefit_usd(inputs: EdgeInputs, rtt_ms) -> np.ndarray:
    """``V_q dQ - (dC_infer + C_net + V_lat (RTT + T_cloud - T_edge))``; escalate where > 0.

    >>> net_benefit_usd(EdgeInputs(), [80.0, 1500.0]).round(3).tolist()
    [0.035, -0.077]
    """
    return inputs.benefit_usd - inputs.money_cost_usd - latency_cost_usd(inputs, rtt_ms)


def break_even_rtt(inputs: EdgeInputs = EdgeInputs()) -> BreakEven:
    """Solve the inequality for RTT::

        RTT* = (V_q dQ - dC_infer - C_net) / V_lat - T_cloud + T_edge

    Escalation pays iff RTT < RTT*.

    >>> round(break_even_rtt().rtt_ms)
    523
    >>> break_even_rtt(EdgeInputs(latency_value_usd_per_s=0)).always_pays
    True
    """
    inputs.validate()
    margin = inputs.benefit_usd - inputs.money_cost_usd
    if inputs.latency_value_usd_per_s == 0:
        if margin > 0:
            return BreakEven(None, True, False, "latency is free (V_lat = 0), so escalation pays at any RTT")
        return BreakEven(None, False, True, "latency is free (V_lat = 0) but the quality gain does not "
                                            "cover the extra inference and network cost: never escalate")
    rtt_s = margin / inputs.latency_value_usd_per_s - (inputs.cloud_ms - inputs.edge_ms) / 1000.0
    if rtt_s <= 0:
        return BreakEven(None, False, True, "escalation does not pay even at zero RTT")
    if rtt_s * 1000.0 > MAX_RTT_MS:
        # a crossing past any RTT taken (a tiny V_lat): no number of a billion years to show
        return BreakEven(None, True, False, f"escalation pays at any RTT up to {MAX_RTT_MS:,.0f} ms (ten minutes): "
                                            "the latency it adds costs less than the gain")
    return BreakEven(rtt_s * 1000.0, False, False,
                     f"escalation pays while RTT < {duration_ms(rtt_s * 1000.0)}")


def latency_value_for_break_even(inputs: EdgeInputs, rtt_ms: float) -> float | None:
    """The V_lat (USD/s) that would put the break-even at ``rtt_ms``; ``None`` if none can.

    >>> round(latency_value_for_break_even(EdgeInputs(), 1500.0), 4)
    0.0361
    """
    extra_s = (float(rtt_ms) + inputs.cloud_ms - inputs.edge_ms) / 1000.0
    margin = inputs.benefit_usd - inputs.money_cost_usd
    if extra_s <= 0 or margin <= 0:
        return None
    return margin / extra_s


def decide(inputs: EdgeInputs = EdgeInputs()) -> EdgeDecision:
    """Evaluate the inequality at ``inputs.rtt_ms``.

    >>> d = decide()
    >>> d.escalate, round(d.benefit_usd, 3), round(d.cost_usd, 3)
    (True, 0.075, 0.04)
    >>> decide(EdgeInputs(rtt_ms=1500)).escalate
    False
    """
    inputs.validate()
    latency = float(latency_cost_usd(inputs, inputs.rtt_ms))
    cost = inputs.money_cost_usd + latency
    net = inputs.benefit_usd - cost
    escalate = bool(net > 0)
    verdict = (f"{'escalate' if escalate else 'stay on the edge'}: quality gain worth "
               f"{usd(inputs.benefit_usd)} {'>' if escalate else '<='} cost {usd(cost)} "
               f"(inference + network {usd(inputs.money_cost_usd)}, latency {usd(latency)})")
    return EdgeDecision(escalate, inputs.benefit_usd, inputs.money_cost_usd, latency, cost, net,
                        inputs.rtt_ms + inputs.cloud_ms - inputs.edge_ms, break_even_rtt(inputs), verdict)


#: the most points a curve has (to :data:`MAX_RTT_MS`): a finer step is coarsened (``curve.attrs["step_ms"]``
#: says which was used)
MAX_CURVE_POINTS = 2_001


def net_benefit_curve(inputs: EdgeInputs = EdgeInputs(), *, max_rtt_ms: float = 3000.0,
                      step_ms: float = 10.0) -> pd.DataFrame:
    """Net benefit vs RTT for the chart: columns ``rtt_ms, benefit_usd, cost_usd,
    net_benefit_usd, escalate``. The sign of ``net_benefit_usd`` flips at the break-even.
    At most :data:`MAX_CURVE_POINTS` points up to :data:`MAX_RTT_MS`: a finer step is coarsened.

    >>> c = net_benefit_curve(max_rtt_ms=2000, step_ms=500)
    >>> c.escalate.tolist()
    [True, True, False, False, False]
    """
    inputs.validate()
    if not (np.isfinite(max_rtt_ms) and np.isfinite(step_ms)) or max_rtt_ms <= 0 or step_ms <= 0:
        raise InputError("max RTT and step must be positive numbers", field="max_rtt_ms")
    if max_rtt_ms > MAX_RTT_MS:
        raise InputError(f"max RTT {max_rtt_ms:,.0f} ms is above the {MAX_RTT_MS:,.0f} ms (ten minutes) a curve "
                         "is drawn to", field="max_rtt_ms")
    step_ms = max(step_ms, max_rtt_ms / (MAX_CURVE_POINTS - 1))
    rtt = np.arange(0.0, max_rtt_ms + step_ms / 2, step_ms)
    net = net_benefit_usd(inputs, rtt)
    curve = pd.DataFrame({"rtt_ms": rtt, "benefit_usd": inputs.benefit_usd,
                          "cost_usd": inputs.benefit_usd - net, "net_benefit_usd": net, "escalate": net > 0})
    curve.attrs["step_ms"] = step_ms
    return curve


# ----------------------------------------------------------------------------------------
# RTT distributions and the three policies
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RttDistribution:
    """RTT with jitter: ``mean_ms`` and standard deviation ``jitter_ms``.

    * ``lognormal``: ``sigma^2 = ln(1 + (jitter/mean)^2)``, ``mu = ln(mean) - sigma^2/2``
      (so the mean and sd are exactly ``mean_ms``, ``jitter_ms``); a long right tail.
    * ``normal``: N(mean, jitter^2), negative draws clipped to 0 ms.

    >>> round(float(RttDistribution("lognormal", 80, 20).sample(200_000, seed=1).mean()))
    80
    """

    kind: Literal["normal", "lognormal"] = "lognormal"
    mean_ms: float = 80.0
    jitter_ms: float = 20.0

    def _validate(self) -> None:
        if self.kind not in ("normal", "lognormal"):
            raise InputError(f"unknown RTT distribution {self.kind!r}: use normal or lognormal", field="rtt_dist")
        if not (np.isfinite(self.mean_ms) and np.isfinite(self.jitter_ms)):
            raise InputError("RTT mean and jitter must be finite", field="rtt_ms")
        if self.mean_ms < 0 or self.jitter_ms < 0 or (self.kind == "lognormal" and self.mean_ms == 0):
            raise InputError("RTT mean must be > 0 (>= 0 for normal) and jitter >= 0", field="rtt_ms")
        if max(self.mean_ms, self.jitter_ms) > MAX_RTT_MS:
            raise InputError(f"RTT mean and jitter are at most {MAX_RTT_MS:,.0f} ms (ten minutes)", field="rtt_ms")

    def _frozen(self):
        from scipy import stats  # imported when used: it costs every CLI command 0.5 s at start-up

        if self.kind == "normal":
            return stats.norm(loc=self.mean_ms, scale=self.jitter_ms)
        sigma = np.sqrt(np.log1p((self.jitter_ms / self.mean_ms) ** 2))
        return stats.lognorm(s=sigma, scale=self.mean_ms * np.exp(-sigma ** 2 / 2))

    def sample(self, n: int = 100_000, seed: int = 0) -> np.ndarray:
        """``n`` seeded draws in ms (1 to :data:`MAX_SAMPLES`; a seed 0 to 2**32 - 1)."""
        self._validate()
        if not 1 <= int(n) <= MAX_SAMPLES:
            raise InputError(f"draw 1 to {MAX_SAMPLES:,} RTT samples, not {int(n):,}", field="samples")
        if not 0 <= int(seed) < 2 ** 32:
            raise InputError(f"a seed is a whole number from 0 to {2 ** 32 - 1:,}, not {int(seed):,}", field="seed")
        if self.jitter_ms == 0:
            return np.full(int(n), float(self.mean_ms))
        draws = self._frozen().rvs(size=int(n), random_state=np.random.default_rng(seed))
        return np.maximum(draws, 0.0)

    def cdf(self, rtt_ms) -> np.ndarray:
        """P(RTT <= rtt_ms) (exact, for checking sampled shares)."""
        self._validate()
        x = np.asarray(rtt_ms, dtype=float)
        if self.jitter_ms == 0:
            return (x >= self.mean_ms).astype(float)
        return np.where(x < 0, 0.0, self._frozen().cdf(x))


@dataclass(frozen=True)
class PolicyOutcome:
    """Expected values per request under one escalation policy (averaged over RTT draws)."""

    policy: str
    escalation_share: float
    expected_quality: float
    money_cost_usd: float
    latency_cost_usd: float
    extra_latency_ms: float
    net_benefit_usd: float


@dataclass(frozen=True)
class PolicyComparison:
    """Never / always / only-when-it-pays escalation under an RTT distribution."""

    share_pays: float
    break_even: BreakEven
    never: PolicyOutcome
    always: PolicyOutcome
    when_pays: PolicyOutcome
    n_samples: int

    def as_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(p) for p in (self.never, self.always, self.when_pays)])


def _outcome(policy: str, inputs: EdgeInputs, rtt: np.ndarray, up: np.ndarray) -> PolicyOutcome:
    share = float(up.mean())
    extra_ms = np.where(up, rtt + inputs.cloud_ms - inputs.edge_ms, 0.0)
    latency = float((extra_ms * inputs.latency_value_usd_per_s / 1000.0).mean())
    money = share * inputs.money_cost_usd
    return PolicyOutcome(policy, share, inputs.edge_quality + share * inputs.quality_gain, money, latency,
                         float(extra_ms.mean()), share * inputs.benefit_usd - money - latency)


def compare_policies(inputs: EdgeInputs, rtt_samples_ms) -> PolicyComparison:
    """Share of requests for which escalation pays, and the expected outcome of three policies.

    Each RTT sample is one request; "when it pays" knows the request's RTT
    (live RTT fed into the inequality, as the seed recommends) and escalates
    iff ``net_benefit_usd(rtt) > 0``. Net benefit is relative to staying on
    the edge, so ``never`` scores 0 and ``when_pays`` is never below the other two.

    >>> cmp = compare_policies(EdgeInputs(), [80.0, 300.0, 1500.0, 2000.0])
    >>> cmp.share_pays, cmp.when_pays.escalation_share, cmp.always.escalation_share
    (0.5, 0.5, 1.0)
    """
    inputs.validate()
    rtt = _rtt_array(rtt_samples_ms).ravel()
    if rtt.size == 0:
        raise InputError("no RTT samples", field="rtt_samples")
    pays = net_benefit_usd(inputs, rtt) > 0
    return PolicyComparison(
        share_pays=float(pays.mean()),
        break_even=break_even_rtt(inputs),
        never=_outcome("never", inputs, rtt, np.zeros(rtt.shape, dtype=bool)),
        always=_outcome("always", inputs, rtt, np.ones(rtt.shape, dtype=bool)),
        when_pays=_outcome("when it pays", inputs, rtt, pays),
        n_samples=int(rtt.size),
    )
