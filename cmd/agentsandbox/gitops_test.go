package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/fluxcd/pkg/runtime/conditions"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/gittest"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// runCLI runs the command against the test cluster and returns its output
// and exit code.
func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	t.Setenv("KUBECONFIG", testcluster.Get(t).Kubeconfig)
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var exit *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String() + exit.Error(), exit.code
	default:
		return out.String() + err.Error(), 1
	}
}

func writeDecl(t *testing.T, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiffAndSyncOnce(t *testing.T) {
	dir := t.TempDir()
	pool := testcluster.Name("cli")
	c := testcluster.Get(t).Client
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}) })
	decl := poolDecl(pool, "")
	writeDecl(t, dir, "pool.yaml", decl)

	out, code := runCLI(t, "diff", "--path", dir)
	if code != 1 || !strings.Contains(out, "+ NodePool/"+pool+" (pool.yaml, document 1): created") {
		t.Fatalf("diff before the first sync: exit %d, output:\n%s", code, out)
	}
	out, code = runCLI(t, "sync", "--once", "--path", dir)
	if code != 0 || !strings.Contains(out, pool+" created") {
		t.Fatalf("sync --once: exit %d, output:\n%s", code, out)
	}
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 0 || !strings.Contains(out, "no changes") {
		t.Fatalf("diff after the sync: exit %d, output:\n%s", code, out)
	}

	writeDecl(t, dir, "pool.yaml", strings.Replace(decl, "node-group: gvisor", "node-group: general", 1))
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 1 || !strings.Contains(out, `spec.nodeSelector.agentsandbox.dev/node-group: "gvisor" → "general"`) {
		t.Fatalf("diff of a change: exit %d, output:\n%s", code, out)
	}
	got := &v1.NodePool{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pool}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeSelector["agentsandbox.dev/node-group"] != "gvisor" {
		t.Errorf("diff changed the cluster: %v", got.Spec.NodeSelector)
	}

	writeDecl(t, dir, "pool.yaml", decl+"  runtimeHandlr: x\n")
	out, code = runCLI(t, "diff", "--path", dir)
	if code != 2 || !strings.Contains(out, `pool.yaml, document 1: NodePool: line 9: unknown field "spec.runtimeHandlr"`) {
		t.Fatalf("diff of an invalid declaration: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "diff", "--path", filepath.Join(dir, "nope")); code != 2 || !strings.Contains(out, "--path "+filepath.Join(dir, "nope")+": no such directory") {
		t.Errorf("diff of a missing directory: exit %d, output:\n%s", code, out)
	}
	if _, code = runCLI(t, "sync", "--path", dir); code != 1 {
		t.Errorf("sync without --once: exit %d", code)
	}

	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"deploy/pool.yaml": strings.Replace(decl, "node-group: gvisor", "node-group: general", 1)})
	out, code = runCLI(t, "diff", "--git", srv.URL(), "--branch", "main", "--path", "deploy")
	if code != 1 || !strings.Contains(out, `spec.nodeSelector.agentsandbox.dev/node-group: "gvisor" → "general"`) {
		t.Fatalf("diff --git: exit %d, output:\n%s", code, out)
	}
	if out, code = runCLI(t, "diff", "--git", srv.URL(), "--branch", "nope"); code != 2 || !strings.Contains(out, `branch "nope" not found`) {
		t.Fatalf("diff --git of a missing branch: exit %d, output:\n%s", code, out)
	}
}

func poolDecl(name, extra string) string {
	return "apiVersion: agentsandbox.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: " + name + "\n" + extra +
		"spec:\n  runtimeHandler: runsc\n  nodeSelector:\n    agentsandbox.dev/node-group: gvisor\n"
}

// newGitSync creates a GitSync of the repository on the cluster that syncs
// hourly (and when asked), deleted with the node pools it applies when the
// test ends.
func newGitSync(t *testing.T, url string, pools ...string) *v1.GitSync {
	t.Helper()
	c := testcluster.Get(t).Client
	gs := &v1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: testcluster.Name("gs")}, Spec: v1.GitSyncSpec{
		URL: url, Ref: v1.GitRef{Branch: "main"}, Interval: metav1.Duration{Duration: time.Hour},
	}}
	if err := c.Create(context.Background(), gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), gs)
		for _, name := range pools {
			_ = c.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	return gs
}

