// Package cluster stores, on the worker's host, what must never travel
// through Temporal: cluster kubeconfigs (Store, <state-dir>/clusters) and
// Git credentials (SecretStore, <state-dir>/secrets). `flotilla cluster
// add` and `flotilla apply` run on the same host as the worker, share its
// --state-dir and write here; the worker reads.
//
// Files are written with mode 0600 in directories created 0700, through a
// temporary file renamed into place, so a reader never sees a partial
// file. Errors and messages name clusters, contexts, secrets and
// directories but never include kubeconfig content, tokens or passwords.
// Names are validated before they become file names, so a name cannot
// escape the store's directory.
//
// A kubeconfig carries data, never commands: CheckKubeconfig refuses, at
// `flotilla cluster add`, every exec or auth-provider plugin, file path
// (tokenFile, client-certificate, client-key, certificate-authority) and
// proxy-url, and SafeRESTConfig, what a controller opens a stored
// kubeconfig with, drops them before client-go sees it.
//
// Connections turns those kubeconfigs (or an agent's in-cluster config)
// into connections to clusters, with the RESTClientGetters Helm uses cached
// per API server and credentials. Registry lists the registered clusters
// and cluster groups, which live in Temporal as entity workflows, through
// the Temporal client (never the workflow or activity packages).
package cluster
