"""The colours of the playground: one per action kind, one per memory category.

Shared by the terminal widgets (playground.widgets) and the HTML exports
(playground.export), so a kind or a category looks the same in the app and in
a file a learner opens later. Tableau-like hues, distinguishable side by side:
compute kinds in one family, communication in another, barriers grey. A
collective's colour is its kind's (runtime.sim.collective_kinds), so a kind a
lesson registers brings its own.

Imports: runtime.sim.collective_kinds only.
"""

from runtime.sim.collective_kinds import KINDS

KIND_COLORS: dict[str, str] = {
    "F": "#4E79A7",
    "B": "#F28E2B",
    "W": "#EDC948",
    "opt": "#B07AA1",
    "compute": "#76B7B2",
    "reduce": "#9C755F",
    "prefill": "#FF9DA7",
    "decode": "#E15759",
    "sendrecv": "#59A14F",
    "send": "#8CD17D",
    "recv": "#499894",
    **{name: kind.color for name, kind in KINDS.items()},
    "wait": "#6B6B6B",
}

CATEGORY_COLORS: dict[str, str] = {
    "params": "#4E79A7",
    "grads": "#F28E2B",
    "master": "#EDC948",
    "optimizer": "#E15759",
    "activations": "#59A14F",
    "buffers": "#B07AA1",
}

OTHER_COLOR = "#7F7F7F"
