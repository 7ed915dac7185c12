"""The gateway's TOML configuration, parsed and checked into frozen dataclasses.

``examples/gateway.toml`` documents every key. The sections:

``[server]``             what one client may cost the gateway: body size, read timeouts,
                         keep-alive, open connections
``[routing]``            default tenant and tier, the cascade threshold tau and order,
                         how many recent calls the latency-first strategy looks at
``[cache]``              the semantic-cache stage: ``kind`` and its options
``[classifier]``         the complexity stage: ``kind`` and its options
``[tiers.NAME]``         an SLA tier: its strategy and quality floor
``[tenants.NAME]``       a tenant: its tier and API keys
``[backends.NAME]``      a model behind the gateway: ``kind`` (mock, openai), prices,
                         capacity, timeout and the options of its kind

Every stage is pluggable: a ``kind`` (or a tier's ``strategy``) of the form
``package.module:factory`` names your own implementation. A cache or
classifier factory is called with the section's other keys as keyword
arguments; a backend factory with its :class:`BackendConfig`; a strategy is a
function ``(backends, ctx) -> Plan`` (see :mod:`finops.gateway.pipeline`). Built-in
kinds have their options declared below as data and checked here, so a typo in
a key is an error at start-up, not a silent default.
"""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from finops.errors import InputError


@dataclass(frozen=True)
class Opt:
    """One configuration key: its type, default (``REQUIRED`` if none) and check."""

    name: str
    kind: str            # "int", "float", "str", "bool", "str_list", "range", "int_range"
    default: Any
    help: str
    check: Callable[[Any], bool] | None = None
    rule: str = ""       # what ``check`` demands, for the error message


REQUIRED = object()


def _non_negative(v) -> bool:
    return v >= 0


def _positive(v) -> bool:
    return v > 0


def _unit(v) -> bool:
    return 0.0 <= v <= 1.0


def _unit_range(v) -> bool:
    return 0.0 <= v[0] <= v[1] <= 1.0


def _one_of(*choices: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in choices), "one of " + ", ".join(choices)


NON_NEG = dict(check=_non_negative, rule=">= 0")
POS = dict(check=_positive, rule="> 0")
UNIT = dict(check=_unit, rule="in [0, 1]")

MIB = 1024 * 1024

SERVER_OPTS = (
    Opt("max_body_bytes", "int", 8 * MIB,
        "largest request body, bytes: a larger Content-Length is HTTP 413 before any byte is read, "
        "a chunked body is cut off at this size", **POS),
    Opt("header_timeout_s", "float", 10.0,
        "time a connection has to send a complete request head, from connecting or from the end of "
        "the previous response, seconds; then it is closed", **POS),
    Opt("body_timeout_s", "float", 30.0,
        "time a request has to send its whole body once its head is in, seconds; then HTTP 408", **POS),
    Opt("keep_alive_s", "float", 5.0, "an idle keep-alive connection is closed after this, seconds", **POS),
    Opt("max_connections", "int", 1000,
        "open connections at most; beyond them HTTP 503. Lowered at start-up to fit the process's "
        "descriptor limit (ulimit -n) with room for upstream connections and the log", **POS),
)

ROUTING_OPTS = (
    Opt("default_tenant", "str", "default", "tenant of requests that name none"),
    Opt("default_tier", "str", "standard", "SLA tier of tenants not listed under [tenants]"),
    Opt("cascade_threshold", "float", 0.7, "tau: a cascade escalates when confidence < tau", **UNIT),
    Opt("cascade_order", "str_list", [], "backends a cascade tries, small first (default: by price)"),
    Opt("latency_window", "int", 200, "recent calls per backend behind its P99", **POS),
)

_scope = _one_of("tenant", "global")
_unit_kind = _one_of("tokens", "chars")
CACHE_KINDS: dict[str, tuple[Opt, ...]] = {
    "exact": (
        Opt("max_entries", "int", 10_000, "LRU capacity, entries", **POS),
        Opt("ttl_s", "float", 600.0, "an entry expires this many seconds after it was stored", **POS),
        Opt("scope", "str", "tenant", "tenant: tenants never see each other's answers; global: shared",
            check=_scope[0], rule=_scope[1]),
    ),
    "none": (),
}
CLASSIFIER_KINDS: dict[str, tuple[Opt, ...]] = {
    "length": (
        Opt("unit", "str", "tokens", "count prompt length in estimated tokens or in characters",
            check=_unit_kind[0], rule=_unit_kind[1]),
        Opt("threshold", "int", 32, "a prompt longer than this is long", **NON_NEG),
        Opt("long_min_quality", "float", 0.85, "quality a backend needs to serve a long prompt", **UNIT),
    ),
    "none": (),
}
STRATEGIES = ("cost", "latency", "cascade")

