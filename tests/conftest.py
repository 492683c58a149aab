"""`INFSCALE_COMPILED_CORE=true pytest` runs the whole suite against the policy core's compiled build
(autoscaler/compiledcore.py, `make compiled`), loaded here before any test imports the core; the
commands the tests start inherit the variable, so they load it too."""

from autoscaler import compiledcore

if compiledcore.requested():
    compiledcore.activate_from_settings()
