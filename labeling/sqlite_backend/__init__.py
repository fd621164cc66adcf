"""The SQLite database backend of the embedded default: Django's, with queued writers."""
