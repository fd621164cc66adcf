"""REST API of the certification side (token or session auth, like the labelling API)."""
