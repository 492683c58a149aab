"""The infscale autoscaler: the pure policy core (`autoscaler.policy`) and its callers."""
