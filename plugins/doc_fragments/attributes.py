# Copyright: awa.operations contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Standard attribute texts: a module lists this fragment and states its support levels."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  async:
    description: Supports being used with the C(async) keyword.
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
  async:
    description: Supports being used with the C(async) keyword.
"""

    # Every module is in the action group awa (meta/runtime.yml): one
    # module_defaults entry for group/awa.operations.awa sets the connection of all.
    ACTION_GROUP = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/awa.operations.awa) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - awa.operations.awa
"""
