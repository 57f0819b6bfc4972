"""Plain SVG text for the benchmark charts: scales, ticks, colours and a few shapes (no third-party packages).

Every function is pure and deterministic: the same numbers give the same
bytes, so a chart regenerated from the same JSON does not change in git.
Coordinates are rounded to one decimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

FONT = "font-family=\"DejaVu Sans, Verdana, sans-serif\""
INK = "#222222"
GRID = "#dddddd"
# Colour-blind safe series colours (Okabe and Ito).
SERIES = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")


def number(value: float) -> str:
    """A coordinate: one decimal, no trailing zeros."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Scale:
    """A linear map from a data interval to a pixel interval (either may run backwards)."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.high == self.low:
            return (self.start + self.end) / 2
        return self.start + (value - self.low) * (self.end - self.start) / (self.high - self.low)


def nice_step(span: float, count: int) -> float:
    """A round step (1, 2 or 5 times a power of ten) that cuts ``span`` into about ``count`` parts."""
    if span <= 0:
        return 1.0
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    return next(factor * power for factor in (1, 2, 5, 10) if factor * power >= raw)


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values from the first multiple of the step at or below ``low`` to the first at or above ``high``."""
    step = nice_step(high - low, count)
    first, last = math.floor(low / step), math.ceil(high / step)
    return [round(index * step, 10) for index in range(first, last + 1)]


def tick_label(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"


def _mix(low: str, high: str, share: float) -> str:
    channels = [round(int(low[i:i + 2], 16) + (int(high[i:i + 2], 16) - int(low[i:i + 2], 16)) * share)
                for i in (1, 3, 5)]
    return "#" + "".join(f"{channel:02x}" for channel in channels)


GAIN_NEUTRAL, GAIN_UP, GAIN_DOWN = "#f7f7f7", "#2166ac", "#b2182b"


def gain_colour(gain: float | None, limit: float = 4.0) -> str:
    """A diverging colour for a ratio: white at 1, blue above, red below, full at ``limit`` or 1/``limit``
    (symmetric on a log scale, so x2 and x0.5 are equally strong)."""
    if gain is None or gain <= 0:
        return "#ffffff"
    share = max(-1.0, min(1.0, math.log(gain) / math.log(limit)))
    return _mix(GAIN_NEUTRAL, GAIN_UP if share > 0 else GAIN_DOWN, abs(share))


def text_ink(fill: str) -> str:
    """Black or white text, whichever reads better on ``fill``."""
    red, green, blue = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return INK if 0.299 * red + 0.587 * green + 0.114 * blue > 140 else "#ffffff"


def text(x: float, y: float, content: str, size: float = 12, anchor: str = "start", weight: str = "normal",
         fill: str = INK, rotate: float | None = None) -> str:
    transform = f" transform=\"rotate({number(rotate)} {number(x)} {number(y)})\"" if rotate is not None else ""
    bold = " font-weight=\"bold\"" if weight != "normal" else ""
    return (f"<text x=\"{number(x)}\" y=\"{number(y)}\" font-size=\"{number(size)}\" text-anchor=\"{anchor}\""
            f"{bold} fill=\"{fill}\"{transform}>{escape(content)}</text>")


def rect(x: float, y: float, width: float, height: float, fill: str, stroke: str | None = None,
         title: str | None = None) -> str:
    outline = f" stroke=\"{stroke}\"" if stroke else ""
    shape = (f"<rect x=\"{number(x)}\" y=\"{number(y)}\" width=\"{number(width)}\" height=\"{number(height)}\" "
             f"fill=\"{fill}\"{outline}")
    return f"{shape}><title>{escape(title)}</title></rect>" if title else f"{shape}/>"


def line(x1: float, y1: float, x2: float, y2: float, stroke: str = GRID, width: float = 1,
         dash: str | None = None) -> str:
    dashes = f" stroke-dasharray=\"{dash}\"" if dash else ""
    return (f"<line x1=\"{number(x1)}\" y1=\"{number(y1)}\" x2=\"{number(x2)}\" y2=\"{number(y2)}\" "
            f"stroke=\"{stroke}\" stroke-width=\"{number(width)}\"{dashes}/>")


def polyline(points: Sequence[tuple[float, float]], stroke: str, width: float = 2, dash: str | None = None) -> str:
    dashes = f" stroke-dasharray=\"{dash}\"" if dash else ""
    coordinates = " ".join(f"{number(x)},{number(y)}" for x, y in points)
    return f"<polyline points=\"{coordinates}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{number(width)}\"{dashes}/>"


def marker(x: float, y: float, shape: str, colour: str, filled: bool = True, title: str | None = None) -> str:
    """A circle or a square of radius 4 at (x, y); hollow when not ``filled``."""
    fill = colour if filled else "#ffffff"
    if shape == "square":
        body = (f"<rect x=\"{number(x - 4)}\" y=\"{number(y - 4)}\" width=\"8\" height=\"8\" fill=\"{fill}\" "
                f"stroke=\"{colour}\" stroke-width=\"1.5\"")
    else:
        body = f"<circle cx=\"{number(x)}\" cy=\"{number(y)}\" r=\"4\" fill=\"{fill}\" stroke=\"{colour}\" stroke-width=\"1.5\""
    return f"{body}><title>{escape(title)}</title>{'</rect>' if shape == 'square' else '</circle>'}" if title \
        else f"{body}/>"


def document(width: float, height: float, title: str, description: str, body: Sequence[str]) -> str:
    """A standalone SVG file with an accessible title and description."""
    return "\n".join([
        f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{number(width)}\" height=\"{number(height)}\" "
        f"viewBox=\"0 0 {number(width)} {number(height)}\" role=\"img\" aria-labelledby=\"title desc\" {FONT}>",
        f"<title id=\"title\">{escape(title)}</title>",
        f"<desc id=\"desc\">{escape(description)}</desc>",
        "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>",
        *body,
        "</svg>",
    ]) + "\n"
