"""Pieces a pass is built from that know nothing of a pass: the phase machine, the
vocabulary, Events, the realm's Lease, the admission snapshot, plans, approvals,
settlements, claim identity, fault points and the manager's configuration. They import
only each other and ``mutationlifecycle``."""
