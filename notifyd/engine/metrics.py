"""What the daemon counts, for GET /metrics (Prometheus text) and `notifyd stats`.

Counters move where things happen (accepts in web, claim decisions in the scanner, outcomes and
provider-call times in the sender, resolutions in web); gauges that the rows answer better (due
lag, dead letters) are read from the store at scrape time. Everything that counts since start is
a counter Prometheus can rate, never a ratio of its own. One registry per daemon, so tests can
run several; the docs' list of metrics (docs/monitoring.md) is `table()`, and a test holds them together.
"""

from __future__ import annotations

import platform

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from notifyd import __version__
from notifyd.core.events import Backlog
from notifyd.core.models import OPEN_STEP_STATES, StepState, Why
from notifyd.core.records import Storage

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BREAKER_STATES = ("closed", "open", "half-open")
PROVIDER_BUCKETS = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.accept_seconds = Histogram(
            "notifyd_accept_seconds", "Time to answer POST /v1/notifications.",
            buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5), registry=r)
        self.accepts = Counter("notifyd_accepts", "Answers to POST /v1/notifications and to each "
                               "item of a batch, by result (created, retry, conflict, refused, "
                               "unavailable).", ["result"], registry=r)
        self.sends = Counter("notifyd_sends", "Provider calls by channel and outcome.",
                             ["channel", "outcome"], registry=r)
        self.steps_ended = Counter("notifyd_steps_ended", "Steps that reached a final state, by "
                                   "state and reason class (a step held for a digest counts "
                                   "once, as held, when it is held).", ["state", "why"],
                                   registry=r)
        self.escalation_depth = Histogram(
            "notifyd_escalation_depth", "Steps sent before a notification was resolved, by kind "
            "(0: resolved before anything went out).", ["kind"],
            buckets=(0, 1, 2, 3, 4, 5, 6, 8, 10), registry=r)
        self.due_lag = Gauge("notifyd_due_lag_seconds", "Age of the oldest due open step, by "
                             "channel and lane (0: none due).", ["channel", "lane"], registry=r)
        self.breaker = Gauge("notifyd_breaker_state", "Circuit breaker per channel: 1 for the "
                             "state it is in (closed, open, half-open), 0 for the others.",
                             ["channel", "state"], registry=r)
        self.provider_seconds = Histogram(
            "notifyd_provider_call_seconds", "Time a provider call took, by channel (a call "
            "that timed out counts its timeout).", ["channel"], buckets=PROVIDER_BUCKETS,
            registry=r)
        self.escalations = Counter(
            "notifyd_escalations", "Steps after a ladder's first that went to a provider, by "
            "kind: rate() over the rate of accepts is how often the ladder escalates.",
            ["kind"], registry=r)
        self.dead_letters = Gauge("notifyd_dead_letters", "Steps that are dead now (notifyd "
                                  "dead-letters lists them).", registry=r)
        self.receipts = Counter("notifyd_receipts", "Provider webhook receipts by provider and "
                                "result (applied, duplicate, orphan, bad_signature, bad_receipt, "
                                "unavailable).", ["provider", "result"], registry=r)
        self.orphans = Gauge("notifyd_orphan_receipts", "Stored receipts that match no step "
                             "(yet): a receipt before its send's answer, or for mail notifyd "
                             "did not send.", registry=r)
        self.connections_open = Gauge("notifyd_connections_open", "HTTP connections open now "
                                      "(at most server.max_connections).", registry=r)
        self.connections_strangers = Gauge(
            "notifyd_connections_strangers", "HTTP connections open now that have presented no "
            "API key or console session (at most server.max_connections less "
            "server.producer_share).", registry=r)
        self.connections_unread = Gauge(
            "notifyd_connections_unread", "HTTP connections whose answers fill their buffers now "
            "(the client reads nothing; closed past server.write_timeout_sec).", registry=r)
        self.connections_closed = Counter(
            "notifyd_connections_closed", "Connections the guard closed: evicted (no whole request "
            "within a quarter second, for a newcomer waiting at server.max_connections), "
            "timed_out (no request within server.header_timeout_sec), unread (an answer not "
            "read within server.write_timeout_sec), body (a body not sent within "
            "server.body_timeout_sec after its answer), over_share (a stranger's, answered and "
            "closed while strangers held their whole share).", ["why"], registry=r)
        self.streams_open = Gauge("notifyd_streams_open", "Inbox streams open now (at most "
                                  "server.max_streams).", registry=r)
        self.streams_closed = Counter(
            "notifyd_streams_closed", "Inbox streams notifyd ended: displaced (their person "
            "opened more than server.max_streams_per_user), behind (events waiting past the "
            "queue's bound), slow (unsent bytes past the write buffer's bound: the page does not "
            "read), stopping (shutdown), erased (their person was).", ["why"], registry=r)
        self.db_bytes = Gauge("notifyd_db_bytes", "Bytes the database takes on disk (the file "
                              "and its journal), as retention last measured.", registry=r)
        self.db_free_bytes = Gauge("notifyd_db_free_bytes", "Bytes free inside the database "
                                   "file, not yet given back to the file system.", registry=r)
        self.db_rows = Gauge("notifyd_db_rows", "Rows per class, as retention last counted "
                             "them.", ["class"], registry=r)
        self.db_oldest = Gauge("notifyd_db_oldest_row_age_seconds", "Age of the oldest row per "
                               "class (0: none).", ["class"], registry=r)
        self.pruned = Counter("notifyd_pruned", "Rows retention removed, by class (history: "
                              "notifications whose history went, leaving their identity).",
                              ["class"], registry=r)
        self.event_recipients = Counter(
            "notifyd_event_recipients_routed", "Recipients events were routed to (each gets one "
            "notification per kind of the event's type).", registry=r)
        self.events_routing = Gauge("notifyd_events_routing", "Events accepted and not yet "
                                    "routed to their whole audience.", registry=r)
        self.routing_lag = Gauge(
            "notifyd_event_routing_lag_seconds", "How long the oldest event still routing has "
            "waited since it was accepted: the age of its next chunk (0: none).", registry=r)
        self.build = Gauge("notifyd_build_info", "Always 1: the version running and the Python "
                           "it runs on.", ["version", "python"], registry=r)
        self.build.labels(__version__, platform.python_version()).set(1)
        ProcessCollector(registry=r)  # process_*: CPU, memory, open files, start time
        self._oldest: dict[str, int | None] = {}

    def storage(self, s: Storage) -> None:
        """The database's figures, as retention measured them."""
        self.db_bytes.set(s.bytes)
        self.db_free_bytes.set(s.free_bytes)
        for name, n in s.rows.items():
            self.db_rows.labels(name).set(n)
        self._oldest = dict(s.oldest)

    def age_rows(self, now: int) -> None:
        """The oldest rows' ages as of `now` (at scrape time)."""
        for name, at in self._oldest.items():
            self.db_oldest.labels(name).set(0 if at is None else max(0, now - at) / 1000)

    def routing(self, backlog: Backlog, now: int) -> None:
        """The events still routing, as read at scrape time."""
        self.events_routing.set(backlog.events)
        oldest = backlog.oldest_at
        self.routing_lag.set(0 if oldest is None else max(0, now - oldest) / 1000)

    def step_ended(self, state: StepState, why: Why, n: int = 1) -> None:
        if state in OPEN_STEP_STATES or n <= 0:
            return
        self.steps_ended.labels(state, why).inc(n)

    def breaker_state(self, channel: str, state: str) -> None:
        for each in BREAKER_STATES:
            self.breaker.labels(channel, each).set(1 if each == state else 0)

    def resolved(self, kind: str, depth: int, cancelled: int) -> None:
        self.escalation_depth.labels(kind).observe(depth)
        self.step_ended(StepState.CANCELLED, Why.RESOLVED, cancelled)

    def text(self) -> bytes:
        return generate_latest(self.registry)


