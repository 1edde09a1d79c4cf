// Package render decides what one cluster receives from a bundle: whether
// the bundle targets it, its options there (customizations merged, values
// templated), its deployment ID, and the Helm release that deploys it.
// The rollout's activities and the offline `flotilla render` command both
// go through here, so what render prints is what a deploy applies.
package render
