import os

from hypothesis import settings

# Allow the test-only deterministic entropy hook (dpsense.noise.testing) inside the test process.
os.environ.setdefault("DPSENSE_ALLOW_TEST_ENTROPY", "1")

# Property tests are deterministic by default, so a random draw cannot block a landing: the examples
# are derived from each test function (derandomize), no example database replays an earlier run's
# failure, and a failure prints its reproduction blob. Per-test @settings(max_examples=...) still
# apply on top of the profile (they inherit derandomize). HYPOTHESIS_PROFILE=explore draws fresh
# random examples for a local search for new counterexamples (add any found as an @example).
settings.register_profile("ci", derandomize=True, max_examples=100, deadline=None, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
