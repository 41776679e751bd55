"""Reading chainfence's metrics as Prometheus does: the text format, parsed by prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of ``text`` (the exposition format): (name, labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape_in_process() -> Samples:
    """This process's metrics, as an HTTP scrape would read them (enabling them)."""
    from chainfence.metrics import exposition

    body, content_type = exposition()
    assert content_type.startswith("text/plain"), content_type
    return parse(body.decode("utf-8"))


def scrape(url: str, timeout: float = 30.0) -> Samples:
    """GET ``url`` (a ``/metrics`` endpoint) and parse it."""
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain"), reply.headers["Content-Type"]
        return parse(reply.read().decode("utf-8"))


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` (0 when it was never counted: a counter's start)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def series(samples: Samples, prefix: str = "chainfence_") -> set[tuple[str, frozenset[tuple[str, str]]]]:
    """The series of chainfence's metrics (not the process collector's)."""
    return {key for key in samples if key[0].startswith(prefix)}
