"""The glossary page's terms."""

from __future__ import annotations

from leaderboards.schema import (
    is_fraction_metric,
    metric_label,
)


def glossary() -> list[dict[str, str]]:
    """Every metric name the app can show: ``name, label, unit, definition, also_called``. Answer
    and retrieval metrics come from the metric registry (its description and source); judge scores,
    R-Search's EM/F1 mean, counts, answered % and valid format % from ``schema.EXTRA_GLOSSARY``."""
    from harness.metrics.registry import METRICS
    from leaderboards.schema import EXTRA_GLOSSARY

    out = []
    for name in METRICS.names():
        m = METRICS.get(name)
        out.append(
            {
                "name": name,
                "label": metric_label(name),
                "unit": "%",
                "definition": m.description,
                "also_called": m.source,
            }
        )
    for name, (definition, also) in EXTRA_GLOSSARY.items():
        out.append(
            {
                "name": name,
                "label": metric_label(name),
                "unit": "%" if is_fraction_metric(name) else "count",
                "definition": definition,
                "also_called": also,
            }
        )
    return out


__all__ = ["glossary"]
