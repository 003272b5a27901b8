"""`tau2-a2a report`: scores with uncertainty, paired comparisons and every trajectory, from tau2 results files.

stats.py computes the figures, report.py reads results files and assembles the
report (JSON, schema in report_schema.json), html.py renders the page.
"""
