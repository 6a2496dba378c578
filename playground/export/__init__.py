"""Exports of an Outcome: offline Plotly HTML (`html`) and Chrome trace-event JSON (`chrome_trace`)."""
