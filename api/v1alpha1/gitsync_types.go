package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GitSyncDeletionPolicy is what deleting a GitSync does to its objects.
// +kubebuilder:validation:Enum=Orphan;Delete
type GitSyncDeletionPolicy string

const (
	// DeletionOrphan leaves a deleted GitSync's objects on the cluster.
	DeletionOrphan GitSyncDeletionPolicy = "Orphan"
	// DeletionDelete prunes a GitSync's objects before it is deleted.
	DeletionDelete GitSyncDeletionPolicy = "Delete"
)

// FinalizerGitSyncPrune holds a GitSync with DeletionPolicy Delete until
// its objects are pruned.
const FinalizerGitSyncPrune = "agentsandbox.dev/prune-on-delete"

// GitSyncSpec points the reconciler at a directory of declarations in a Git
// repository and says how often and how to converge the cluster to it.
type GitSyncSpec struct {
	// URL of the repository: https://, http:// or ssh:// (or scp-like
	// git@host:path).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^((https?|ssh)://[^\s]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+)$`
	// +required
	URL string `json:"url"`

	// Ref is the branch, tag or commit to follow; the branch main when unset.
	// +kubebuilder:default={branch: main}
	// +optional
	Ref GitRef `json:"ref,omitzero"`

	// Path of the directory inside the repository holding the declarations.
	// +kubebuilder:default="./"
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(p, p == '..')",message="path must stay inside the repository: '..' is not allowed"
	// +optional
	Path string `json:"path,omitempty"`

	// Interval between syncs (jittered), e.g. 5m.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	Interval metav1.Duration `json:"interval,omitzero"`

	// RetryInterval is how soon a failed sync is tried again (jittered),
	// e.g. 30s; without it, after Interval. With a long Interval, a Git
	// server that was down or a fix pushed after a broken revision is then
	// picked up without waiting the Interval out.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	RetryInterval metav1.Duration `json:"retryInterval,omitzero"`

	// Timeout of one sync: fetch, apply and health wait.
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	Timeout metav1.Duration `json:"timeout,omitzero"`

	// Prune deletes objects an earlier revision applied and the current one
	// no longer declares.
	// +kubebuilder:default=true
	// +optional
	Prune *bool `json:"prune,omitempty"`

	// Suspend stops syncing without deleting anything.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// DeletionPolicy is what deleting the GitSync does to the objects it
	// applied: Orphan (the default) leaves them on the cluster as they are;
	// Delete prunes them first, as a sync of an empty revision would
	// (sandboxes first, node pools last, never an object annotated
	// agentsandbox.dev/prune: disabled or labelled as another GitSync's),
	// and the GitSync goes once they are deleted. A suspended GitSync
	// orphans them whatever the policy.
	// +kubebuilder:default=Orphan
	// +optional
	DeletionPolicy GitSyncDeletionPolicy `json:"deletionPolicy,omitempty"`

	// SecretRef names a Secret in the reconciler's namespace with the
	// credentials: username and password (or a token as password) for HTTPS,
	// identity and known_hosts for SSH.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// ServiceAccountName is a ServiceAccount in the reconciler's namespace
	// the sync reads, validates, applies and prunes as, so a repository can
	// only change what that account may (a team's repository its own
	// sandboxes, say, and no node pools). It needs get, list, create, patch
	// and delete on the kinds the repository declares, and get on those
	// they reference. Unset, the sync acts as the reconciler.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// GitRef selects a revision: at most one of branch, tag and commit.
// +kubebuilder:validation:XValidation:rule="[has(self.branch), has(self.tag), has(self.commit)].filter(x, x).size() == 1",message="set exactly one of branch, tag and commit"
type GitRef struct {
	// Branch to follow.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s~^:?*\[\\]+$`
	// +optional
	Branch string `json:"branch,omitempty"`
	// Tag to check out.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^\s~^:?*\[\\]+$`
	// +optional
	Tag string `json:"tag,omitempty"`
	// Commit SHA to check out.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{40}([a-f0-9]{24})?$`
	// +optional
	Commit string `json:"commit,omitempty"`
}

// InventoryEntry identifies one object a GitSync applied.
type InventoryEntry struct {
	// ID is group_kind_name, as Flux writes it (cluster-scoped: no namespace).
	// +required
	ID string `json:"id"`
	// Version is the API version the object was applied with.
	// +required
	Version string `json:"v"`
}

// GitSyncStatus is the observed state of a GitSync.
type GitSyncStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastHandledReconcileAt is the last reconcile-requested-at annotation
	// value acted on.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// LastFetchedRevision is the newest revision fetched (branch@sha1:...).
	// +optional
	LastFetchedRevision string `json:"lastFetchedRevision,omitempty"`
	// LastAttemptedRevision is the revision the last sync tried to apply.
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastAppliedRevision is the last revision applied successfully.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`
	// Inventory lists the objects this GitSync may have on the cluster:
	// after a successful sync, exactly what it applied; during a sync, or
	// after one that failed or was interrupted, also what that sync was
	// about to create. The next sync prunes those it no longer declares.
	// +listType=atomic
	// +optional
	Inventory []InventoryEntry `json:"inventory,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GitSync converges the cluster to the declarations in a Git repository.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gsync,categories=agentsandbox
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && self.metadata.name.size() <= 63",message="metadata.name must be a DNS label of at most 63 characters"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GitSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GitSyncSpec `json:"spec"`
	// +optional
	Status GitSyncStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (fluxcd/pkg/runtime Getter).
func (in *GitSync) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions (fluxcd/pkg/runtime Setter).
func (in *GitSync) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// GitSyncList is a list of GitSyncs.
//
// +kubebuilder:object:root=true
type GitSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitSync `json:"items"`
}

func init() {
	register(&GitSync{}, &GitSyncList{})
}
