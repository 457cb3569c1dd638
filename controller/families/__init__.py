"""What each family (PtahSchema, PtahMigration) supplies to the shared stages: its
dispatch (the ``Family`` it implements) and its records. One family never imports
the other."""
