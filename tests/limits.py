"""Time limits shared by the tests that check something returns rather than hangs.

They are hang guards, not speed claims: the suite must pass on a loaded machine (a full CI
run beside other work on 2 shared cores has made a 1-second refusal take 50), so each limit
is generous. How fast a refusal or a job is belongs in ``benchmarks/``.
"""

#: A refusal, a bounded read or a timeout that must return (seconds).
REFUSAL_S = 120.0
#: A whole small job on a test cluster (seconds).
JOB_S = 300.0