TIER_OPTS = (
    Opt("strategy", "str", "cost", "cost, latency, cascade or package.module:function"),
    Opt("quality_floor", "float", 0.0, "lowest backend quality this tier accepts", **UNIT),
    Opt("cascade_threshold", "float", None, "tau for this tier (default: [routing])", **UNIT),
)
TENANT_OPTS = (
    Opt("tier", "str", None, "SLA tier (default: [routing] default_tier)"),
    Opt("api_keys", "str_list", [], "Bearer keys that identify this tenant"),
)
BACKEND_OPTS = (
    Opt("kind", "str", REQUIRED, "mock, openai or package.module:factory"),
    Opt("model", "str", None, "model name logged and answered (default: the backend's name)"),
    Opt("quality", "float", 0.5, "expected answer quality, compared with quality floors", **UNIT),
    Opt("capacity", "int", 8, "concurrent calls per replica; more wait in the queue", **POS),
    Opt("replicas", "int", 1, "replicas, each with its own capacity", **POS),
    Opt("max_queue", "int", 0, "reject (HTTP 503) when this many calls wait; 0 = unbounded", **NON_NEG),
    Opt("timeout_s", "float", 30.0, "queue + service time allowed per call, seconds", **POS),
    # Prices: leave all three unset to log cost_usd as null and let the price book price the rows.
    Opt("request_usd", "float", None, "price per call, USD", **NON_NEG),
    Opt("input_usd_per_1m", "float", None, "price per 1M input tokens, USD", **NON_NEG),
    Opt("output_usd_per_1m", "float", None, "price per 1M output tokens, USD", **NON_NEG),
)
BACKEND_KINDS: dict[str, tuple[Opt, ...]] = {
    "mock": (
        Opt("prefill_ms_per_token", "float", 2.0, "prefill time per prompt token, ms", **NON_NEG),
        Opt("decode_ms_per_token", "float", 5.0, "decode time per output token, ms", **NON_NEG),
        Opt("output_tokens", "int_range", [10, 10],
            "output length: a number, or [min, max] drawn from the prompt's hash", check=lambda v: v[0] >= 1,
            rule=">= 1"),
        Opt("slow_inject_ms", "float", 2000.0, "decode time added to an injected slow call, ms", **NON_NEG),
        Opt("inject_rate", "float", 0.0, "share of calls injected without being asked", **UNIT),
        Opt("confidence", "range", [0.5, 1.0], "[min, max] of the answer's confidence, from the prompt's hash",
            check=_unit_range, rule="0 <= min <= max <= 1"),
        Opt("seed", "int", 0, "seed of the inject_rate draws"),
    ),
    "openai": (
        Opt("base_url", "str", REQUIRED, "e.g. http://127.0.0.1:8001/v1 (POST {base_url}/chat/completions)"),
        Opt("upstream_model", "str", None, "model name sent upstream (default: model)"),
        Opt("api_key_env", "str", "", "environment variable holding the upstream's Bearer key"),
        Opt("request_logprobs", "bool", False,
            "ask for logprobs; confidence = exp(mean token logprob) for cascades"),
        Opt("max_response_bytes", "int", 8 * MIB,
            "largest upstream answer read, bytes (after decompression); a larger one is HTTP 502", **POS),
    ),
}