PROCESS_ROW = ("| `process_*` | | | The standard process metrics: CPU seconds, resident and "
               "virtual memory, open and most file descriptors, start time (Linux). |")


def table() -> str:
    """The docs' list of metrics (docs/monitoring.md), from what a Metrics registers: name as
    scraped, type, labels, help. (prometheus_client keeps a metric's label names only in `_labelnames`.)"""
    rows = ["| metric | type | labels | what it is |", "| --- | --- | --- | --- |"]
    for metric in vars(Metrics()).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        [family] = metric.describe()
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = ", ".join(f"`{label}`" for label in metric._labelnames)
        rows.append(f"| `{name}` | {family.type} | {labels} | {family.documentation} |")
    return "\n".join([*rows, PROCESS_ROW]) + "\n"


Samples = dict[str, list[tuple[dict[str, str], float]]]


def summary(text: str) -> list[str]:
    """The exposition text as lines for a terminal (notifyd stats): a heading per figure, then
    its rows with their labels in aligned columns."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))

    def rows(name: str, *keys: str, every: bool = False) -> list[str]:
        return columns([([labels[k] for k in keys], f"{value:g}")
                        for labels, value in samples.get(name, []) if value or every])

    count = sum(v for _, v in samples.get("notifyd_accept_seconds_count", []))
    total = sum(v for _, v in samples.get("notifyd_accept_seconds_sum", []))
    mean = f"{total / count * 1000:.2f} ms" if count else "-"
    ended = samples.get("notifyd_steps_ended_total", [])
    cancelled = sum(v for labels, v in ended if labels["state"] == StepState.CANCELLED)
    finished = sum(v for _, v in ended)
    share = f" ({cancelled / finished:.0%})" if finished else ""
    ages = {labels["class"]: v for labels, v in
            samples.get("notifyd_db_oldest_row_age_seconds", [])}
    depth = columns([([labels["kind"]], f"{v:g} resolved, mean depth "
                      f"{_sum(samples, 'notifyd_escalation_depth_sum', labels) / v:.2f}")
                     for labels, v in samples.get("notifyd_escalation_depth_count", []) if v])
    return [
        f"accepts ({count:g}, mean {mean}):", *rows("notifyd_accepts_total", "result"),
        "sends by channel and outcome:", *rows("notifyd_sends_total", "channel", "outcome"),
        "steps ended by state and reason:", *rows("notifyd_steps_ended_total", "state", "why"),
        f"cancelled by a resolution: {cancelled:g} of {finished:g} ended steps{share}",
        "escalations (a later step sent) by kind:", *rows("notifyd_escalations_total", "kind"),
        "due lag (s) by channel and lane:",
        *rows("notifyd_due_lag_seconds", "channel", "lane", every=True),
        "breaker state by channel:",
        *columns([([labels["channel"]], labels["state"])
                  for labels, v in samples.get("notifyd_breaker_state", []) if v]),
        f"dead letters: {_one(samples, 'notifyd_dead_letters'):g}",
        "receipts by provider and result:", *rows("notifyd_receipts_total", "provider", "result"),
        f"orphan receipts: {_one(samples, 'notifyd_orphan_receipts'):g}",
        "escalation depth by kind:", *depth,
        f"database: {_mb(_one(samples, 'notifyd_db_bytes'))} on disk, "
        f"{_mb(_one(samples, 'notifyd_db_free_bytes'))} free inside",
        "rows by class (oldest):",
        *columns([([labels["class"]], f"{value:g} ({_age(ages.get(labels['class'], 0.0))})")
                  for labels, value in samples.get("notifyd_db_rows", [])]),
        "pruned by class:", *rows("notifyd_pruned_total", "class"),
        f"events routing: {_one(samples, 'notifyd_events_routing'):g} (the oldest waiting "
        f"{_age(_one(samples, 'notifyd_event_routing_lag_seconds'))}); recipients routed: "
        f"{_one(samples, 'notifyd_event_recipients_routed_total'):g}",
    ]


def columns(rows: list[tuple[list[str], str]]) -> list[str]:
    """Rows of labels and a figure, indented, each label column as wide as its widest."""
    if not rows:
        return []
    widths = [max(len(labels[i]) for labels, _ in rows) for i in range(len(rows[0][0]))]
    return ["    " + "  ".join(f"{label:<{w}}" for label, w in zip(labels, widths, strict=True))
            + f"  {figure}" for labels, figure in rows]


def _sum(samples: Samples, name: str, labels: dict[str, str]) -> float:
    return sum(v for lab, v in samples.get(name, []) if lab == labels)


def _one(samples: Samples, name: str) -> float:
    return samples.get(name, [({}, 0.0)])[0][1]


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _age(sec: float) -> str:
    if not sec:
        return "none"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if sec >= size:
            return f"{sec / size:.1f} {unit}"
    return f"{sec:.0f} s"
