"""The metric pipeline a cluster has: what a policy can read, and how late (see spec.py)."""
