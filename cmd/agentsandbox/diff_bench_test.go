package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/agentsandbox/terraform-provider-agentsandbox/api/v1alpha1"
	"github.com/agentsandbox/terraform-provider-agentsandbox/internal/testharness/testcluster"
)

// BenchmarkDiff measures `agentsandbox diff` (the built binary, as a user
// runs it) of 1,000 template declarations, half of them on the cluster
// and changed, half new: a dry run each. The floor is `kubectl diff
// --server-side` of the same directory in the same run, which also dry-runs
// every object. Neither may print client-go's throttling messages.
//
//	make bench-gitops (go test -run '^$' -bench Diff -benchtime 1x ./cmd/agentsandbox/)
func BenchmarkDiff(b *testing.B) {
	const n = 1000
	cluster := testcluster.Get(b)
	dir := b.TempDir()
	prefix := testcluster.Name("diff")
	ctx := context.Background()
	b.Cleanup(func() {
		_ = cluster.Client.DeleteAllOf(ctx, &v1.SandboxTemplate{}, client.MatchingLabels{testcluster.RunLabel: prefix})
	})
	for i := range n {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		if i%2 == 0 {
			// On the cluster with another image: diff shows a change.
			obj := &v1.SandboxTemplate{}
			obj.Name, obj.Labels, obj.Spec.Image = name, map[string]string{testcluster.RunLabel: prefix}, "python:3.11"
			if err := cluster.Client.Create(ctx, obj); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(testcluster.TemplateYAML(name, prefix)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bin, err := buildOnce()
	if err != nil {
		b.Fatal(err)
	}
	kubectl, err := testcluster.ToolBin("kube")
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	run := func(name string, want int, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		_ = cmd.Run()
		took := time.Since(start)
		if code := cmd.ProcessState.ExitCode(); code != want {
			b.Fatalf("%s %s: exit %d, want %d\n%s", filepath.Base(name), args[0], code, want, stderr.String())
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, "throttling") || strings.Contains(out, "Waited for") {
			b.Fatalf("%s %s printed client-go's throttling:\n%s", filepath.Base(name), args[0], out)
		}
		return took
	}
	// A warm-up of each, so both run with a discovery cache.
	run(bin, 1, "diff", "--path", dir)
	run(filepath.Join(kubectl, "kubectl"), 1, "diff", "--server-side", "--force-conflicts", "--cache-dir", cache, "-f", dir)
	var ours, floor time.Duration
	for range b.N {
		ours += run(bin, 1, "diff", "--path", dir)
		floor += run(filepath.Join(kubectl, "kubectl"), 1, "diff", "--server-side", "--force-conflicts", "--cache-dir", cache, "-f", dir)
	}
	b.ReportMetric(ours.Seconds()/float64(b.N), "diff-s")
	b.ReportMetric(floor.Seconds()/float64(b.N), "kubectl-diff-s")
	b.ReportMetric(float64(ours)/float64(floor), "ratio")
}
