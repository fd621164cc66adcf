"""certlabel's certification app: statistics over resolved labels (see DESIGN.md §4)."""