// TestDiffShowsPrunes: with --gitsync, diff compares with a GitSync the
// real reconciler synced: what its inventory lists and the directory no
// longer declares is shown as pruned, unless annotated prune: disabled or
// labelled as another GitSync's, and only while spec.prune is not false.
func TestDiffShowsPrunes(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	kept, gone, keep := testcluster.Name("kept"), testcluster.Name("gone"), testcluster.Name("keep")
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{
		"kept.yaml": poolDecl(kept, ""),
		"gone.yaml": poolDecl(gone, ""),
		"keep.yaml": poolDecl(keep, "  annotations:\n    agentsandbox.dev/prune: disabled\n"),
	})
	gs := newGitSync(t, srv.URL(), kept, gone, keep)
	startReconciler(t, cluster)
	testcluster.Eventually(t, "the GitSync to apply its three pools", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil {
			return false, err.Error()
		}
		return len(gs.Status.Inventory) == 3 && gs.Status.LastAppliedRevision != "", fmt.Sprintf("%+v", gs.Status)
	})

	dir := t.TempDir()
	writeDecl(t, dir, "kept.yaml", poolDecl(kept, ""))
	out, code := runCLI(t, "diff", "--path", dir, "--gitsync", gs.Name)
	if code != 1 || !strings.Contains(out, "- NodePool/"+gone+": pruned") {
		t.Fatalf("diff --gitsync without two of the three pools: exit %d, output:\n%s", code, out)
	}
	if strings.Contains(out, keep) || strings.Contains(out, "~ NodePool/"+kept) {
		t.Errorf("diff shows the prune-disabled pool or a change of the one still declared:\n%s", out)
	}
	if p := (&v1.NodePool{}); c.Get(ctx, client.ObjectKey{Name: gone}, p) != nil {
		t.Error("diff deleted the pool it shows as pruned")
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--gitsync", "nope"); code != 2 || !strings.Contains(out, `GitSync "nope" not found`) {
		t.Errorf("diff --gitsync of a missing GitSync: exit %d, output:\n%s", code, out)
	}

	// Moved to another GitSync's repository: the label says so, no prune.
	moved := &v1.NodePool{}
	if err := c.Get(ctx, client.ObjectKey{Name: gone}, moved); err != nil {
		t.Fatal(err)
	}
	relabel := func(owner string) {
		t.Helper()
		base := moved.DeepCopy()
		moved.Labels["agentsandbox.dev/gitsync"] = owner
		if err := c.Patch(ctx, moved, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
	relabel("another")
	if out, code := runCLI(t, "diff", "--path", dir, "--gitsync", gs.Name); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("diff of a pool labelled as another GitSync's: exit %d, output:\n%s", code, out)
	}

	relabel(gs.Name)
	base := gs.DeepCopy()
	gs.Spec.Prune = ptr.To(false)
	if err := c.Patch(ctx, gs, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--gitsync", gs.Name); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("diff against a GitSync with prune: false: exit %d, output:\n%s", code, out)
	}
}

