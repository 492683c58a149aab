"""The External Metrics API server (`external.metrics.k8s.io/v1beta1`) that feeds engine signals to HPAs."""
