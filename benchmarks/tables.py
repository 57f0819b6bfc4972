"""Plain-text tables for the terminal and for docs/performance.md (Markdown pipes)."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def render(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], note: str = "") -> str:
    """A Markdown table under a title line, columns padded so it also reads well in a terminal."""
    text_rows = [[cell(value) for value in row] for row in rows]
    widths = [max(len(header), *(len(row[index]) for row in text_rows)) if text_rows else len(header)
              for index, header in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(value.ljust(width) for value, width in zip(values, widths)) + " |"

    parts = [f"### {title}", "", line(headers), "|" + "|".join("-" * (width + 2) for width in widths) + "|"]
    parts += [line(row) for row in text_rows]
    if note:
        parts += ["", note]
    return "\n".join(parts) + "\n"
