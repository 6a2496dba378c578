"""Metric values for people: units chosen from the metric's name.

Naming convention of every scenario's metrics: `_s` seconds, `_gbps` GB/s,
`bytes` in the name for byte counts, `error` for relative errors, `_vs_`
for ratios, `fraction` for shares, `diff` for numerical differences. A metric whose value is a mapping is a
group (one per schedule, per stage): its entries are shown indented under it.
Shared by the CLI summary, the app and the HTML export.
"""

from __future__ import annotations

from typing import Any

from runtime.units import format_bytes, format_seconds


def format_metric(name: str, value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            text = format_metric(str(key), item)
            parts.append(f"{key}: ({text})" if isinstance(item, dict) else f"{key}: {text}")
        return ", ".join(parts)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_metric(name, v) for v in value) + "]"
    if not isinstance(value, int | float):
        return str(value)
    if name.endswith("_gbps"):
        return f"{value:.3g} GB/s"
    if "bytes" in name:
        return format_bytes(value)
    if "diff" in name:
        return f"{value:.2g}"
    if "fraction" in name:
        return f"{value:.1%}"
    if name.endswith("error"):
        return f"{value:.1%}"
    if "_vs_" in name:
        return f"{value:.2f}×"
    if name.endswith("_s"):
        return format_seconds(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def metric_lines(metrics: dict[str, Any], indent: str = "  ") -> list[str]:
    """Aligned `name  value` lines; groups (mappings) as a header and indented lines."""
    lines: list[str] = []
    flat = [k for k, v in metrics.items() if not isinstance(v, dict)]
    width = max((len(k) for k in flat), default=0)
    for name, value in metrics.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{name}:")
            lines.extend(metric_lines(value, indent + "  "))
        else:
            lines.append(f"{indent}{name:<{width}}  {format_metric(name, value)}")
    return lines
