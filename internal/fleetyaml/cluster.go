package fleetyaml

// Cluster is what per-cluster processing knows of a cluster. The fields are
// the data of Fleet's ${ } value templates; Name, Labels and Groups are
// also what internal/target matches selectors against.
type Cluster struct {
	// Name is the cluster's name (.ClusterName).
	Name string
	// Namespace is the namespace of Fleet's Cluster object, e.g.
	// fleet-default (.ClusterNamespace).
	Namespace string
	// Labels are the cluster's labels (.ClusterLabels, after Fleet's
	// filtering; see ProcessValues).
	Labels map[string]string
	// Annotations are the cluster's annotations (.ClusterAnnotations,
	// filtered like the labels).
	Annotations map[string]string
	// Values are the cluster's template values, Fleet's
	// Cluster.spec.templateValues (.ClusterValues).
	Values map[string]any
	// Groups are the cluster groups whose selector selects the cluster
	// (target.Memberships).
	Groups []Group
}

// Group is a cluster group the cluster belongs to: its name (which
// clusterGroup matches) and its own labels (which clusterGroupSelector
// matches).
type Group struct {
	Name   string
	Labels map[string]string
}