@dataclass(frozen=True)
class Stage:
    """A pluggable stage: a built-in ``kind`` or ``module:factory``, and its options."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_plugin(self) -> bool:
        return ":" in self.kind


@dataclass(frozen=True)
class ServerLimits:
    """``[server]``: the bounds that keep one client from taking the gateway down."""

    max_body_bytes: int = 8 * MIB
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: float = 5.0
    max_connections: int = 1000


@dataclass(frozen=True)
class Routing:
    default_tenant: str = "default"
    default_tier: str = "standard"
    cascade_threshold: float = 0.7
    cascade_order: tuple[str, ...] = ()
    latency_window: int = 200


@dataclass(frozen=True)
class Tier:
    name: str
    strategy: str = "cost"
    quality_floor: float = 0.0
    cascade_threshold: float | None = None


@dataclass(frozen=True)
class Tenant:
    name: str
    tier: str
    api_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendConfig:
    name: str
    kind: str
    model: str
    quality: float = 0.5
    capacity: int = 8
    replicas: int = 1
    max_queue: int = 0
    timeout_s: float = 30.0
    request_usd: float | None = None
    input_usd_per_1m: float | None = None
    output_usd_per_1m: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def priced(self) -> bool:
        """Whether the config gives any price for this backend."""
        return any(p is not None for p in (self.request_usd, self.input_usd_per_1m, self.output_usd_per_1m))

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """Price of one call: ``request_usd + in * input_usd_per_1m / 1e6 + out * output_usd_per_1m / 1e6``.

        Unset prices count as zero here; the log writes null for an unpriced backend.

        >>> BackendConfig("slow", "mock", "slow", request_usd=0.008).cost_usd(50, 10)
        0.008
        >>> BackendConfig("m", "openai", "m", input_usd_per_1m=2.5, output_usd_per_1m=10).cost_usd(1000, 100)
        0.0035
        """
        return ((self.request_usd or 0.0) + input_tokens * (self.input_usd_per_1m or 0.0) / 1e6
                + output_tokens * (self.output_usd_per_1m or 0.0) / 1e6)


@dataclass(frozen=True)
class GatewayConfig:
    backends: Mapping[str, BackendConfig]
    server: ServerLimits = ServerLimits()
    routing: Routing = Routing()
    cache: Stage = Stage("exact", {"max_entries": 10_000, "ttl_s": 600.0, "scope": "tenant"})
    classifier: Stage = Stage("length", {"unit": "tokens", "threshold": 32, "long_min_quality": 0.85})
    tiers: Mapping[str, Tier] = field(default_factory=lambda: {"standard": Tier("standard")})
    tenants: Mapping[str, Tenant] = field(default_factory=dict)
    source: str = "<defaults>"

    @property
    def api_keys(self) -> dict[str, str]:
        """Bearer key -> tenant name; empty when no keys are configured."""
        return {key: t.name for t in self.tenants.values() for key in t.api_keys}

    def tier_of(self, tenant: str) -> Tier:
        t = self.tenants.get(tenant)
        return self.tiers[t.tier if t else self.routing.default_tier]


# ---------------------------------------------------------------- parsing

def _convert(opt: Opt, value: Any, err: Callable[[str], InputError]) -> Any:
    kind = opt.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise err("must be true or false")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise err("must be an integer")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise err("must be a number")
        return float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise err("must be a string")
        return value
    if kind == "str_list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise err("must be a list of strings")
        return tuple(value)
    if kind in ("range", "int_range"):
        scalar = int if kind == "int_range" else (int, float)
        if isinstance(value, scalar) and not isinstance(value, bool):
            value = [value, value]
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(v, scalar) and not isinstance(v, bool) for v in value)
                or value[0] > value[1]):
            raise err("must be a number or [min, max] with min <= max")
        return tuple(value) if kind == "int_range" else (float(value[0]), float(value[1]))
    raise AssertionError(f"unknown option kind {kind}")


def parse_options(table: Mapping[str, Any], opts: tuple[Opt, ...], where: str, source: str,
                  *, allow_extra: bool = False) -> dict[str, Any]:
    """Check ``table`` against ``opts``: types, rules, required keys, no unknown keys.

    >>> parse_options({"ttl_s": 5}, CACHE_KINDS["exact"], "cache", "x.toml")
    {'max_entries': 10000, 'ttl_s': 5.0, 'scope': 'tenant'}
    >>> parse_options({"ttl": 5}, CACHE_KINDS["exact"], "cache", "x.toml")
    Traceback (most recent call last):
    ...
    finops.errors.InputError: file x.toml, field cache.ttl: unknown key (expected one of max_entries, ttl_s, scope)
    """
    known = {o.name: o for o in opts}
    out: dict[str, Any] = {}
    for key, value in table.items():
        opt = known.get(key)
        if opt is None:
            if allow_extra:
                out[key] = value
                continue
            raise InputError(f"unknown key (expected one of {', '.join(known) or 'none'})",
                             file=source, field=f"{where}.{key}")

        def err(msg: str, key=key) -> InputError:
            return InputError(msg, file=source, field=f"{where}.{key}")

        value = _convert(opt, value, err)
        if opt.check is not None and not opt.check(value):
            raise err(f"must be {opt.rule}")
        out[key] = value
    for opt in opts:
        if opt.name not in out:
            if opt.default is REQUIRED:
                raise InputError("is required", file=source, field=f"{where}.{opt.name}")
            default = opt.default
            out[opt.name] = tuple(default) if isinstance(default, list) else default
    ordered = {o.name: out.pop(o.name) for o in opts}
    return {**ordered, **out}


def _table(doc: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise InputError("must be a table", file=source, field=key)
    return value


def _stage(doc: Mapping[str, Any], key: str, kinds: dict[str, tuple[Opt, ...]], default_kind: str,
           source: str) -> Stage:
    table = dict(_table(doc, key, source))
    kind = table.pop("kind", default_kind)
    if not isinstance(kind, str):
        raise InputError("must be a string", file=source, field=f"{key}.kind")
    if ":" in kind:
        return Stage(kind, table)
    if kind not in kinds:
        raise InputError(f"unknown kind {kind!r} (expected one of {', '.join(kinds)} or module:factory)",
                         file=source, field=f"{key}.kind")
    return Stage(kind, parse_options(table, kinds[kind], key, source))


def parse_config(doc: Mapping[str, Any], source: str = "<string>") -> GatewayConfig:
    """Build a :class:`GatewayConfig` from a parsed TOML document, checking every key.

    >>> cfg = parse_config({"backends": {"fast": {"kind": "mock", "quality": 0.7}}})
    >>> cfg.backends["fast"].model, cfg.tiers["standard"].strategy, cfg.classifier.options["unit"]
    ('fast', 'cost', 'tokens')
    """
    allowed = {"server", "routing", "cache", "classifier", "tiers", "tenants", "backends"}
    for key in doc:
        if key not in allowed:
            raise InputError(f"unknown section (expected one of {', '.join(sorted(allowed))})",
                             file=source, field=key)
    server = ServerLimits(**parse_options(_table(doc, "server", source), SERVER_OPTS, "server", source))
    routing = Routing(**parse_options(_table(doc, "routing", source), ROUTING_OPTS, "routing", source))
    cache = _stage(doc, "cache", CACHE_KINDS, "exact", source)
    classifier = _stage(doc, "classifier", CLASSIFIER_KINDS, "length", source)

    tiers: dict[str, Tier] = {}
    for name, table in _table(doc, "tiers", source).items():
        if not isinstance(table, dict):
            raise InputError("must be a table", file=source, field=f"tiers.{name}")
        tier = Tier(name, **parse_options(table, TIER_OPTS, f"tiers.{name}", source))
        if tier.strategy not in STRATEGIES and ":" not in tier.strategy:
            raise InputError(f"unknown strategy {tier.strategy!r} (expected one of "
                             f"{', '.join(STRATEGIES)} or module:function)",
                             file=source, field=f"tiers.{name}.strategy")
        tiers[name] = tier
    if not tiers:
        tiers = {routing.default_tier: Tier(routing.default_tier)}
    if routing.default_tier not in tiers:
        raise InputError(f"tier {routing.default_tier!r} is not defined under [tiers]",
                         file=source, field="routing.default_tier")

    tenants: dict[str, Tenant] = {}
    seen_keys: set[str] = set()
    for name, table in _table(doc, "tenants", source).items():
        if not isinstance(table, dict):
            raise InputError("must be a table", file=source, field=f"tenants.{name}")
        opts = parse_options(table, TENANT_OPTS, f"tenants.{name}", source)
        tier = opts["tier"] or routing.default_tier
        if tier not in tiers:
            raise InputError(f"tier {tier!r} is not defined under [tiers]",
                             file=source, field=f"tenants.{name}.tier")
        for key in opts["api_keys"]:
            if key in seen_keys or not key:
                raise InputError("an API key is empty or given to two tenants",
                                 file=source, field=f"tenants.{name}.api_keys")
            seen_keys.add(key)
        tenants[name] = Tenant(name, tier, opts["api_keys"])

    backends: dict[str, BackendConfig] = {}
    for name, table in _table(doc, "backends", source).items():
        where = f"backends.{name}"
        if not isinstance(table, dict):
            raise InputError("must be a table", file=source, field=where)
        common_names = {o.name for o in BACKEND_OPTS}
        common = parse_options({k: v for k, v in table.items() if k in common_names},
                               BACKEND_OPTS, where, source)
        kind = common["kind"]
        rest = {k: v for k, v in table.items() if k not in common_names}
        if ":" in kind:
            options = rest
        elif kind in BACKEND_KINDS:
            options = parse_options(rest, BACKEND_KINDS[kind], where, source)
        else:
            raise InputError(f"unknown kind {kind!r} (expected one of {', '.join(BACKEND_KINDS)} "
                             "or module:factory)", file=source, field=f"{where}.kind")
        common["model"] = common["model"] or name
        if kind == "openai" and not options["upstream_model"]:
            options["upstream_model"] = common["model"]
        backends[name] = BackendConfig(name=name, options=options, **common)
    if not backends:
        raise InputError("no backends: add at least one [backends.NAME] table", file=source)
    for name in routing.cascade_order:
        if name not in backends:
            raise InputError(f"backend {name!r} is not defined under [backends]",
                             file=source, field="routing.cascade_order")
    return GatewayConfig(backends=backends, server=server, routing=routing, cache=cache, classifier=classifier,
                         tiers=tiers, tenants=tenants, source=source)


def load_config(path: str | Path) -> GatewayConfig:
    """Read and check a gateway TOML file; any problem is an :class:`InputError`."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a folder: give the gateway's TOML file", file=str(path)) from None
    except UnicodeDecodeError:      # a binary file: tomllib decodes the bytes first
        raise InputError("not a text file: a gateway config is TOML text", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", file=str(path)) from None
    return parse_config(doc, str(path))
