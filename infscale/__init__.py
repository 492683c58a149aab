"""infscale: the command-line front door that ties the autoscaler, adapter and replay together."""