// TestSyncOnceWithNamePrunes: sync --once --name labels what it applies,
// and a later run prunes what is labelled so and no longer declared, as
// diff --name shows first; never an object annotated prune: disabled, one
// a remaining declaration references, or with a GitSync of the name.
func TestSyncOnceWithNamePrunes(t *testing.T) {
	c := testcluster.Get(t).Client
	ctx := context.Background()
	name := testcluster.Name("pipeline")
	kept, gone, keep, tpl := testcluster.Name("kept"), testcluster.Name("gone"), testcluster.Name("keep"), testcluster.Name("tpl")
	t.Cleanup(func() {
		_ = c.Delete(ctx, &v1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: tpl}})
		for _, pool := range []string{kept, gone, keep} {
			_ = c.Delete(ctx, &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}})
		}
	})
	dir := t.TempDir()
	writeDecl(t, dir, "kept.yaml", poolDecl(kept, ""))
	writeDecl(t, dir, "gone.yaml", poolDecl(gone, ""))
	writeDecl(t, dir, "keep.yaml", poolDecl(keep, "  annotations:\n    agentsandbox.dev/prune: disabled\n"))
	if out, code := runCLI(t, "sync", "--once", "--path", dir, "--name", name); code != 0 {
		t.Fatalf("first sync --once --name: exit %d, output:\n%s", code, out)
	}
	for _, pool := range []string{kept, gone, keep} {
		got := &v1.NodePool{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, got); err != nil || got.Labels["agentsandbox.dev/gitsync"] != name {
			t.Fatalf("NodePool %s after the sync: %v, labels %v", pool, err, got.Labels)
		}
	}

	// A template still referencing a pool about to be pruned: refused,
	// nothing applied, nothing pruned.
	if err := os.Remove(filepath.Join(dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	writeDecl(t, dir, "tpl.yaml", "apiVersion: agentsandbox.dev/v1alpha1\nkind: SandboxTemplate\nmetadata:\n  name: "+tpl+
		"\nspec:\n  image: python:3.12\n  nodePoolRef:\n    name: "+gone+"\n")
	out, code := runCLI(t, "sync", "--once", "--path", dir, "--name", name)
	if code != 1 || !strings.Contains(out, "tpl.yaml, document 1: SandboxTemplate \""+tpl+"\": spec.nodePoolRef.name: NodePool \""+gone+"\" is no longer declared and would be pruned") {
		t.Fatalf("sync --once referencing a pool it would prune: exit %d, output:\n%s", code, out)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: tpl}, &v1.SandboxTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused sync applied the template: %v", err)
	}

	if err := os.Remove(filepath.Join(dir, "tpl.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "keep.yaml")); err != nil {
		t.Fatal(err)
	}
	out, code = runCLI(t, "diff", "--path", dir, "--name", name)
	if code != 1 || !strings.Contains(out, "- NodePool/"+gone+": pruned (labelled agentsandbox.dev/gitsync="+name+", no longer declared)") || strings.Contains(out, keep) {
		t.Fatalf("diff --name: exit %d, output:\n%s", code, out)
	}
	out, code = runCLI(t, "sync", "--once", "--path", dir, "--name", name)
	if code != 0 || !strings.Contains(out, "NodePool/"+gone+" deleted") {
		t.Fatalf("sync --once --name without a pool: exit %d, output:\n%s", code, out)
	}
	testcluster.Eventually(t, "the pruned pool to be gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: gone}, &v1.NodePool{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	for _, pool := range []string{kept, keep} {
		if err := c.Get(ctx, client.ObjectKey{Name: pool}, &v1.NodePool{}); err != nil {
			t.Errorf("NodePool %s after the prune: %v", pool, err)
		}
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--name", name); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("diff --name after the prune: exit %d, output:\n%s", code, out)
	}

	gs := &v1.GitSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.GitSyncSpec{URL: "https://git.invalid/x.git", Suspend: true}}
	if err := c.Create(ctx, gs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, gs) })
	if out, code := runCLI(t, "sync", "--once", "--path", dir, "--name", name); code != 1 || !strings.Contains(out, "a GitSync of that name is on the cluster") {
		t.Errorf("sync --once --name of a GitSync: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--name", "not a label"); code != 2 || !strings.Contains(out, `--name "not a label"`) {
		t.Errorf("diff --name of an invalid label value: exit %d, output:\n%s", code, out)
	}
}

// TestGitOpsCommandsActAs: with --as, diff and sync --once act as the user
// named, as a GitSync with serviceAccountName does: what the account may
// not do is an error naming the file, and nothing is applied.
func TestGitOpsCommandsActAs(t *testing.T) {
	c := testcluster.Get(t).Client
	pool := testcluster.Name("as")
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}) })
	dir := t.TempDir()
	writeDecl(t, dir, "pool.yaml", poolDecl(pool, ""))
	account := "system:serviceaccount:agentsandbox-system:" + testcluster.Name("nobody")
	for _, args := range [][]string{{"diff"}, {"sync", "--once"}} {
		out, code := runCLI(t, append(args, "--path", dir, "--as", account)...)
		if code == 0 || !strings.Contains(out, "pool.yaml, document 1") || !strings.Contains(out, "forbidden") {
			t.Errorf("%s --as an account without rights: exit %d, output:\n%s", args[0], code, out)
		}
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pool}, &v1.NodePool{}); !apierrors.IsNotFound(err) {
		t.Errorf("sync --once --as an account without rights applied the pool: %v", err)
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--as-group", "system:masters"); code != 2 || !strings.Contains(out, "--as-group needs --as") {
		t.Errorf("diff --as-group without --as: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "diff", "--path", dir, "--as", "admin", "--as-group", "system:masters"); code != 1 || !strings.Contains(out, "+ NodePool/"+pool) {
		t.Errorf("diff --as a member of system:masters: exit %d, output:\n%s", code, out)
	}
}

