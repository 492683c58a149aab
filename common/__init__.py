"""What the adapter, the controller, the load gate and the emulator each need, written once.

A neutral package: it imports nothing from `adapter`, `autoscaler`, `replay` or `infscale`, and all of
them may import it (tests/test_import_rules.py). One module per concern:

  listen      `host:port` listen addresses, parsed as Go's net.SplitHostPort reads them
  selector    Kubernetes label selectors: parse, match, canonical string (apimachinery pkg/labels)
  status      metav1.Status error bodies: build one, read one
  kubeconfig  the Kubernetes client configuration: a kubeconfig file, in-cluster, or ~/.kube/config
  listwatch   informer-style caches: list (paginated) + watch with resourceVersions and bookmarks
  clock       the clock protocol, and a manual clock for tests
"""
