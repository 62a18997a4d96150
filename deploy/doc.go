// Package deploy holds the deployment files (a systemd unit, a container image definition,
// Kubernetes manifests); its test validates them offline against the code: the config keys they
// set exist, the probe path is a route, the grace periods cover the drain.
package deploy
