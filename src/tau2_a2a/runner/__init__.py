"""One evaluation: plan and run its simulations (in this process or on Ray), keep the results file (resume),
and its protocol metrics."""
