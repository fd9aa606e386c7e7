"""`refbench tune`: from what limits a stack to a change proven by measurement.

1. A baseline run of the suite (or one given), its bottleneck in the database's words (the wait profile's meanings)
   and the host's (device, CPU).
2. Candidate changes that address it first (knobs.py: engine settings; host.py: host settings with --apply-host;
   a suite's own tune_knobs), each with why it was tried.
3. Each candidate is a trial (trials.py): the suite narrowed to its headline case, run A (the configuration so far)
   and B (with the change) in turns, A B B A (pairs alternating A B, B A, so that a drift falls on both sides), and
   judged by the one estimator every comparison uses (refbench.estimate: Student's pooled t-test on the logarithms,
   each run a replicate); kept only when B is significantly better by at least 1%, and then part of A for the next trials. A
   numeric knob's values come from Optuna's TPE sampler, a few A/B trials each, the first at the rule of thumb. Once
   the search is over, a kept trial that a Bonferroni adjustment for every trial tried would not keep says so.
4. The kept set is confirmed by a fresh A/B against the baseline's configuration, A B B A, spread over two
   independently loaded databases where runs start from copies of one (a second loaded for it), each with both
   sides, so that its interval holds the load-to-load spread; at the baseline's window when that fits the budget,
   else the trials', and the answer says which. Unconfirmed, or nothing kept: the answer is "keep the defaults".
5. Every trial stops at the budget: a trial starts only when it and the confirmation (its second load included)
   fit in what is left, so any budget ends with an answer.

The tune directory (RUNS_DIR/tune/STAMP-SUITE/) holds tune.json (the journey), every trial's run, tune.log (their
output), tuned-plan.toml, tuned-host.sh and tuned.conf (host settings, when kept) and report.html.
"""
