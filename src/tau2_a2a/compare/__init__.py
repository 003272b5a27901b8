"""`tau2-a2a report`: scores with uncertainty, paired comparisons and every trajectory, from tau2 results files.

runs.py reads results files and the facts of each simulation, stats.py computes
the estimators, report.py assembles the figures (JSON, schema in
report_schema.json), html.py renders the page and output.py writes both.
"""
