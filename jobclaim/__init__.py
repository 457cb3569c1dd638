"""jobclaim."""
