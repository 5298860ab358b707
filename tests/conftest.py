import os

# Allow the test-only deterministic entropy hook (dpsense.noise.testing) inside the test process.
os.environ.setdefault("DPSENSE_ALLOW_TEST_ENTROPY", "1")
