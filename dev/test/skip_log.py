"""Reports a Python test (or part of one) that cannot run here, the way dev/test/test_common.h's test_skip does:
prints "<what>: SKIP: <why>" and appends "<what>: <why>" to the file $TEST_SKIP_LOG names, if set (`make test`
lists those lines at its end, so a skipped test is never mistaken for a passed one)."""
import os


def skip(what, why):
    """prints and logs one skip"""
    print(f"{what}: SKIP: {why}")
    path = os.environ.get("TEST_SKIP_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{what}: {why}\n")
