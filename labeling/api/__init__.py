"""REST API of the labelling side."""
