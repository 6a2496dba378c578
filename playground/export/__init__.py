"""Exports of an Outcome: offline Plotly HTML (`html`) and Chrome trace-event JSON.

One file (`chrome_trace`), or a folder of one file per rank that HTA and Perfetto
load (`rank_traces` writes each rank's document, `trace_folder` the folder, safely).
"""
