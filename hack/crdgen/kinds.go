package main

import (
	"reflect"

	"github.com/flotilla-gitops/flotilla/internal/api"
)

// The JSONPaths of Fleet's printer columns, as Fleet's own CRDs have them
// (charts/fleet-crd/templates/crds.yaml): internal/fleetstatus writes the
// status fields they read.
const (
	// PathReadyMessage is every kind's Status column: the Ready
	// condition's message.
	PathReadyMessage = `.status.conditions[?(@.type=="Ready")].message`
	// PathReadyBundleDeployments is GitRepo's and HelmOp's
	// BundleDeployments-Ready ("ready/desired").
	PathReadyBundleDeployments = ".status.display.readyBundleDeployments"
	// PathReadyClusters is Bundle's BundleDeployments-Ready and
	// ClusterGroup's Clusters-Ready.
	PathReadyClusters = ".status.display.readyClusters"
	// PathReadyBundles is Cluster's and ClusterGroup's Bundles-Ready.
	PathReadyBundles = ".status.display.readyBundles"
	// PathCommit is GitRepo's Commit.
	PathCommit = ".status.commit"
	// PathRepo is GitRepo's Repo.
	PathRepo = ".spec.repo"
	// PathHelmRepo, PathHelmChart and PathHelmVersion are HelmOp's Repo,
	// Chart and Version.
	PathHelmRepo    = ".spec.helm.repo"
	PathHelmChart   = ".spec.helm.chart"
	PathHelmVersion = ".status.version"
	// PathLastSeen is Cluster's Last-Seen (the agent's last contact).
	PathLastSeen = ".status.agent.lastSeen"
	// PathSecretName is ClusterRegistrationToken's Secret-Name.
	PathSecretName = ".status.secretName"
	// PathDefaultServiceAccount and PathAllowedServiceAccounts are
	// GitRepoRestriction's columns.
	PathDefaultServiceAccount  = ".defaultServiceAccount"
	PathAllowedServiceAccounts = ".allowedServiceAccounts"
)

// Column is a printer column (additionalPrinterColumns).
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	JSONPath string `json:"jsonPath"`
}

// Columns are each kind's printer columns, Fleet's, in order.
var Columns = map[string][]Column{
	"GitRepo": {
		{"Repo", "string", PathRepo}, {"Commit", "string", PathCommit},
		{"BundleDeployments-Ready", "string", PathReadyBundleDeployments}, {"Status", "string", PathReadyMessage},
	},
	"HelmOp": {
		{"Repo", "string", PathHelmRepo}, {"Chart", "string", PathHelmChart}, {"Version", "string", PathHelmVersion},
		{"BundleDeployments-Ready", "string", PathReadyBundleDeployments}, {"Status", "string", PathReadyMessage},
	},
	"Cluster": {
		{"Bundles-Ready", "string", PathReadyBundles}, {"Last-Seen", "string", PathLastSeen}, {"Status", "string", PathReadyMessage},
	},
	"ClusterGroup": {
		{"Clusters-Ready", "string", PathReadyClusters}, {"Bundles-Ready", "string", PathReadyBundles}, {"Status", "string", PathReadyMessage},
	},
	"Bundle": {
		{"BundleDeployments-Ready", "string", PathReadyClusters}, {"Status", "string", PathReadyMessage},
	},
	"ClusterRegistrationToken": {{"Secret-Name", "string", PathSecretName}},
	"GitRepoRestriction": {
		{"Default-ServiceAccount", "string", PathDefaultServiceAccount},
		{"Allowed-ServiceAccounts", "string", PathAllowedServiceAccounts},
	},
}

// shape is how a kind's document is laid out.
type shape int

const (
	// withSpec: apiVersion, kind, metadata, spec (typed from Go) and status.
	withSpec shape = iota
	// topLevel: the fields sit beside metadata (GitRepoRestriction, Policy).
	topLevel
	// opaque: spec and status keep whatever they are given (HelmOp's spec
	// is a fleet.yaml; Bundle is a mirror the controller writes).
	opaque
)

// kindDef is what the generator knows of a kind beyond crds.Kinds.
type kindDef struct {
	shape shape
	// typ is the spec type (withSpec) or the document type (topLevel).
	typ reflect.Type
	// status: the kind has a status subresource.
	status      bool
	categories  []string
	description string
}

// kinds are the generator's facts per kind (crds.Kinds names them all).
// Scope, categories and status subresources are Fleet's.
var kinds = map[string]kindDef{
	"GitRepo": {
		shape: withSpec, typ: reflect.TypeFor[api.GitRepoSpec](), status: true, categories: []string{"fleet"},
		description: "GitRepo is a Git repository whose bundles Flotilla deploys to the clusters it targets (Fleet's GitRepo).",
	},
	"HelmOp": {
		shape: opaque, status: true, categories: []string{"fleet"},
		description: "HelmOp deploys one Helm chart from a repository, an OCI registry or a chart archive URL (Fleet's HelmOp). Its spec is a fleet.yaml bundle plus labels, pollingInterval, helmSecretName and insecureSkipTLSVerify.",
	},
	"Cluster": {
		shape: withSpec, typ: reflect.TypeFor[api.ClusterSpec](), status: true,
		description: "Cluster is a Kubernetes cluster Flotilla deploys bundles to (Fleet's Cluster).",
	},
	"ClusterGroup": {
		shape: withSpec, typ: reflect.TypeFor[api.ClusterGroupSpec](), status: true, categories: []string{"fleet"},
		description: "ClusterGroup is a named label selector over clusters (Fleet's ClusterGroup).",
	},
	"ClusterRegistrationToken": {
		shape: withSpec, typ: reflect.TypeFor[api.ClusterRegistrationTokenSpec](), status: true,
		description: "ClusterRegistrationToken is a registration token for agents (Fleet's ClusterRegistrationToken).",
	},
	"GitRepoRestriction": {
		shape: topLevel, typ: reflect.TypeFor[api.GitRepoRestriction](), status: true,
		description: "GitRepoRestriction restricts and defaults the GitRepos of its namespace (Fleet's GitRepoRestriction).",
	},
	"Policy": {
		shape: topLevel, typ: reflect.TypeFor[api.Policy](),
		description: "Policy restricts and defaults the GitRepos and HelmOps of its namespace (Fleet 0.16's Policy).",
	},
	"Bundle": {
		shape: opaque, status: true,
		description: "Bundle is a read-only mirror of one bundle of a GitRepo or HelmOp and its state, written by Flotilla's management controller.",
	},
}