// TestSyncGitSyncWaitsForTheOutcome: sync --gitsync has the GitSync on the
// cluster sync now and waits for it: exit 0 with the revision applied, exit
// 1 with the reason when the revision is broken; a suspended or missing
// GitSync is an error.
func TestSyncGitSyncWaitsForTheOutcome(t *testing.T) {
	cluster := testcluster.Get(t)
	c := cluster.Client
	ctx := context.Background()
	pool := testcluster.Name("request")
	srv := gittest.New(t, "", "")
	srv.Commit("main", map[string]string{"pool.yaml": poolDecl(pool, "")})
	gs := newGitSync(t, srv.URL(), pool)
	startReconciler(t, cluster)

	changed := srv.Commit("main", map[string]string{"pool.yaml": strings.Replace(poolDecl(pool, ""), "node-group: gvisor", "node-group: general", 1)})
	out, code := runCLI(t, "sync", "--gitsync", gs.Name)
	if code != 0 || !strings.Contains(out, "GitSync "+gs.Name+": sync requested") || !strings.Contains(out, "GitSync "+gs.Name+": applied revision main@sha1:"+changed) {
		t.Fatalf("sync --gitsync of a new commit: exit %d, output:\n%s", code, out)
	}
	got := &v1.NodePool{}
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, got); err != nil || got.Spec.NodeSelector["agentsandbox.dev/node-group"] != "general" {
		t.Errorf("the pool after sync --gitsync returned: %v %v", err, got.Spec.NodeSelector)
	}

	srv.Commit("main", map[string]string{"pool.yaml": poolDecl(pool, "") + "  runtimeHandlr: x\n"})
	out, code = runCLI(t, "sync", "--gitsync", gs.Name)
	if code != 1 || !strings.Contains(out, `pool.yaml, document 1: NodePool: line 9: unknown field "spec.runtimeHandlr"`) {
		t.Errorf("sync --gitsync of a broken commit: exit %d, output:\n%s", code, out)
	}

	if out, code := runCLI(t, "sync", "--gitsync", gs.Name, "--once"); code != 1 || !strings.Contains(out, "takes no --once") {
		t.Errorf("sync --gitsync --once: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "sync", "--gitsync", "nope"); code != 1 || !strings.Contains(out, `GitSync "nope" not found`) {
		t.Errorf("sync --gitsync of a missing GitSync: exit %d, output:\n%s", code, out)
	}

	// Suspended from the CLI: Ready says so, and nothing syncs until
	// resumed, which syncs at once and waits for the outcome.
	if out, code := runCLI(t, "suspend", "gitsync", gs.Name); code != 0 || !strings.Contains(out, "GitSync "+gs.Name+" suspended") {
		t.Fatalf("suspend gitsync: exit %d, output:\n%s", code, out)
	}
	testcluster.Eventually(t, "Ready to say suspended", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gs), gs); err != nil {
			return false, err.Error()
		}
		msg := conditions.GetMessage(gs, v1.ReadyCondition)
		return strings.HasPrefix(msg, "suspended (spec.suspend: true)") && strings.Contains(msg, "unknown field"), msg
	})
	if out, code := runCLI(t, "sync", "--gitsync", gs.Name); code != 1 || !strings.Contains(out, "is suspended") {
		t.Errorf("sync --gitsync of a suspended GitSync: exit %d, output:\n%s", code, out)
	}
	fixed := srv.Commit("main", map[string]string{"pool.yaml": poolDecl(pool, "")})
	out, code = runCLI(t, "resume", "gitsync", gs.Name)
	if code != 0 || !strings.Contains(out, "GitSync "+gs.Name+": applied revision main@sha1:"+fixed) {
		t.Errorf("resume gitsync: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "suspend", "gitsyncs", gs.Name); code != 1 || !strings.Contains(out, "usage: agentsandbox suspend gitsync NAME") {
		t.Errorf("suspend of another kind: exit %d, output:\n%s", code, out)
	}
}

