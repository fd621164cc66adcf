"""certlabel's certification app: statistics over resolved labels."""
