# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The producers' environment file: NAME=value lines a systemd EnvironmentFile reads literally."""

from __future__ import annotations

import re
from typing import Any

# Values made only of these characters need no quotes in an EnvironmentFile.
PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")

# The role's base environment; enqueue_shards_environment is merged over it. HOSTNAME (a runtime's host name in
# Awa, enqueue_shards_runtime_hostname) is not secret either: the diff shows it.
BASE_ENVIRONMENT = {"AWA_OVERRIDE_REFRESH_MS": "1000"}
SHOWN = (*BASE_ENVIRONMENT, "HOSTNAME")


def _value_text(value: object) -> str:
    """A value as the file holds it, before any quotes (a boolean as YAML writes it)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def quoted(value: object) -> str:
    """The value as systemd reads it back: plain, or in double quotes with \\ and " escaped."""
    text = _value_text(value)
    return text if PLAIN_VALUE.match(text) else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def shown_variables(show: list[str] | None) -> list[str]:
    """The variables whose values the file's diff may show: the role's own and those of ``show``."""
    return sorted({*SHOWN, *(show or [])})


def hidden_values(overrides: dict[str, Any] | None, shown: list[str]) -> list[str]:
    """The values of ``overrides`` that are not ``shown``, as the file holds them: what is never printed."""
    return [text for name, value in (overrides or {}).items() if value is not None and name not in shown
            for text in dict.fromkeys((_value_text(value), quoted(value)))]


def environment_lines(overrides: dict[str, Any] | None, hostname: str | None = None) -> list[str]:
    """Sorted NAME=value lines: ``overrides`` merged over the base environment and ``hostname`` as HOSTNAME (what
    the services' Awa runtimes report as their host name); a null value leaves the name out."""
    return [f"{name}={quoted(value)}" for name, value in sorted(
        {**BASE_ENVIRONMENT, "HOSTNAME": hostname or None, **(overrides or {})}.items()) if value is not None]
