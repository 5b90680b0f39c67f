"""The evaluator's Prometheus metrics (``evaluator serve --metrics-listen HOST:PORT``).

Each evaluator gets a :class:`prometheus_client.CollectorRegistry` of its own (never the
library's global one), so several evaluators in one process (tests, an embedding
program) count apart. What is counted comes through :class:`.observe.Observer`
(:class:`EvaluatorMetrics` is one); what is in the store is read at scrape time.

======================================  =========  ==========================================
metric                                  type       what
======================================  =========  ==========================================
``ale_jobs{state}``                     gauge      jobs in the store in each state (all
                                                   replicas'), read at scrape time
``ale_queue_depth``                     gauge      jobs QUEUED in the store
``ale_job_store_up``                    gauge      1 when the store answered this scrape
``ale_job_attempts_total``              counter    attempts this process started (claims)
``ale_jobs_ended_total{state,source}``  counter    attempts that ended a job, by terminal
                                                   state and failure source (``none``, ...)
``ale_job_failures_total{cause}``       counter    failed attempts by cause: ``rejected``,
                                                   ``submission``, ``infrastructure``
                                                   (FAILED), ``timed_out``, ``retried`` (an
                                                   infrastructure failure requeued)
``ale_job_duration_seconds``            histogram  an attempt's seconds, claim to end
``ale_shard_duration_seconds``          histogram  a shard's seconds on its worker (the local
                                                   executor measures them)
``ale_sessions_open``                   gauge      interactive sessions open here
``ale_agent_steps_total``               counter    env steps taken by agents in sessions
                                                   (its rate is steps/s)
``ale_evaluator_build_info``            info       version, executor, store kind
======================================  =========  ==========================================

Labels take only the values of fixed enums (states, failure sources, the causes above):
no job, run or task id, so the number of series stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ale_robotics import __version__
from ale_robotics.addresses import is_loopback, split_host_port
from ale_robotics.errors import InvalidArgumentError
from ale_robotics.evaluator.core import Evaluator
from ale_robotics.evaluator.store import StoreUnavailable
from ale_robotics.evaluator.store.factory import StoreKind, parse_store_url
from ale_robotics.evaluator.store.views import StoreView
from ale_robotics.model.states import FailureSource, JobState

__all__ = ["EvaluatorMetrics", "MetricsServer", "check_metrics_address", "serve_metrics"]

log = logging.getLogger(__name__)

_JOB_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600)
_SHARD_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900)


def _cause(state: JobState, source: FailureSource) -> str | None:
    """The bounded cause of an attempt's failure; None for one that did not fail."""
    if state is JobState.REJECTED:
        return "rejected"
    if state is JobState.TIMED_OUT:
        return "timed_out"
    if state is JobState.FAILED:
        return "submission" if source is FailureSource.SUBMISSION else "infrastructure"
    return None


class _StoreCollector:
    """Jobs by state and the queue depth, read from the store at each scrape."""

    def __init__(self, view: StoreView | None) -> None:
        self._view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("ale_job_store_up", "1 when the job store answered this scrape")
        counts: dict[JobState, int] | None = None
        if self._view is not None:
            try:
                counts = self._view.counts()
            except StoreUnavailable as exc:
                log.warning("metrics: cannot read the job store: %s", exc)
        up.add_metric([], 0 if counts is None else 1)
        yield up
        if counts is None:
            return
        jobs = GaugeMetricFamily("ale_jobs", "Jobs in the store by state", labels=["state"])
        for state, n in counts.items():
            jobs.add_metric([state.value], n)
        yield jobs
        yield GaugeMetricFamily(
            "ale_queue_depth", "Jobs waiting in the store (QUEUED)", value=counts[JobState.QUEUED]
        )


