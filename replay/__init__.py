"""Offline trace replay: recorded traffic drives a simulated fleet with the production policy in the loop."""
