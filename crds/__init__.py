"""The CustomResourceDefinitions, shipped as package data (``orbit_crds``) so `orbit apply`
admits resources by the very schemas the cluster uses."""
