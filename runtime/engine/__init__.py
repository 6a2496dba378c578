"""The real engine: launch rank processes, run a Program's Actions with
torch.distributed, watch, restart and checkpoint them.

docs/design.md's "launcher" and "worker". It may read the simulator's records
(runtime.sim: Program, Span, the cost model's units) but never fits them
(runtime.fit); torch is imported only inside rank processes.
"""