// TestGitCredentials: diff and sync --once read a repository that needs
// credentials, given as files or environment variables, over HTTP (basic
// auth, token) and SSH (key and known_hosts).
func TestGitCredentials(t *testing.T) {
	pool := testcluster.Name("creds")
	c := testcluster.Get(t).Client
	t.Cleanup(func() { _ = c.Delete(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}) })
	srv := gittest.New(t, "bot", "s3cret")
	srv.Commit("main", map[string]string{"deploy/pool.yaml": poolDecl(pool, "")})
	files := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(files, name)
		writeDecl(t, files, name, content)
		return p
	}
	created := "+ NodePool/" + pool + " (pool.yaml, document 1): created"
	diff := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"diff", "--path", "deploy"}, args...)...)
	}

	if out, code := diff("--git", srv.URL()); code != 2 || !strings.Contains(out, "authentication required") {
		t.Errorf("diff without credentials: exit %d, output:\n%s", code, out)
	}
	wrong := file("wrong", "not-it\n")
	if out, code := diff("--git", srv.URL(), "--git-username", "bot", "--git-password-file", wrong); code != 2 ||
		!strings.Contains(out, "authentication required") || strings.Contains(out, "not-it") {
		t.Errorf("diff with a wrong password: exit %d, output:\n%s", code, out)
	}
	if out, code := diff("--git", srv.URL(), "--git-password-file", filepath.Join(files, "missing")); code != 2 ||
		!strings.Contains(out, "--git-password-file: open "+filepath.Join(files, "missing")) {
		t.Errorf("diff with a missing password file: exit %d, output:\n%s", code, out)
	}
	password := file("password", "s3cret\n")
	if out, code := diff("--git", srv.URL(), "--git-username", "bot", "--git-password-file", password); code != 1 || !strings.Contains(out, created) {
		t.Errorf("diff with basic auth from a file: exit %d, output:\n%s", code, out)
	}
	if out, code := runCLI(t, "diff", "--path", files, "--git-password-file", password); code != 2 || !strings.Contains(out, "need --git") {
		t.Errorf("credentials without --git: exit %d, output:\n%s", code, out)
	}

	identity, public := gittest.ClientKey(t)
	sshURL, knownHosts := srv.ServeSSH(public)
	id, hosts := file("id", string(identity)), file("known_hosts", knownHosts+"\n")
	if out, code := diff("--git", sshURL, "--git-identity-file", id, "--git-known-hosts-file", hosts); code != 1 || !strings.Contains(out, created) {
		t.Errorf("diff over SSH: exit %d, output:\n%s", code, out)
	}
	_, otherHost := gittest.ClientKey(t)
	host, _, _ := strings.Cut(knownHosts, " ")
	otherHosts := file("other_hosts", host+" "+string(ssh.MarshalAuthorizedKey(otherHost)))
	if out, code := diff("--git", sshURL, "--git-identity-file", id, "--git-known-hosts-file", otherHosts); code != 2 || !strings.Contains(out, "key mismatch") {
		t.Errorf("diff over SSH against a host key not in known_hosts: exit %d, output:\n%s", code, out)
	}
	t.Setenv("HOME", t.TempDir()) // no ~/.ssh/known_hosts to fall back on
	if out, code := diff("--git", sshURL, "--git-identity-file", id); code != 2 ||
		!strings.Contains(out, "--git-known-hosts-file (or $AGENTSANDBOX_GIT_KNOWN_HOSTS)") {
		t.Errorf("diff over SSH without known_hosts: exit %d, output:\n%s", code, out)
	}

	t.Setenv("AGENTSANDBOX_GIT_USERNAME", "bot")
	t.Setenv("AGENTSANDBOX_GIT_TOKEN", "s3cret")
	out, code := runCLI(t, "sync", "--once", "--git", srv.URL(), "--path", "deploy")
	if code != 0 || !strings.Contains(out, pool+" created") {
		t.Fatalf("sync --once with a token from the environment: exit %d, output:\n%s", code, out)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pool}, &v1.NodePool{}); err != nil {
		t.Errorf("sync --once did not create the pool: %v", err)
	}
}

// TestDiffPrintsNoClientLogging: the built binary diffs 60 declarations (a
// dry run each) without client-go's throttling (5 requests a second by
// default) and so without its log lines ("Waited … due to client-side
// throttling"), which scripts would read as output.
func TestDiffPrintsNoClientLogging(t *testing.T) {
	dir, run := t.TempDir(), testcluster.Name("quiet")
	for file, decl := range testcluster.TemplateFiles(map[string]string{}, "t", 60, run) {
		writeDecl(t, dir, strings.ReplaceAll(file, "/", "-"), decl)
	}
	cmd := command(t, testcluster.Developer{Kubeconfig: testcluster.Get(t).Kubeconfig}, "diff", "--path", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || strings.Count(stdout.String(), ": created") != 60 {
		t.Errorf("diff of 60 new templates: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if klogLine := regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d`); klogLine.MatchString(stdout.String() + stderr.String()) {
		t.Errorf("client-go's log lines in the output:\n%s%s", stdout.String(), stderr.String())
	}
}
