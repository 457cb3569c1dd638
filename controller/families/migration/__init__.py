"""The PtahMigration family: its dispatch and the account of its Applies (the
unresolved run)."""
