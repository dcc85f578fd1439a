"""The checks of the Python tests: each prints "ok   <what>" or "FAIL <what>" (a failure's detail indented on the
next line) and is counted; summary prints "<test>: N passed, M failed" and gives the test's exit status."""
passed = failed = 0


def check(ok, what, detail=""):
    """prints and counts one check"""
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}" + (f"\n     {detail}" if detail else ""))


def summary(test):
    """prints the counts of the checks so far; returns the exit status: 1 if one failed, else 0"""
    print(f"{test}: {passed} passed, {failed} failed")
    return 1 if failed else 0


def run(cmd, env=None, timeout=120):
    """runs cmd with env added to the environment -> (exit status, stdout, stderr)"""
    import os
    import subprocess
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    return p.returncode, p.stdout, p.stderr
