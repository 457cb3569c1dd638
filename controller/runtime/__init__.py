"""What runs the passes: one pass in order (``lifecyclepass``), the manager loop
(``reconciler``) and leader election."""
