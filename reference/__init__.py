"""Correctness oracles (float64, written for clarity, not speed) and published figures:
the known-systems table of hardware peaks and the papers' reported results."""
