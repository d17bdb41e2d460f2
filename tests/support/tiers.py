"""The two test tiers' Hypothesis profiles, and the example counts the property tests ask for.

``scripts/test.py`` picks the profile with Hypothesis's own ``--hypothesis-profile``:

* ``fast`` for the default tier (``python3 scripts/test.py``): a tenth of each test's examples,
  enough to run every strategy and every check on every change in a few minutes;
* ``ci`` for ``scripts/test.py --all`` and ``.ci/run``: Hypothesis's own profile of that name
  (derandomized, no example database, failing blobs printed; Hypothesis loads it by itself when
  ``CI`` is set) with every test's full count, the numbers the issues asked for (10,000
  definition files, 2,000 URLs, ...).

A plain ``pytest`` with no profile runs the full counts too, so a test run by hand judges as CI
does. A test that sets its own ``max_examples`` asks ``examples(full)`` for it: the full count
under ``ci`` (and Hypothesis's default profile), a tenth of it, and never fewer than
``FAST_FLOOR``, under ``fast``.
"""

from __future__ import annotations

from hypothesis import settings

FAST = "fast"
FAST_SHARE = 10
FAST_FLOOR = 5

# On top of whatever profile is loaded when the tests are imported (``ci`` in CI, else ``default``).
settings.register_profile(
    FAST, settings.get_profile(settings.get_current_profile_name()), max_examples=100 // FAST_SHARE
)


def examples(full: int) -> int:
    """The number of examples for a test whose full count is ``full``, in the loaded tier."""
    if settings.get_current_profile_name() != FAST:
        return full
    return min(full, max(FAST_FLOOR, full // FAST_SHARE))
