"""One evaluation: plan and run its simulations (in this process, over workers, or on Ray), keep the
results file (resume, merge), report."""