class EvaluatorMetrics:
    """One evaluator's metrics in a registry of their own; an :class:`.observe.Observer`."""

    def __init__(
        self, *, view: StoreView | None, sessions_open: Callable[[], int], build: dict[str, str]
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._attempts = Counter("ale_job_attempts", "Job attempts started here", registry=r)
        self._ended = Counter(
            "ale_jobs_ended", "Attempts that ended a job", ["state", "source"], registry=r
        )
        self._failures = Counter(
            "ale_job_failures", "Failed attempts by cause", ["cause"], registry=r
        )
        self._job_seconds = Histogram(
            "ale_job_duration_seconds", "An attempt, claim to end", buckets=_JOB_BUCKETS, registry=r
        )
        self._shard_seconds = Histogram(
            "ale_shard_duration_seconds",
            "A shard of episodes on its worker",
            buckets=_SHARD_BUCKETS,
            registry=r,
        )
        self._steps = Counter("ale_agent_steps", "Env steps of agents in sessions", registry=r)
        Gauge("ale_sessions_open", "Interactive sessions open", registry=r).set_function(
            lambda: float(sessions_open())
        )
        Info("ale_evaluator_build", "The evaluator", registry=r).info(build)
        collector: Collector = _StoreCollector(view)
        r.register(collector)

    @classmethod
    def of(cls, evaluator: Evaluator) -> EvaluatorMetrics:
        """Metrics of ``evaluator``; add them to its observers to count (:func:`serve_metrics`)."""
        url = evaluator.config.store_url
        store_kind = parse_store_url(url).kind.value if url else StoreKind.SQLITE.value
        return cls(
            view=StoreView.of(evaluator.store),
            sessions_open=lambda: len(evaluator.sessions),
            build={"version": __version__, "executor": evaluator.pool.kind, "store": store_kind},
        )

    def attempt_started(self) -> None:
        self._attempts.inc()

    def job_ended(self, state: JobState, source: FailureSource, seconds: float) -> None:
        self._ended.labels(state.value, source.value or "none").inc()
        cause = _cause(state, source)
        if cause is not None:
            self._failures.labels(cause).inc()
        self._job_seconds.observe(seconds)

    def job_retried(self, seconds: float) -> None:
        self._failures.labels("retried").inc()
        self._job_seconds.observe(seconds)

    def shard_finished(self, seconds: float) -> None:
        self._shard_seconds.observe(seconds)

    def agent_steps(self, n: int) -> None:
        self._steps.inc(n)


def check_metrics_address(address: str, *, insecure: bool) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); a non-loopback host only with ``insecure`` (the
    endpoint has no authentication: it says what runs, not whose)."""
    where = split_host_port(address)
    if where is None:
        raise InvalidArgumentError(
            f"--metrics-listen {address!r}: give HOST:PORT, e.g. 127.0.0.1:9464"
        )
    if not insecure and not is_loopback(address):
        raise InvalidArgumentError(
            f"--metrics-listen {address}: the metrics endpoint has no authentication; listen "
            "on a loopback address (127.0.0.1:PORT) and scrape through a tunnel or a proxy, "
            "or pass --insecure on a network you trust"
        )
    return where


@dataclass
class MetricsServer:
    """The HTTP endpoint serving one evaluator's metrics, and what it counts."""

    address: str
    """``host:port`` it listens on (the port resolved when 0 was asked for)."""
    metrics: EvaluatorMetrics
    _httpd: WSGIServer
    _stop: Callable[[], None]

    def stop(self) -> None:
        self._stop()
        self._httpd.shutdown()
        self._httpd.server_close()


def serve_metrics(evaluator: Evaluator, address: str, *, insecure: bool = False) -> MetricsServer:
    """Count ``evaluator``'s work and serve it at ``http://ADDRESS/metrics``."""
    host, port = check_metrics_address(address, insecure=insecure)
    metrics = EvaluatorMetrics.of(evaluator)
    try:
        httpd, _ = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise InvalidArgumentError(
            f"--metrics-listen {address}: cannot listen there ({exc.strerror or exc})"
        ) from None
    evaluator.observers.add(metrics)
    shown = f"[{host}]" if ":" in host else host
    return MetricsServer(
        f"{shown}:{httpd.server_port}",
        metrics,
        httpd,
        lambda: evaluator.observers.remove(metrics),
    )
