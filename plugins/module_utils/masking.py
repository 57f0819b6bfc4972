# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What stands for a secret wherever one would be shown, and text with given secrets masked.

Ansible masks a ``no_log`` value only where a string of a result holds it
whole; a message, a diff line or a connection string that holds it as a part
is masked here, before it leaves.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "********"


def masked(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by MASK (the longest first: a secret that holds
    another is masked whole)."""
    for secret in sorted({secret for secret in secrets if secret}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
