"""Pure-Python statistics for certification (numpy/scipy only; never imports Django)."""
