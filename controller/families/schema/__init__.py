"""The PtahSchema family: its dispatch and the account of its Applies (the proof)."""
