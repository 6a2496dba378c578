"""The simulator: Programs, the cost model and the virtual clock that runs them.

docs/design.md's "one program, two engines": a lesson's Program is data, and this
room predicts its timeline without a process, a socket or torch. It imports only
the standard library and numpy (checked by import-linter: neither runtime.engine
nor runtime.fit).
"""
