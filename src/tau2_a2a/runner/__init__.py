"""One evaluation's simulations, run away from the process that keeps its results (see ray_engine)."""
